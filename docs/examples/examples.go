// Package examples embeds the example configurations and captures, so the
// netfwd binary can run its built-in example anywhere.
package examples

import "embed"

// FS holds replay.conf, router.conf and the replay captures eth0/1/2.pcap.
//
//go:embed *.conf *.pcap
var FS embed.FS
