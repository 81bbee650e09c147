#!/usr/bin/env bash
# The proof that .ci/run passes on a fresh Debian 12 machine: runs it, for a
# given commit, in a debootstrapped bookworm chroot (minbase: none of the
# test tools, no compiler, no git) that sees only the host's Go toolchain.
#
#   .ci/fresh-root.sh [COMMIT [LOG]]     # as root
#
# COMMIT (default HEAD) must be on a branch of this repository; LOG
# (default /tmp/fresh-root.log) gets the whole output. FRESHROOT
# (default /work/freshroot) is the chroot: made with debootstrap if missing,
# reused otherwise (packages .ci/run installed stay: rm -rf it for a fresh
# one). The script mounts, clones the commit to /root/netfwd, runs
# `bash .ci/run` with CI=true, unmounts, and exits with .ci/run's status.
#
# What the chroot gets from the host: /usr/local/go (read-only), a copy of
# the Go module cache and the same GOPROXY, /etc/resolv.conf, and a
# policy-rc.d that keeps installed services (frr, prometheus) from starting,
# as in a Debian container: a chroot shares the host's processes and network.
set -euo pipefail
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
log=${2:-/tmp/fresh-root.log}
root=${FRESHROOT:-/work/freshroot}
goroot=/usr/local/go

# The host's Debian mirror (deb822 or one-line sources).
mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}

if [ ! -e "$root/etc/debian_version" ]; then
	command -v debootstrap >/dev/null || { apt-get update -qq; apt-get install -y -qq debootstrap; }
	debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf"

mounted=()
mnt() { # mnt TARGET MOUNT-ARGS...: mounts and remembers it for cleanup.
	mkdir -p "$root$1"
	mount "${@:2}" "$root${1%/}"
	mounted=("$1" "${mounted[@]}")
}
cleanup() {
	# Processes left inside the chroot (a test's daemon): this run's own.
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then
			echo "fresh-root: killing leftover pid ${p#/proc/}: $(tr '\0' ' ' <"$p/cmdline")"
			kill -9 "${p#/proc/}" 2>/dev/null || true
		fi
	done
	local m
	for m in "${mounted[@]}"; do
		umount -R "$root${m%/}" 2>/dev/null || umount -R -l "$root${m%/}" || true
	done
}
trap cleanup EXIT

# The root a mount point of its own: `ip netns exec` makes / a slave mount
# in its mount namespace, which fails (EINVAL) on a plain directory.
mnt / --bind "$root"
mnt /proc -t proc proc
mnt /sys -t sysfs sysfs
mnt /dev --bind /dev
mnt /dev/pts --bind /dev/pts
mnt /run -t tmpfs tmpfs # ip netns keeps its namespaces in /run/netns
mnt "$goroot" --bind "$goroot"
mount -o remount,bind,ro "$root$goroot"

# Network namespaces persist in the chroot's /run/netns (what `ip netns add`
# does, with util-linux, which minbase has).
chroot "$root" sh -c 'mkdir -p /run/netns && touch /run/netns/probe && unshare --net=/run/netns/probe true && umount /run/netns/probe && rm /run/netns/probe'

rm -rf "$root/root/netfwd"
git clone -q "$repo" "$root/root/netfwd"
git -C "$root/root/netfwd" checkout -q "$commit"

# The host's module cache, completed for the commit by the host's Go and
# copied in (the files the chroot lacks); GOPROXY the host's. On a machine
# whose HTTPS egress is re-signed by a CA only the host trusts, the chroot's
# Go cannot download: with the full cache it need not.
modcache=$(go env GOMODCACHE)
(cd "$root/root/netfwd" && go mod download)
mkdir -p "$root/root/go/pkg/mod"
cp -a -n "$modcache/." "$root/root/go/pkg/mod/"

echo "fresh-root: $commit in $root (mirror $mirror), log $log"
start=$SECONDS
set +e
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb CI=true \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$goroot/bin \
	GOPROXY="$(go env GOPROXY)" GOMODCACHE=/root/go/pkg/mod \
	bash -c 'cd /root/netfwd && bash .ci/run' 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "fresh-root: .ci/run exited $rc after $((SECONDS - start))s" | tee -a "$log"
exit "$rc"
