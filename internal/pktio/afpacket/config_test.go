package afpacket

import (
	"os"
	"testing"
)

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

// TestV2Layout: the V2 ring's default slot holds an MTU-sized frame with
// two tags behind the kernel's headers and no more, and its block holds
// whole slots (a slot's offset is index x SlotSize).
func TestV2Layout(t *testing.T) {
	page := os.Getpagesize()
	for _, c := range []struct {
		mtu, headroom int
		vnet          bool
		slot          int
	}{
		{1500, 0, true, 1600},   // 76 + 14 + 8 + 1500 = 1598
		{1500, 0, false, 1600},  // 66 + 1522 = 1588
		{1280, 0, true, 1600},   // never below MTU 1500's
		{1600, 0, true, 1712},   // 76 + 1622 = 1698
		{9000, 0, true, 2048},   // jumbo frames take the copy path
		{1500, 64, true, 1632},  // reserve 32 + 4 + 64 - 66 = 34: 110 + 1522
		{1500, 256, true, 1824}, // reserve 226
	} {
		cfg, err := Config{Ring: RingV2, Queues: 2, NoOffload: !c.vnet, Headroom: c.headroom}.withDefaultsFor(c.mtu)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if cfg.SlotSize != c.slot {
			t.Errorf("%+v: slot %d, want %d", c, cfg.SlotSize, c.slot)
		}
		if cfg.BlockSize%cfg.SlotSize != 0 || cfg.BlockSize%page != 0 || cfg.BlockSize < minV2BlockSize {
			t.Errorf("%+v: block %d for slot %d", c, cfg.BlockSize, cfg.SlotSize)
		}
		if mem := cfg.BlockSize * cfg.Blocks * cfg.Queues; mem > portRingBudget || mem < portRingBudget*9/10 {
			t.Errorf("%+v: %d bytes of ring, want most of the %d budget", c, mem, portRingBudget)
		}
	}
	// The default port: 2,560 slots a queue, 2,048 before.
	cfg, _ := Config{Ring: RingV2, Queues: 2}.withDefaultsFor(1500)
	if slots := cfg.BlockSize / cfg.SlotSize * cfg.Blocks; slots < 2560 {
		t.Errorf("%d slots a queue, want at least 2,560", slots)
	}
}
