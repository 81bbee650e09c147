package l3_test

import "net/netip"

type netipAddr = netip.Addr

func parseAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
