package config

// Help: `help` (or `?`) at any level of a line, as `ip route help` and
// vtysh's `?` answer it: the words the level takes. The text is generated
// from the keyword tables the parser itself reads (keywords.go), so help
// and parser cannot disagree: `help` lists the objects, `route help` the
// route commands and what each takes, `route show help` that command's
// arguments. Keywords iproute2 has and netfwd does not are not listed.
//
// Locking: none (read-only tables).

import (
	"errors"
	"strings"
)

// errHelp is what verb returns for a `help` command word: parseCommand
// answers with the help of the words before it.
var errHelp = errors.New("help")

// helpObject is one object's help: its command table and, per command
// (its meaning), the argument tables that command reads.
type helpObject struct {
	commands *keywords
	args     map[string][]*keywords
}

// helpObjects is keyed by the object's meaning in ipObjects (bridge
// objects as "bridge-fdb", ...). Filled in init: the tables are package
// variables initialised before it.
var helpObjects map[string]helpObject

func init() {
	modify := func(ts ...*keywords) []*keywords { return ts } // a command's argument tables
	helpObjects = map[string]helpObject{
		"route": {routeCommands, map[string][]*keywords{
			"add": modify(routeArgs, routeTypes, pathArgs), "change": modify(routeArgs, routeTypes, pathArgs),
			"replace": modify(routeArgs, routeTypes, pathArgs), "append": modify(routeArgs, routeTypes, pathArgs),
			"delete": modify(routeArgs, routeTypes, pathArgs),
			"show":   modify(routeShowArgs, routePrefixArgs, routeTypes), "flush": modify(routeShowArgs, routePrefixArgs, routeTypes),
			"get": modify(routeGetArgs),
		}},
		"address": {addrCommands, map[string][]*keywords{
			"add": modify(addrArgs), "delete": modify(addrArgs), "show": modify(listFilters),
		}},
		"neigh": {neighCommands, map[string][]*keywords{
			"add": modify(neighArgs, nudStates), "change": modify(neighArgs, nudStates),
			"replace": modify(neighArgs, nudStates), "delete": modify(neighArgs, nudStates),
			"show": modify(neighShowArgs, nudStates), "flush": modify(neighShowArgs, nudStates),
		}},
		"link": {linkCommands, map[string][]*keywords{
			"add": modify(linkArgs, bridgeLinkOptions, vlanLinkOptions), "set": modify(linkArgs, bridgeLinkOptions),
			"delete": modify(linkArgs), "show": modify(listFilters),
		}},
		"nexthop": {nexthopCommands, map[string][]*keywords{
			"add": modify(nexthopArgs), "replace": modify(nexthopArgs), "delete": modify(nexthopArgs),
			"show": modify(nexthopShowArgs),
		}},
		"rule": {ruleCommands, map[string][]*keywords{
			"add": modify(ruleArgs, ruleActions, ruleTypes), "delete": modify(ruleArgs, ruleActions, ruleTypes),
			"show": modify(ruleShowArgs), "flush": modify(ruleShowArgs),
		}},
		"stats":   {statsCommands, nil},
		"vrfs":    {vrfCommands, nil},
		"monitor": {monitorObjects, nil},
		"capture": {captureArgs, nil},
		"trace":   {traceArgs, nil},
		"bridge-fdb": {bridgeFDBCommands, map[string][]*keywords{
			"add": modify(bridgeFDBArgs), "replace": modify(bridgeFDBArgs), "delete": modify(bridgeFDBArgs),
			"show": modify(bridgeFDBShowArgs),
		}},
		"bridge-vlan": {bridgeVLANCommands, map[string][]*keywords{
			"add": modify(bridgeVLANArgs), "delete": modify(bridgeVLANArgs), "show": modify(bridgeVLANShowArgs),
		}},
		"bridge-link":    {bridgeLinkCommands, map[string][]*keywords{"set": modify(bridgeLinkArgs)}},
		"bridge-mdb":     {bridgeMDBCommands, map[string][]*keywords{"add": modify(bridgeMDBArgs), "delete": modify(bridgeMDBArgs)}},
		"bridge-monitor": {bridgeMonitorObjects, nil},
	}
}

// isHelpWord reports whether word asks for help in place of a keyword
// (`help`, any abbreviation iproute2 gives it, or vtysh's `?`).
func isHelpWord(word string) bool { return word == "?" || matches(word, "help") }

// helpWords lists the words of a table netfwd implements, one per
// meaning: the word that is its meaning where one is, else the first.
func helpWords(t *keywords) []string {
	var out []string
	at := map[string]int{}
	for _, k := range t.table {
		if k.means == "" || k.means == "-6" {
			continue
		}
		i, seen := at[k.means]
		if !seen {
			at[k.means] = len(out)
			out = append(out, k.word)
		} else if k.word == k.means {
			out[i] = k.word
		}
	}
	return out
}

// choices renders a table's keywords as `{ a | b | c }`.
func choices(t *keywords) string { return "{ " + strings.Join(helpWords(t), " | ") + " }" }

// helpFor answers help for a line whose words before the help word are
// prefix: the top level, an object, or one command of an object.
func helpFor(prefix []string) string {
	w := newWords(prefix)
	var b strings.Builder
	bridge := false
	if w.Peek() == "bridge" || w.Peek() == "ip" {
		bridge = w.Next() == "bridge"
	}
	for w.More() && strings.HasPrefix(w.Peek(), "-") {
		w.Next()
	}
	if !w.More() {
		if bridge {
			b.WriteString("Usage: bridge [ OPTIONS ] OBJECT { COMMAND | help }\n")
			b.WriteString("OBJECT := " + choices(bridgeObjects) + "\n")
			b.WriteString("OPTIONS := " + choices(bridgeOptions) + "\n")
			return b.String()
		}
		b.WriteString("Usage: [ ip ] [ OPTIONS ] OBJECT { COMMAND | help }\n")
		b.WriteString("       bridge [ OPTIONS ] OBJECT { COMMAND | help }\n")
		b.WriteString("OBJECT := " + choices(ipObjects) + "\n")
		b.WriteString("OPTIONS := " + choices(ipOptions) + "\n")
		return b.String()
	}
	objWord := w.Next()
	t := ipObjects
	if bridge {
		t = bridgeObjects
	}
	obj, ok, _ := t.lookup(objWord)
	if obj == "bridge" { // `ip bridge ...`: bridge's objects follow
		if !w.More() {
			return helpFor([]string{"bridge"})
		}
		bridge = true
		obj, ok, _ = bridgeObjects.lookup(w.Next())
	}
	if bridge {
		obj = "bridge-" + obj
	}
	h, known := helpObjects[obj]
	if !ok || !known { // an unknown object, or one without commands (reload)
		return helpFor(nil)
	}
	name := strings.ReplaceAll(obj, "-", " ")
	if !w.More() || h.args == nil {
		b.WriteString("Usage: " + name + " " + choices(h.commands) + " ...\n")
		for _, k := range helpWords(h.commands) {
			c, _, _ := h.commands.lookup(k)
			if args := h.args[c]; len(args) > 0 {
				writeArgs(&b, name+" "+c, args)
			}
		}
		return b.String()
	}
	cmd, _, _ := h.commands.lookup(w.Next())
	args, ok := h.args[cmd]
	if !ok {
		return helpFor(prefix[:len(prefix)-1])
	}
	b.WriteString("Usage: " + name + " " + cmd + " ...\n")
	writeArgs(&b, name+" "+cmd, args)
	return b.String()
}

// writeArgs lists the argument tables of one command.
func writeArgs(b *strings.Builder, what string, args []*keywords) {
	for i, t := range args {
		lead := "  " + what + ": "
		if i > 0 {
			lead = "    " + t.what + ": "
		}
		b.WriteString(lead + strings.Join(helpWords(t), " ") + "\n")
	}
}
