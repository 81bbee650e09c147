package afpacket

import "testing"

// TestRingBlocksDefault: the receive rings of a port share a budget, with
// at least 4 and at most 256 blocks a queue (8 MiB a port: 32 blocks of
// 128 KiB a queue with two queues); an explicit Blocks wins.
func TestRingBlocksDefault(t *testing.T) {
	for _, c := range []struct{ queues, blockSize, blocks, want int }{
		{1, 0, 0, 64},
		{2, 0, 0, 32},
		{4, 0, 0, 16},
		{16, 0, 0, 4},
		{64, 0, 0, 4},
		{2, 1 << 20, 0, 4},
		{2, 4096, 0, 256},
		{2, 0, 8, 8},
	} {
		cfg, err := Config{Queues: c.queues, BlockSize: c.blockSize, Blocks: c.blocks}.withDefaults()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if cfg.Blocks != c.want {
			t.Errorf("queues %d block size %d blocks %d: got %d blocks, want %d", c.queues, c.blockSize, c.blocks, cfg.Blocks, c.want)
		}
	}
}

// TestRingConfigValidated: the V2 slot size is checked before a socket is
// made; a bad ring kind is refused.
func TestRingConfigValidated(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Ring: RingV2}, true},
		{Config{Ring: RingV2, SlotSize: 4096}, true},
		{Config{Ring: RingV2, SlotSize: 3000}, false},
		{Config{Ring: RingV2, SlotSize: 256}, false},
		{Config{Ring: RingV2, BlockSize: 4096, SlotSize: 8192}, false},
		{Config{Ring: Ring(7)}, false},
	} {
		cfg, err := c.cfg.withDefaults()
		if (err == nil) != c.ok {
			t.Errorf("%+v: err %v, want ok=%v", c.cfg, err, c.ok)
		}
		if err == nil && cfg.SlotSize == 0 {
			t.Errorf("%+v: SlotSize not defaulted", c.cfg)
		}
	}
}
