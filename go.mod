module github.com/netfwd/netfwd

go 1.26.0

require (
	github.com/gaissmai/bart v0.30.0
	github.com/google/gopacket v1.1.19
	github.com/mdlayher/packet v1.2.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/mdlayher/socket v0.7.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
)
