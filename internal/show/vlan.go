package show

// `bridge [-compressvlans] vlan show [dev D]`: byte for byte in iproute2's
// text format (a header, one block per device with a blank line after it,
// including iproute2's trailing spaces), or `bridge -j vlan show` objects.
// Devices: each bridge's ports in creation order, then the bridge itself.

import (
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
)

// DevVLANs is one device's VLANs in `bridge -j vlan show` form.
type DevVLANs struct {
	Ifname string      `json:"ifname"`
	VLANs  []VLANEntry `json:"vlans"`
}

// VLANEntry is one VLAN, or a range of VLANs with equal flags (-c).
type VLANEntry struct {
	VLAN    uint16   `json:"vlan"`
	VLANEnd uint16   `json:"vlanEnd,omitempty"`
	Flags   []string `json:"flags"` // PVID, Egress Untagged
}

// vlansOf describes one device's membership; compress merges consecutive
// VLANs with equal flags (never the pvid) into ranges, as `bridge -c`.
func vlansOf(m l2.VLANMembership, compress bool) DevVLANs {
	j := DevVLANs{Ifname: m.Dev}
	for _, v := range m.VLANs {
		if n := len(j.VLANs); compress && n > 0 && !v.PVID {
			last := &j.VLANs[n-1]
			end := max(last.VLANEnd, last.VLAN)
			if end+1 == v.VID && !hasFlag(last.Flags, "PVID") && hasFlag(last.Flags, "Egress Untagged") == v.Untagged {
				last.VLANEnd = v.VID
				continue
			}
		}
		e := VLANEntry{VLAN: v.VID, Flags: []string{}}
		if v.PVID {
			e.Flags = append(e.Flags, "PVID")
		}
		if v.Untagged {
			e.Flags = append(e.Flags, "Egress Untagged")
		}
		j.VLANs = append(j.VLANs, e)
	}
	return j
}

func hasFlag(flags []string, f string) bool {
	for _, x := range flags {
		if x == f {
			return true
		}
	}
	return false
}

// vlans answers `bridge vlan show` (the text header comes first, even with
// nothing to list, as iproute2 prints it).
func vlans(w io.Writer, d *l2.Domain, q config.VLANShow, asJSON bool) error {
	a := jsonArray{w: w}
	var sb strings.Builder
	if !asJSON {
		fmt.Fprintf(&sb, "%-16s  %s  \n", "port", "vlan-id")
	}
	for _, b := range d.Bridges() {
		for _, m := range b.VLANMemberships() {
			if q.Dev != "" && m.Dev != q.Dev {
				continue
			}
			j := vlansOf(m, q.Compress)
			if asJSON {
				a.add(j)
				continue
			}
			j.writeText(&sb)
		}
		if _, err := io.WriteString(w, sb.String()); err != nil {
			return err
		}
		sb.Reset()
	}
	if asJSON {
		return a.close()
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func (j *DevVLANs) writeText(sb *strings.Builder) {
	for i, v := range j.VLANs {
		name := ""
		if i == 0 {
			name = j.Ifname
		}
		fmt.Fprintf(sb, "%-16s  %d", name, v.VLAN)
		if v.VLANEnd != 0 {
			fmt.Fprintf(sb, "-%d", v.VLANEnd)
		}
		for _, f := range v.Flags {
			sb.WriteString(" " + f)
		}
		sb.WriteByte('\n')
	}
	sb.WriteByte('\n')
}
