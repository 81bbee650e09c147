package fpm

// ApplyStream: the server's decode-and-apply loop without a socket, for
// benchmarks and tools that replay a recorded stream in process.
//
// Locking: as the server (FIB transactions).

import "github.com/netfwd/netfwd/fib"

// avgFrame is the size of zebra's route frames with nexthop groups (56
// bytes) or without (64): the transaction size hint per stream byte.
const avgFrame = 60

// ApplyStream decodes and applies a complete FPM stream to f through tr,
// in transactions of at most batch messages (each sized as one), frame by
// frame as the server does. It returns the frames applied and the first
// malformed-frame error (the frames before it stay applied).
func ApplyStream(f *fib.FIB, tr *Translator, stream []byte, batch int) (int, error) {
	var fr Frame
	var tx *fib.Txn
	frames, msgs := 0, 0
	var restoreGC func()
	defer func() {
		if tx != nil {
			tx.Commit()
		}
		if restoreGC != nil {
			restoreGC()
		}
	}()
	for b := stream; len(b) > 0; {
		typ, payload, n, err := NextFrame(b)
		if err != nil {
			return frames, err
		}
		if n == 0 {
			return frames, ErrFrameLength // a truncated last frame
		}
		b = b[n:]
		frames++
		if typ != TypeNetlink {
			continue
		}
		if err := fr.Decode(payload); err != nil {
			return frames - 1, err
		}
		if tx == nil {
			hint := min(batch, len(b)/avgFrame+1)
			tx = f.Begin(hint)
			if tx.Bulk() {
				tx.AllowChanges(maxChanges)
				if restoreGC == nil {
					restoreGC = BulkGC()
				}
			}
		}
		tr.ApplyFrame(tx, &fr)
		if msgs += len(fr.Msgs); msgs >= batch {
			tx.Commit()
			tx, msgs = nil, 0
		}
	}
	return frames, nil
}
