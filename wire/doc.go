// Package wire has typed views and constants for the headers netfwd reads
// and writes, in the style of gVisor's tcpip/header: Ethernet and 802.1Q
// tags, ARP, IPv4, ICMP and the TCP/UDP fields the router touches, plus the
// Internet checksum and the two address types (MAC, Addr4). It is the one
// home of what crosses the wire: also the virtio-net header that packet
// sockets and TAPs put in front of frames, the completion of partial
// checksums, and the table of control-plane protocols (ControlProtos) from
// which pktio's control-ring filter is generated and with which the host
// path classifies.
//
// A view is a byte slice type (IPv4, ARP, ...) whose methods read and write
// fields in place; nothing is copied or allocated. Views trust their length:
// validate first (ParseIPv4, the caller's length checks), then read.
package wire
