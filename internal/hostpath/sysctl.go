package hostpath

// Per-twin sysctls, written through /proc/sys in the twins' namespace (a
// /proc/sys/net file shows the namespace of the thread that opens it, so
// the writes run in pktio.InNetns):
//
//	net.ipv4.conf.TWIN.rp_filter = 0   punted packets come from anywhere behind
//	                                   netfwd's routes, which the kernel's own
//	                                   table does not know: a reverse-path check
//	                                   would drop them
//	net.ipv4.conf.TWIN.forwarding = 0  the kernel must never route what arrives
//	                                   on a twin; netfwd routes
//	net.ipv6.conf.TWIN.disable_ipv6    as the Spec says (netfwd routes IPv4)
//
// The kernel uses the larger of conf.all.rp_filter and the twin's, so a
// namespace with conf.all.rp_filter set still filters: allRPFilter reads it
// so the Manager can warn.
//
// Locking: none; called under the Manager's lock.

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/netfwd/netfwd/internal/pktio"
)

// sysctlPath is the /proc/sys file of an interface setting.
func sysctlPath(family, iface, key string) string {
	return "/proc/sys/net/" + family + "/conf/" + iface + "/" + key
}

// applySysctls writes the twin's settings; it returns conf.all.rp_filter
// as read in the same namespace.
func applySysctls(netns, name string, disableIPv6 bool) (allRPFilter string, err error) {
	err = pktio.InNetns(netns, func() error {
		if err := writeSysctl(sysctlPath("ipv4", name, "rp_filter"), "0"); err != nil {
			return err
		}
		if err := writeSysctl(sysctlPath("ipv4", name, "forwarding"), "0"); err != nil {
			return err
		}
		v6 := "0"
		if disableIPv6 {
			v6 = "1"
		}
		// Without IPv6 in the kernel there is nothing to disable.
		if err := writeSysctl(sysctlPath("ipv6", name, "disable_ipv6"), v6); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		b, err := os.ReadFile(sysctlPath("ipv4", "all", "rp_filter"))
		allRPFilter = strings.TrimSpace(string(b))
		return err
	})
	return allRPFilter, err
}

func writeSysctl(path, value string) error {
	return os.WriteFile(path, []byte(value), 0)
}
