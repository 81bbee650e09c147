package apply

// Carrier: the daemon reports the link state of the real interfaces it
// forwards on (netlink link messages). An interface without carrier is down
// for the router whatever the configuration says: the FIB skips routes
// through it (they fail over to the next metric or a shorter prefix), the
// router drops its frames, and its non-permanent neighbours are flushed
// (Linux's neigh_carrier_down). It comes back up with the carrier unless the
// configuration sets it down.
//
// Locking: Controller.mu (the same writer lock as Apply).

import "github.com/netfwd/netfwd/neigh"

// SetCarrier records a device's carrier and applies the resulting link
// state. It reports whether the router's view of the device changed.
func (c *Controller) SetCarrier(dev string, up bool) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.carrierSeen[dev] = true
	if c.carrierDown[dev] == !up {
		return false, nil
	}
	wasUp := c.up(c.settings, dev)
	if up {
		delete(c.carrierDown, dev)
	} else {
		c.carrierDown[dev] = true
	}
	nowUp := c.up(c.settings, dev)
	if wasUp == nowUp {
		return false, nil
	}
	tx := c.e.FIB().Begin(1)
	if err := tx.SetLinkUp(dev, nowUp); err != nil {
		tx.Abort()
		return false, err
	}
	if err := c.e.Router().SyncIfaces(c.vlans, c.effective(c.settings, tx.DevVRFs(), tx.DevVRF)); err != nil {
		tx.Abort()
		return false, err
	}
	tx.Commit()
	if !nowUp {
		if ifc := c.e.Router().Iface(dev); ifc != nil {
			var acts neigh.Actions
			c.e.Router().Neighbours().FlushDev(ifc.Index, true, c.e.Domain().Clock().Now(), &acts)
			c.mirror(&acts, ifaceMap(c.e.Router().Ifaces()))
		}
	}
	return true, nil
}

// CarrierDown reports whether the daemon reported the device without
// carrier.
func (c *Controller) CarrierDown(dev string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.carrierDown[dev]
}

// SetKernelMTU records the MTU the kernel reports for a device (the daemon
// follows its ports' link messages). It overrides the configured MTU: the
// kernel refuses longer frames whatever the configuration says. It reports
// whether the router's view changed.
func (c *Controller) SetKernelMTU(dev string, mtu int) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kernelMTU[dev] == mtu {
		return false, nil
	}
	c.kernelMTU[dev] = mtu
	f := c.e.FIB()
	if err := c.e.Router().SyncIfaces(c.vlans, c.effective(c.settings, f.DevVRFs(), f.DevVRF)); err != nil {
		return false, err
	}
	return true, nil
}

// ConfiguredMTU is the MTU the configuration sets for a device (0: none).
func (c *Controller) ConfiguredMTU(dev string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings[dev].MTU
}
