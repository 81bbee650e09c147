// Tests: this package against gopacket's pcapgo (the reference) both ways
// with random records, hand-built big-endian and gzip files, and malformed
// files, which must fail with an error, never a panic or a huge allocation.
package pcapfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

type record struct {
	ts   time.Time
	data []byte
	orig int
}

// randomRecords draws frames of 0..snaplen bytes with original lengths at
// or above them and timestamps anywhere in pcap's 32-bit seconds range.
func randomRecords(rng *rand.Rand, n int, snaplen uint32, micros bool) []record {
	out := make([]record, n)
	for i := range out {
		data := make([]byte, rng.Intn(int(snaplen)+1))
		rng.Read(data)
		ns := rng.Int63n(int64(time.Second))
		if micros {
			ns -= ns % 1000
		}
		out[i] = record{
			ts:   time.Unix(int64(rng.Uint32()), ns).UTC(),
			data: data,
			orig: len(data) + rng.Intn(3)*rng.Intn(1000),
		}
	}
	return out
}

func TestWriterBytesMatchPcapgo(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 50; trial++ {
		snaplen := uint32(1 + rng.Intn(2000))
		recs := randomRecords(rng, rng.Intn(20), snaplen, true)
		var ours, ref bytes.Buffer
		w, err := NewWriter(&ours, snaplen)
		if err != nil {
			t.Fatal(err)
		}
		rw := pcapgo.NewWriter(&ref)
		if err := rw.WriteFileHeader(snaplen, layers.LinkTypeEthernet); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WritePacket(r.ts, r.data, r.orig); err != nil {
				t.Fatal(err)
			}
			ci := gopacket.CaptureInfo{Timestamp: r.ts, CaptureLength: len(r.data), Length: r.orig}
			if err := rw.WritePacket(ci, r.data); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(ours.Bytes(), ref.Bytes()) {
			t.Fatalf("trial %d: %d bytes written differ from pcapgo's %d", trial, ours.Len(), ref.Len())
		}
	}
}

// readAll reads every record with this package's Reader.
func readAll(t *testing.T, b []byte) (*Reader, []record) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	for {
		data, ts, orig, err := r.ReadPacket()
		if err == io.EOF {
			return r, out
		}
		if err != nil {
			t.Fatalf("record %d: %v", len(out), err)
		}
		out = append(out, record{ts, data, orig})
	}
}

// readAllPcapgo reads every record with the reference reader.
func readAllPcapgo(t *testing.T, pr *pcapgo.Reader) []record {
	t.Helper()
	var out []record
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("pcapgo, record %d: %v", len(out), err)
		}
		out = append(out, record{ci.Timestamp, data, ci.Length})
	}
}

func sameRecords(t *testing.T, got, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !got[i].ts.Equal(want[i].ts) || got[i].orig != want[i].orig || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("record %d: ts %v orig %d len %d, want ts %v orig %d len %d",
				i, got[i].ts, got[i].orig, len(got[i].data), want[i].ts, want[i].orig, len(want[i].data))
		}
	}
}

func TestReaderReadsPcapgoFiles(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 50; trial++ {
		nanos := trial%2 == 1
		snaplen := uint32(1 + rng.Intn(2000))
		recs := randomRecords(rng, rng.Intn(20), snaplen, !nanos)
		var buf bytes.Buffer
		rw := pcapgo.NewWriter(&buf)
		if nanos {
			rw = pcapgo.NewWriterNanos(&buf)
		}
		if err := rw.WriteFileHeader(snaplen, layers.LinkTypeEthernet); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := rw.WritePacket(gopacket.CaptureInfo{Timestamp: r.ts, CaptureLength: len(r.data), Length: r.orig}, r.data); err != nil {
				t.Fatal(err)
			}
		}
		file := buf.Bytes()
		if trial%5 == 0 {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(file)
			zw.Close()
			file = z.Bytes()
		}
		r, got := readAll(t, file)
		if r.LinkType() != LinkTypeEthernet || r.Snaplen() != snaplen {
			t.Fatalf("header: link type %d snaplen %d, want %d %d", r.LinkType(), r.Snaplen(), LinkTypeEthernet, snaplen)
		}
		sameRecords(t, got, recs)
	}
}

func TestPcapgoReadsOurFiles(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 50; trial++ {
		snaplen := uint32(1 + rng.Intn(2000))
		recs := randomRecords(rng, rng.Intn(20), snaplen, true)
		var buf bytes.Buffer
		w, err := NewWriter(&buf, snaplen)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WritePacket(r.ts, r.data, r.orig); err != nil {
				t.Fatal(err)
			}
		}
		pr, err := pcapgo.NewReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if pr.LinkType() != layers.LinkTypeEthernet || pr.Snaplen() != snaplen {
			t.Fatalf("pcapgo reads link type %v snaplen %d", pr.LinkType(), pr.Snaplen())
		}
		sameRecords(t, readAllPcapgo(t, pr), recs)
	}
}

// bigEndianFile builds a file as a big-endian machine's libpcap writes it.
func bigEndianFile(magic uint32, snaplen uint32, recs []record, nsFactor int) []byte {
	var b bytes.Buffer
	be := binary.BigEndian
	h := make([]byte, fileHeader)
	be.PutUint32(h[0:4], magic)
	be.PutUint16(h[4:6], 2)
	be.PutUint16(h[6:8], 4)
	be.PutUint32(h[16:20], snaplen)
	be.PutUint32(h[20:24], LinkTypeEthernet)
	b.Write(h)
	for _, r := range recs {
		rh := make([]byte, recHeader)
		be.PutUint32(rh[0:4], uint32(r.ts.Unix()))
		be.PutUint32(rh[4:8], uint32(r.ts.Nanosecond()/nsFactor))
		be.PutUint32(rh[8:12], uint32(len(r.data)))
		be.PutUint32(rh[12:16], uint32(r.orig))
		b.Write(rh)
		b.Write(r.data)
	}
	return b.Bytes()
}

func TestReaderBigEndianAgreesWithPcapgo(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for _, c := range []struct {
		magic  uint32
		factor int
	}{{magicMicros, 1000}, {magicNanos, 1}} {
		recs := randomRecords(rng, 30, 1500, c.factor == 1000)
		file := bigEndianFile(c.magic, 1500, recs, c.factor)
		_, got := readAll(t, file)
		sameRecords(t, got, recs)
		pr, err := pcapgo.NewReader(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, readAllPcapgo(t, pr), recs)
	}
}

// A record longer than the header's snap length is read whole, as libpcap
// does (pcapgo refuses it): dpkt writes such files by default.
func TestReaderRecordBeyondSnaplen(t *testing.T) {
	recs := []record{{time.Unix(1, 0).UTC(), bytes.Repeat([]byte{7}, 1600), 1600}}
	file := bigEndianFile(magicMicros, 1500, recs, 1000)
	_, got := readAll(t, file)
	sameRecords(t, got, recs)
}

func TestWriterRefuses(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(time.Now(), make([]byte, 101), 101); err == nil {
		t.Error("a record longer than the snap length was written")
	}
	if err := w.WritePacket(time.Now(), make([]byte, 50), 49); err == nil {
		t.Error("a record whose captured length exceeds its original length was written")
	}
	if buf.Len() != fileHeader {
		t.Errorf("refused records left %d bytes behind the header", buf.Len()-fileHeader)
	}
}

func TestReaderMalformed(t *testing.T) {
	good := bigEndianFile(magicMicros, 1500, []record{{time.Unix(5, 0).UTC(), []byte{1, 2, 3, 4}, 60}}, 1000)
	set := func(off int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	for _, c := range []struct {
		name    string
		file    []byte
		header  string // error from NewReader containing this, or "" if the header reads
		record  string // error from the first ReadPacket containing this
		wantEOF bool   // the record error is io.ErrUnexpectedEOF
	}{
		{name: "empty", file: nil, header: "unexpected EOF"},
		{name: "short header", file: good[:10], header: "unexpected EOF"},
		{name: "pcapng", file: append([]byte{0x0a, 0x0d, 0x0d, 0x0a}, good[4:]...), header: "not a pcap file"},
		{name: "version 3.0", file: set(4, 3<<16), header: "version 3.0"},
		{name: "short record header", file: good[:fileHeader+9], wantEOF: true},
		{name: "short record data", file: good[:len(good)-1], wantEOF: true},
		{name: "captured beyond original", file: set(fileHeader+12, 3), record: "exceeds the original length"},
		{name: "huge captured length", file: set(fileHeader+8, 0xffffffff), record: "exceeds the original length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(c.file))
			if c.header != "" {
				if err == nil || !strings.Contains(err.Error(), c.header) {
					t.Fatalf("NewReader: %v, want an error containing %q", err, c.header)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, _, _, err = r.ReadPacket()
			switch {
			case c.wantEOF && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("ReadPacket: %v, want unexpected EOF", err)
			case c.record != "" && (err == nil || !strings.Contains(err.Error(), c.record)):
				t.Fatalf("ReadPacket: %v, want an error containing %q", err, c.record)
			}
		})
	}
	// Both lengths huge: refused by the bound, before any allocation.
	b := set(fileHeader+8, MaxSnaplen+1)
	binary.BigEndian.PutUint32(b[fileHeader+12:], MaxSnaplen+1)
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := r.ReadPacket(); err == nil || !strings.Contains(err.Error(), "exceeds 262144") {
		t.Fatalf("ReadPacket of a %d-byte record: %v", MaxSnaplen+1, err)
	}
}

// FuzzReader: any input reads to an error or EOF without panicking, and a
// file pcapgo reads without error reads the same here.
func FuzzReader(f *testing.F) {
	f.Add(bigEndianFile(magicMicros, 1500, []record{{time.Unix(5, 0).UTC(), []byte{1, 2, 3, 4}, 60}}, 1000))
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, 64)
	w.WritePacket(time.Unix(7, 8000), []byte("frame"), 64)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, file []byte) {
		var got []record
		var ourErr error
		if r, err := NewReader(bytes.NewReader(file)); err != nil {
			ourErr = err
		} else {
			for len(got) < 1000 {
				data, ts, orig, err := r.ReadPacket()
				if err != nil {
					if err != io.EOF {
						ourErr = err
					}
					break
				}
				got = append(got, record{ts, data, orig})
			}
		}
		pr, err := pcapgo.NewReader(bytes.NewReader(file))
		if err != nil {
			return
		}
		var ref []record
		for len(ref) < 1000 {
			data, ci, err := pr.ReadPacketData()
			if err == io.EOF {
				break
			}
			if err != nil {
				return // pcapgo refuses what this reader may read (beyond the snap length)
			}
			ref = append(ref, record{ci.Timestamp, data, ci.Length})
		}
		// pcapgo reads a record whose data is missing entirely as a clean
		// end (io.ReadFull of nothing is io.EOF), where this reader reports
		// the record cut short or its length out of bounds: the records
		// before it must be the same, and neither may read more.
		if len(got) != len(ref) {
			t.Fatalf("pcapgo reads %d records, this reader %d (stopped by %v)", len(ref), len(got), ourErr)
		}
		// Timestamps are compared by the tests above, on valid fractions:
		// pcapgo multiplies a microsecond fraction by 1000 in 32 bits,
		// which wraps for a corrupt fraction >= 4,294,968.
		for i := range got {
			if got[i].orig != ref[i].orig || !bytes.Equal(got[i].data, ref[i].data) {
				t.Fatalf("record %d: orig %d len %d, pcapgo reads orig %d len %d", i, got[i].orig, len(got[i].data), ref[i].orig, len(ref[i].data))
			}
		}
	})
}
