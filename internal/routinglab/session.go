package routinglab

// The BGP session as the daemons see it: bgpd's summary (vtysh, JSON) and
// BIRD's protocol table (birdc). BIRD's "Since" column has milliseconds
// (bgpd's peerUptimeMsec counts whole seconds), so it is the clock for
// "Established at".
//
// Locking: none; each query runs one command.

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// BGPPeer is bgpd's view of one neighbour.
type BGPPeer struct {
	Established int  // how many times the session came up
	Up          bool // Established now
	Received    int  // prefixes received
}

// BGPPeer returns bgpd's session with peer (zero when bgpd does not answer).
func (l *Lab) BGPPeer(peer string) BGPPeer {
	out, err := l.Vtysh("show bgp summary json")
	if err != nil {
		return BGPPeer{}
	}
	var sum map[string]struct {
		Peers map[string]struct {
			State                  string
			ConnectionsEstablished int
			PfxRcd                 int
		}
	}
	if json.Unmarshal([]byte(out), &sum) != nil {
		return BGPPeer{}
	}
	p := sum["ipv4Unicast"].Peers[peer]
	return BGPPeer{Established: p.ConnectionsEstablished, Up: p.State == "Established", Received: p.PfxRcd}
}

// BirdSession returns when the protocol name of the BIRD called daemon in
// ns last changed state (BIRD's "Since", as it prints it) and whether it
// is Established.
func (l *Lab) BirdSession(ns, daemon, name string) (since string, up bool) {
	out, err := l.Birdc(ns, daemon, "show", "protocols", name)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[0] == name {
			return f[4], f[5] == "Established"
		}
	}
	return "", false
}

// BirdSince turns BIRD's "Since" (local time of day with milliseconds,
// 15:04:05.000) into the latest such time not after now.
func BirdSince(since string, now time.Time) (time.Time, error) {
	clock, err := time.ParseInLocation("15:04:05.000", since, now.Location())
	if err != nil {
		return time.Time{}, errors.New("routinglab: BIRD's time " + since + " has no milliseconds (timeformat)")
	}
	y, m, d := now.Date()
	t := time.Date(y, m, d, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), now.Location())
	if t.After(now) { // the session came up before midnight
		t = t.AddDate(0, 0, -1)
	}
	return t, nil
}
