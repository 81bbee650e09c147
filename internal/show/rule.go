package show

// Policy routing rules: `ip rule show` lines and `ip -j rule show`
// objects, both from the Rule value, as iproute2 6.1's print_rule prints
// the kernel's dump (fib_nl_fill_rule): `PRIO:\t[not ]from SRC[ to DST]
// [ tos T][ fwmark M[/K]][ iif D][ oif D][ lookup [l3mdev-table]]
// [ ipproto P][ sport N[-M]][ dport N[-M]][ lookup TABLE
// [ suppress_prefixlength N]][ goto N [unresolved]| nop| ACTION][ proto P]`.
// The mask is printed unless it is 0xffffffff (a bare non-zero mark); the
// protocol unless it is unspec or kernel. Devices always resolve in
// netfwd (a rule's device is a name), so `[detached]` never appears.
//
// Locking: reads a published rule list.

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// present is a JSON null that is printed (iproute2's print_null), where
// a nil RawMessage is left out.
var present = json.RawMessage("null")

// Rule is a rule in `ip -j rule show` form (the fields in print_rule's
// order); Text prints the same value as `ip rule show` does.
type Rule struct {
	Priority          uint32          `json:"priority"`
	Not               json.RawMessage `json:"not,omitempty"`
	Src               string          `json:"src"`
	SrcLen            *int            `json:"srclen,omitempty"`
	Dst               string          `json:"dst,omitempty"`
	DstLen            *int            `json:"dstlen,omitempty"`
	TOS               string          `json:"tos,omitempty"`
	FWMark            string          `json:"fwmark,omitempty"`
	FWMask            string          `json:"fwmask,omitempty"`
	IIF               string          `json:"iif,omitempty"`
	OIF               string          `json:"oif,omitempty"`
	L3mdev            json.RawMessage `json:"l3mdev,omitempty"`
	IPProto           string          `json:"ipproto,omitempty"`
	SPort             *uint16         `json:"sport,omitempty"`
	SPortStart        *uint16         `json:"sport_start,omitempty"`
	SPortEnd          *uint16         `json:"sport_end,omitempty"`
	DPort             *uint16         `json:"dport,omitempty"`
	DPortStart        *uint16         `json:"dport_start,omitempty"`
	DPortEnd          *uint16         `json:"dport_end,omitempty"`
	Table             string          `json:"table,omitempty"`
	SuppressPrefixLen *int            `json:"suppress_prefixlen,omitempty"`
	Goto              *uint32         `json:"goto,omitempty"`
	Unresolved        json.RawMessage `json:"unresolved,omitempty"`
	Nop               json.RawMessage `json:"nop,omitempty"`
	Action            string          `json:"action,omitempty"`
	Protocol          string          `json:"protocol,omitempty"`
}

// RuleOf describes r, one of the list rules (for goto's [unresolved]).
func RuleOf(rules []fib.Rule, r *fib.Rule) Rule {
	j := Rule{Priority: r.Priority, Src: "all"}
	if r.Invert {
		j.Not = present
	}
	if r.Src.IsValid() && r.Src.Bits() > 0 {
		j.Src = r.Src.Addr().String()
		if n := r.Src.Bits(); n != 32 {
			j.SrcLen = &n
		}
	}
	if r.Dst.IsValid() && r.Dst.Bits() > 0 {
		j.Dst = r.Dst.Addr().String()
		if n := r.Dst.Bits(); n != 32 {
			j.DstLen = &n
		}
	}
	if r.TOS != 0 {
		j.TOS = config.DSFieldName(r.TOS)
	}
	if r.Mark != 0 || r.Mask != 0 {
		j.FWMark = hex0x(r.Mark)
		if r.Mask != 0xffffffff {
			j.FWMask = hex0x(r.Mask)
		}
	}
	j.IIF, j.OIF = r.IIF, r.OIF
	if r.L3mdev {
		j.L3mdev = present
	}
	if r.IPProto != 0 {
		j.IPProto = config.IPProtoName(r.IPProto)
	}
	j.SPort, j.SPortStart, j.SPortEnd = portRange(r.SPort)
	j.DPort, j.DPortStart, j.DPortEnd = portRange(r.DPort)
	if r.Table != 0 {
		j.Table = fib.TableName(r.Table)
		if r.SuppressPrefixLen >= 0 {
			n := r.SuppressPrefixLen
			j.SuppressPrefixLen = &n
		}
	}
	switch r.Action {
	case fib.RuleGoto:
		g := r.Goto
		j.Goto = &g
		if fib.RuleUnresolved(rules, r) {
			j.Unresolved = present
		}
	case fib.RuleNop:
		j.Nop = present
	case fib.RuleLookup:
	default:
		j.Action = r.Action.String()
	}
	if r.Proto != 0 && r.Proto != fib.ProtoKernel {
		j.Protocol = r.Proto.String()
	}
	return j
}

// hex0x is C's %#llx: 0x-prefixed, but plain 0 for zero.
func hex0x(v uint32) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(uint64(v), 16)
}

// portRange is print_rule's sport/dport: one port, or a range's ends.
func portRange(p fib.PortRange) (one, lo, hi *uint16) {
	if !p.Set() {
		return nil, nil, nil
	}
	if p.Lo == p.Hi {
		return &p.Lo, nil, nil
	}
	return nil, &p.Lo, &p.Hi
}

// Text is the `ip rule show` line, with its newline.
func (j *Rule) Text() string {
	b := strconv.AppendUint(nil, uint64(j.Priority), 10)
	b = append(b, ":\t"...)
	if j.Not != nil {
		b = append(b, "not "...)
	}
	b = append(b, "from "+j.Src...)
	b = appendLen(b, j.SrcLen)
	if j.Dst != "" {
		b = append(b, " to "+j.Dst...)
		b = appendLen(b, j.DstLen)
	}
	b = appendWord(b, " tos ", j.TOS)
	if j.FWMark != "" {
		b = append(b, " fwmark "+j.FWMark...)
		if j.FWMask != "" {
			b = append(b, "/"+j.FWMask...)
		}
	}
	b = appendWord(b, " iif ", j.IIF)
	b = appendWord(b, " oif ", j.OIF)
	if j.L3mdev != nil {
		b = append(b, " lookup [l3mdev-table]"...)
	}
	b = appendWord(b, " ipproto ", j.IPProto)
	b = appendPorts(b, " sport ", j.SPort, j.SPortStart, j.SPortEnd)
	b = appendPorts(b, " dport ", j.DPort, j.DPortStart, j.DPortEnd)
	if j.Table != "" {
		b = append(b, " lookup "+j.Table...)
		if j.SuppressPrefixLen != nil {
			b = append(b, " suppress_prefixlength "...)
			b = strconv.AppendInt(b, int64(*j.SuppressPrefixLen), 10)
		}
	}
	switch {
	case j.Goto != nil:
		b = append(b, " goto "...)
		b = strconv.AppendUint(b, uint64(*j.Goto), 10)
		if j.Unresolved != nil {
			b = append(b, " [unresolved]"...)
		}
	case j.Nop != nil:
		b = append(b, " nop"...)
	case j.Action != "":
		b = append(b, " "+j.Action...)
	}
	b = appendWord(b, " proto ", j.Protocol)
	return string(append(b, '\n'))
}

func appendLen(b []byte, n *int) []byte {
	if n == nil {
		return b
	}
	return strconv.AppendInt(append(b, '/'), int64(*n), 10)
}

func appendWord(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return append(append(b, key...), v...)
}

func appendPorts(b []byte, key string, one, lo, hi *uint16) []byte {
	switch {
	case one != nil:
		return strconv.AppendUint(append(b, key...), uint64(*one), 10)
	case lo != nil:
		b = strconv.AppendUint(append(b, key...), uint64(*lo), 10)
		return strconv.AppendUint(append(b, '-'), uint64(*hi), 10)
	}
	return b
}

// Rules writes `ip rule show [SELECTOR]`: the rules the filter takes, in
// walk order.
func Rules(w io.Writer, f *fib.FIB, filter config.RuleFilter, asJSON bool) error {
	rules := f.Rules()
	var list []Rule
	for i := range rules {
		if filter.Selects(&rules[i]) {
			list = append(list, RuleOf(rules, &rules[i]))
		}
	}
	if asJSON {
		return writeJSONArray(w, list)
	}
	for i := range list {
		if _, err := io.WriteString(w, list[i].Text()); err != nil {
			return err
		}
	}
	return nil
}
