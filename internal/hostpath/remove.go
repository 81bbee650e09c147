package hostpath

// RemoveTwins: the explicit way to delete twins that outlive netfwd
// (Options.Persist), for `netfwd twins remove`. A twin is recognised by
// its ifalias (TwinAliasPrefix, set when netfwd creates or adopts it) or
// named by the caller. Twins a running netfwd holds are refused (stop it
// first); twin keepers of the namespace are ended when every twin goes.
//
// Locking: none; its own netlink socket.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// RemoveTwins deletes the twins in namespace netns ("" = the caller's):
// those named, or, with no names, every TAP whose ifalias marks it as a
// twin. It returns the names deleted; an error lists the twins it could
// not delete (the others are gone).
func RemoveTwins(netns string, names []string) ([]string, error) {
	nl, err := dialRtnl(netns)
	if err != nil {
		return nil, fmt.Errorf("hostpath: %w", err)
	}
	defer nl.close()
	nsID, err := netnsID(netns)
	if err != nil {
		return nil, fmt.Errorf("hostpath: %w", err)
	}
	links, err := nl.links()
	if err != nil {
		return nil, fmt.Errorf("hostpath: %w", err)
	}
	var errs []error
	var pick []linkInfo
	for _, n := range names {
		i := slices.IndexFunc(links, func(li linkInfo) bool { return li.name == n })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("%s: no such interface", n))
		case !links[i].isTAP():
			errs = append(errs, fmt.Errorf("%s is not a TAP device: not a twin", n))
		default:
			pick = append(pick, links[i])
		}
	}
	if len(names) == 0 {
		for _, li := range links {
			if li.isTAP() && strings.HasPrefix(li.alias, TwinAliasPrefix) {
				pick = append(pick, li)
			}
		}
	}
	keepers := map[int]bool{}
	var removed []string
	for _, li := range pick {
		var live []holder
		for _, h := range inNetns(tapHolders("/proc", li.name), nsID) {
			switch {
			case h.keeper:
				keepers[h.pid] = true
			case !h.keeper && !h.exiting:
				live = append(live, h)
			}
		}
		if len(live) > 0 {
			errs = append(errs, fmt.Errorf("%s is held by a running process %s (stop netfwd first)", li.name, holderList(live)))
			continue
		}
		if err := nl.delLink(li.index); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", li.name, err))
			continue
		}
		removed = append(removed, li.name)
	}
	if len(names) == 0 && len(errs) == 0 {
		// Nothing left to keep: end the keepers (they would linger).
		for pid := range keepers {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		for deadline := time.Now().Add(3 * time.Second); len(keepers) > 0 && time.Now().Before(deadline); {
			for pid := range keepers {
				if syscall.Kill(pid, 0) != nil {
					delete(keepers, pid)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("hostpath: %w", errors.Join(errs...))
	}
	return removed, nil
}
