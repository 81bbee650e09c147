// Package hostpath gives the box's own daemons (BGP, SSH, BFD) a way
// through netfwd's ports, as VPP's linux-cp and SONiC's host interfaces do:
// every dataplane L3 interface (a routed port or a VLAN interface of a
// bridge) gets a Linux twin, a TAP device with the router's MAC, MTU and
// IPv4 addresses of that interface, in the router's network namespace.
//
// The datapath punts what the kernel must see into the twin
// ([Twin.Punt], [Twin.PuntPacket]: a copy into a lock-free queue, rate
// limited per traffic class, never blocking the worker), and every frame
// the kernel transmits on the twin reaches the Inject callback, which
// sends it out of the paired port.
//
// A [Manager] owns the twins of one namespace. [Manager.Sync] makes them
// match a list of [Spec]s (name, MAC, MTU, addresses, rate limits): it
// creates, re-creates, updates and removes, and is idempotent. TAPs are
// not persistent: they vanish with the process, also after kill -9; a
// leftover persistent TAP of the same name is replaced.
//
// docs/hostpath.md has the design (what is punted, the address direction,
// ARP, naming, lifecycle, rate limits, counters) and the proposed
// configuration surface.
package hostpath
