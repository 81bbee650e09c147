package show

// `bridge fdb show [br BR] [brport|dev PORT]`: byte for byte in iproute2's
// text format (including its trailing space after `master BR` for dynamic
// entries), or `bridge -j fdb show` objects. Order: Linux dumps in hash
// order; netfwd sorts (by port, the bridge device last, then VID and MAC).

import (
	"io"
	"strconv"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
)

// FDBEntry is one entry in `bridge -j fdb show` form.
type FDBEntry struct {
	MAC    string   `json:"mac"`
	VLAN   uint16   `json:"vlan,omitempty"`
	Dev    string   `json:"dev"`              // the port, or the bridge for its own entries
	Master string   `json:"master,omitempty"` // the bridge, for entries of a port
	Flags  []string `json:"flags"`            // self (the bridge's own), sticky, learned
	// State is permanent (local), static, stale (dynamic, past ageing_time
	// but not yet aged out) or empty (dynamic).
	State  string `json:"state,omitempty"`
	bridge string
	sticky bool
}

// FDBEntryOf describes one entry of bridge b at clock value now.
func FDBEntryOf(b *l2.Bridge, en *l2.FDBEntry, now int64) FDBEntry {
	j := FDBEntry{MAC: en.MAC.String(), VLAN: en.VID, Dev: b.Name, Flags: []string{}, bridge: b.Name, sticky: en.Sticky}
	if en.Port != nil {
		j.Dev, j.Master = en.Port.Name, b.Name
	} else {
		j.Flags = append(j.Flags, "self")
	}
	switch {
	case en.Local:
		j.State = "permanent"
	case en.Static:
		j.State = "static"
	case en.Updated+int64(b.AgeingTime()) <= now:
		j.State = "stale"
	}
	if en.Sticky {
		j.Flags = append(j.Flags, "sticky")
	}
	if en.Learned {
		j.Flags = append(j.Flags, "learned")
	}
	return j
}

// AppendText appends "MAC dev DEV [vlan V ][sticky ]master BR STATE" and a
// newline.
func (j *FDBEntry) AppendText(b []byte) []byte {
	b = append(b, j.MAC+" dev "+j.Dev+" "...)
	if j.VLAN != 0 {
		b = append(b, "vlan "...)
		b = strconv.AppendUint(b, uint64(j.VLAN), 10)
		b = append(b, ' ')
	}
	if j.sticky {
		b = append(b, "sticky "...)
	}
	b = append(b, "master "+j.bridge+" "+j.State+"\n"...)
	return b
}

// fdb answers `bridge fdb show`.
func fdb(w io.Writer, d *l2.Domain, q config.FDBShow, asJSON bool) error {
	a := jsonArray{w: w}
	now := d.Clock().Now()
	var line []byte
	for _, b := range d.Bridges() {
		if q.Bridge != "" && b.Name != q.Bridge {
			continue
		}
		entries := b.FDB().Entries()
		for i := range entries {
			en := &entries[i]
			if q.Port != "" && (en.Port == nil && q.Port != b.Name || en.Port != nil && en.Port.Name != q.Port) {
				continue
			}
			j := FDBEntryOf(b, en, now)
			if asJSON {
				a.add(j)
				continue
			}
			line = j.AppendText(line[:0])
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	if asJSON {
		return a.close()
	}
	return nil
}
