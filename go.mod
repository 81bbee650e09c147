module github.com/netfwd/netfwd

go 1.26

require github.com/gaissmai/bart v0.30.0
