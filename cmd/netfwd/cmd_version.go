package main

// `netfwd version` (and `netfwd --version`): the module version, the VCS
// revision it was built from (with "+modified" when the tree had changes),
// its commit time, and the Go version, from the build information the Go
// toolchain embeds (runtime/debug.ReadBuildInfo).

import (
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(command{name: "version", usage: "   (module version, VCS revision, Go version)", run: runVersion})
}

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: netfwd version")
		return 2
	}
	io.WriteString(stdout, versionText())
	return 0
}

// versionText renders the build information.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "netfwd (no build information)\n"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	out := fmt.Sprintf("netfwd %s\n", version)
	if rev != "" {
		out += fmt.Sprintf("revision %s%s", rev, modified)
		if at != "" {
			out += " (" + at + ")"
		}
		out += "\n"
	} else {
		out += "revision unknown (built without VCS information: -buildvcs=false, or not from a checkout)\n"
	}
	return out + fmt.Sprintf("built with %s\n", bi.GoVersion)
}
