package afxdp

import "testing"

// TestXDPUMEMSized: WithUMEMBytes turns a byte budget into frames (8 to 64
// MiB of 2 KiB frames) and rings of half the frames, a power of two, valid
// for withDefaults; set values win.
func TestXDPUMEMSized(t *testing.T) {
	for _, c := range []struct {
		cfg                 WorkerConfig
		bytes               int
		wantFrames, wantRng int
	}{
		{WorkerConfig{}, 24 << 20, 12288, 4096},
		{WorkerConfig{}, 12 << 20, 6144, 2048},
		{WorkerConfig{}, 1 << 20, 4096, 2048},
		{WorkerConfig{}, 1 << 30, 32768, 16384},
		{WorkerConfig{FrameSize: 4096}, 24 << 20, 6144, 2048},
		{WorkerConfig{Frames: 40000}, 24 << 20, 40000, 0},
		{WorkerConfig{RingSize: 1024}, 24 << 20, 0, 1024},
	} {
		got := c.cfg.WithUMEMBytes(c.bytes)
		if got.Frames != c.wantFrames || got.RingSize != c.wantRng {
			t.Errorf("%+v with %d bytes: %d frames, ring %d; want %d, %d", c.cfg, c.bytes, got.Frames, got.RingSize, c.wantFrames, c.wantRng)
		}
		if _, err := got.withDefaults(); err != nil {
			t.Errorf("%+v with %d bytes: %v", c.cfg, c.bytes, err)
		}
	}
}
