package l2

// iproute2 output: `bridge fdb show` and `bridge vlan show`, byte for byte
// in iproute2's text format (including its trailing spaces), so scripts that
// parse Linux output parse ours.
//
// Order: Linux dumps in hash order; we sort (fdb: by port, bridge device
// last, then VID and MAC; vlan: ports in creation order, then the bridge).

import (
	"fmt"
	"io"
	"strings"
)

// WriteFDB writes the bridge's FDB as `bridge fdb show br BR` prints it:
// "MAC dev DEV [vlan V ][sticky ]master BR STATE", STATE being permanent
// (local), static, stale (dynamic, past ageing_time but not yet aged out)
// or empty (dynamic).
func (b *Bridge) WriteFDB(w io.Writer) error {
	now := b.d.clock.Now()
	ageing := b.cfg.Load().ageing
	var sb strings.Builder
	for _, e := range b.fdb.Entries() {
		dev := b.Name
		if e.Port != nil {
			dev = e.Port.Name
		}
		fmt.Fprintf(&sb, "%s dev %s ", e.MAC, dev)
		if e.VID != 0 {
			fmt.Fprintf(&sb, "vlan %d ", e.VID)
		}
		if e.Sticky {
			sb.WriteString("sticky ")
		}
		fmt.Fprintf(&sb, "master %s ", b.Name)
		switch {
		case e.Local:
			sb.WriteString("permanent")
		case e.Static:
			sb.WriteString("static")
		case e.Updated+ageing <= now:
			sb.WriteString("stale")
		}
		sb.WriteByte('\n')
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// vlanLine is one VLAN (or range) of one device.
type vlanLine struct {
	lo, hi         uint16
	pvid, untagged bool
}

// WriteVLANs writes `bridge vlan show` for the bridge's ports and the
// bridge itself; compress merges consecutive VLANs with equal flags into
// ranges, like `bridge -c vlan show`.
func (b *Bridge) WriteVLANs(w io.Writer, compress bool) error {
	b.d.mu.Lock()
	type dev struct {
		name  string
		lines []vlanLine
	}
	var devs []dev
	add := func(name string, each func(fn func(vid uint16, flags uint32))) {
		var ls []vlanLine
		each(func(vid uint16, f uint32) {
			l := vlanLine{lo: vid, hi: vid, pvid: f&pvPVID != 0, untagged: f&pvUntagged != 0}
			if n := len(ls); compress && n > 0 && !l.pvid && !ls[n-1].pvid &&
				ls[n-1].hi+1 == vid && ls[n-1].untagged == l.untagged {
				ls[n-1].hi = vid
				return
			}
			ls = append(ls, l)
		})
		if len(ls) > 0 {
			devs = append(devs, dev{name, ls})
		}
	}
	members := append([]*Port(nil), b.members...)
	sortPortsByID(members)
	for _, p := range members {
		add(p.Name, func(fn func(uint16, uint32)) {
			p.vlans.each(func(vid uint16, pv *PortVLAN) {
				if f := pv.flags.Load(); f&pvMember != 0 {
					fn(vid, f)
				}
			})
		})
	}
	add(b.Name, func(fn func(uint16, uint32)) {
		b.vlans.each(func(vid uint16, v *vlan) {
			if f := v.self.Load(); f&pvMember != 0 {
				fn(vid, f)
			}
		})
	})
	b.d.mu.Unlock()

	var sb strings.Builder
	fmt.Fprintf(&sb, "%-16s  %s  \n", "port", "vlan-id")
	for _, d := range devs {
		for i, l := range d.lines {
			name := ""
			if i == 0 {
				name = d.name
			}
			fmt.Fprintf(&sb, "%-16s  %d", name, l.lo)
			if l.hi != l.lo {
				fmt.Fprintf(&sb, "-%d", l.hi)
			}
			if l.pvid {
				sb.WriteString(" PVID")
			}
			if l.untagged {
				sb.WriteString(" Egress Untagged")
			}
			sb.WriteByte('\n')
		}
		sb.WriteByte('\n')
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func sortPortsByID(ps []*Port) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].ID < ps[j-1].ID; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
