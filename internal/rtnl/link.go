package rtnl

// Link and address messages: RTM_NEWLINK/RTM_DELLINK (struct ifinfomsg,
// IFLA_IFNAME) for the interface index -> name map, RTM_NEWADDR/RTM_DELADDR
// (struct ifaddrmsg) for the addresses the kernel mirror follows.

import (
	"encoding/binary"
	"net/netip"
)

// Link and address attributes and flags.
const (
	IFLA_IFNAME = 3

	IFA_ADDRESS = 1
	IFA_LOCAL   = 2
	IFA_FLAGS   = 8

	IFA_F_SECONDARY     = 0x01
	IFA_F_NOPREFIXROUTE = 0x200

	IFF_UP       = 0x1
	IFF_LOOPBACK = 0x8
	IFF_RUNNING  = 0x40

	// SizeofIfInfomsg is sizeof(struct ifinfomsg), SizeofIfAddrmsg sizeof(struct ifaddrmsg).
	SizeofIfInfomsg = 16
	SizeofIfAddrmsg = 8
)

// Link is a decoded link message (the parts netfwd uses).
type Link struct {
	Index uint32
	Flags uint32
	Name  string
}

// Decode fills l from a link message body. It allocates the name.
func (l *Link) Decode(body []byte) error {
	if len(body) < SizeofIfInfomsg {
		return ErrShortBody
	}
	*l = Link{Index: binary.NativeEndian.Uint32(body[4:]), Flags: binary.NativeEndian.Uint32(body[8:])}
	b := body[SizeofIfInfomsg:]
	for len(b) > 0 {
		typ, v, rest, err := nextAttr(b)
		if err != nil {
			return err
		}
		b = rest
		if typ == IFLA_IFNAME {
			for len(v) > 0 && v[len(v)-1] == 0 {
				v = v[:len(v)-1]
			}
			l.Name = string(v)
		}
	}
	return nil
}

// AppendLink appends a complete link message built from l.
func AppendLink(b []byte, typ, flags uint16, seq uint32, l *Link) []byte {
	b, start := beginMessage(b, typ, flags, seq)
	b = append(b, AF_UNSPEC, 0, 1, 0) // ARPHRD_ETHER
	b = binary.NativeEndian.AppendUint32(b, l.Index)
	b = binary.NativeEndian.AppendUint32(b, l.Flags)
	b = binary.NativeEndian.AppendUint32(b, 0)
	if l.Name != "" {
		b = AppendAttr(b, IFLA_IFNAME, append([]byte(l.Name), 0))
	}
	return endMessage(b, start)
}

// Addr is a decoded address message.
type Addr struct {
	Family    uint8
	PrefixLen uint8
	Flags     uint32 // ifa_flags, extended by IFA_FLAGS
	Scope     uint8
	Index     uint32
	// Local is the interface's own address (IFA_LOCAL, else IFA_ADDRESS);
	// Address is IFA_ADDRESS (the peer on point-to-point links).
	Local, Address netip.Addr
}

// Prefix returns the address with its prefix length (unmasked).
func (a *Addr) Prefix() netip.Prefix { return netip.PrefixFrom(a.Local, int(a.PrefixLen)) }

// Decode fills a from an address message body.
func (a *Addr) Decode(body []byte) error {
	if len(body) < SizeofIfAddrmsg {
		return ErrShortBody
	}
	*a = Addr{Family: body[0], PrefixLen: body[1], Flags: uint32(body[2]), Scope: body[3],
		Index: binary.NativeEndian.Uint32(body[4:])}
	b := body[SizeofIfAddrmsg:]
	for len(b) > 0 {
		typ, v, rest, err := nextAttr(b)
		if err != nil {
			return err
		}
		b = rest
		switch typ {
		case IFA_ADDRESS:
			if a.Address, err = addr(a.Family, v); err != nil {
				return err
			}
		case IFA_LOCAL:
			if a.Local, err = addr(a.Family, v); err != nil {
				return err
			}
		case IFA_FLAGS:
			if a.Flags, err = u32(v); err != nil {
				return err
			}
		}
	}
	if !a.Local.IsValid() {
		a.Local = a.Address
	}
	maxLen := 32
	if a.Family == AF_INET6 {
		maxLen = 128
	}
	if int(a.PrefixLen) > maxLen {
		return ErrPrefixLength
	}
	return nil
}

// AppendAddr appends a complete address message built from a.
func AppendAddr(b []byte, typ, flags uint16, seq uint32, a *Addr) []byte {
	b, start := beginMessage(b, typ, flags, seq)
	b = append(b, a.Family, a.PrefixLen, uint8(a.Flags), a.Scope)
	b = binary.NativeEndian.AppendUint32(b, a.Index)
	if a.Local.IsValid() {
		b = AppendAttrAddr(b, IFA_LOCAL, a.Local)
	}
	if a.Address.IsValid() {
		b = AppendAttrAddr(b, IFA_ADDRESS, a.Address)
	}
	if a.Flags > 0xff {
		b = AppendAttrU32(b, IFA_FLAGS, a.Flags)
	}
	return endMessage(b, start)
}
