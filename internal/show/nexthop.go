package show

// `ip nexthop show`: the nexthop objects by id, as `id N via G dev D`
// lines (with `dead linkdown` while their device is down), or `ip -j
// nexthop show` objects.

import (
	"io"
	"strconv"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// Nexthop is a nexthop object in `ip -j nexthop show` form.
type Nexthop struct {
	ID        uint32          `json:"id"`
	Gateway   string          `json:"gateway,omitempty"`
	Dev       string          `json:"dev,omitempty"`
	Blackhole bool            `json:"blackhole,omitempty"`
	Group     []NexthopMember `json:"group,omitempty"`
	Flags     []string        `json:"flags"`
	text      string          // the object as `ip nexthop show` prints it, after the id
}

// NexthopMember is one member of a group.
type NexthopMember struct {
	ID     uint32 `json:"id"`
	Weight uint16 `json:"weight,omitempty"`
}

// nexthops answers `ip nexthop show [id N]`.
func nexthops(w io.Writer, f *fib.FIB, q config.NexthopShow, asJSON bool) error {
	a := jsonArray{w: w}
	var b []byte
	for _, id := range f.NexthopIDs() {
		if q.ID != 0 && id != q.ID {
			continue
		}
		nh, ok := f.Nexthop(id)
		if !ok {
			continue
		}
		j := Nexthop{ID: id, Dev: nh.Dev, Flags: []string{}, text: nh.String()}
		if nh.Gateway.IsValid() {
			j.Gateway = nh.Gateway.String()
		}
		j.Blackhole = nh.Kind.String() == "blackhole"
		if nh.Group != nil {
			for _, m := range nh.Group.Members {
				j.Group = append(j.Group, NexthopMember{ID: m.NH.ID, Weight: m.Weight})
			}
		}
		if nh.Dead() {
			j.Flags = append(j.Flags, "dead", "linkdown")
		}
		if asJSON {
			a.add(j)
			continue
		}
		b = append(append(b[:0], "id "...), strconv.FormatUint(uint64(id), 10)...)
		b = append(append(b, ' '), j.text...)
		for _, fl := range j.Flags {
			b = append(append(b, ' '), fl...)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	if asJSON {
		return a.close()
	}
	return nil
}
