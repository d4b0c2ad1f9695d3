#!/usr/bin/env bash
# run.sh t-NAME.sh: run one mount test the way `meson test --suite mount`
# runs each (tests/meson.build).  Its output (TAP-like, see lib.sh) passes
# through; the exit status is 0 only when the script exited 0 after its
# "N passed, 0 failed" line; 77 (meson's "skipped") without root or
# /dev/fuse.  OFS_BUILD and OFS_BACKEND are the script's (lib.sh).
#
# run.sh --registered NAME...: exit 1 naming every t-*.sh in this directory
# that is not among NAME... (the list in tests/meson.build), so that a new
# test is never silently left out.
set -u
cd "$(dirname "$0")" || exit 1

if [ "${1:-}" == "--registered" ]; then
	shift
	missing=()
	for f in t-*.sh; do
		[ -e "$f" ] || continue
		name=${f%.sh} found=0
		for r in "$@"; do
			[ "$r" == "$name" ] && found=1 && break
		done
		[ "$found" -eq 1 ] || missing+=("$f")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "not registered in tests/meson.build (mount_tests): ${missing[*]}"
		echo "(add them there; then meson reconfigures the build by itself)"
		exit 1
	fi
	echo "all $# mount tests are registered"
	exit 0
fi

if [ $# -ne 1 ]; then
	echo "usage: run.sh t-NAME.sh | run.sh --registered NAME..." >&2
	exit 2
fi
t=${1%.sh}.sh
if [ ! -f "$t" ]; then
	echo "not ok - $t: no such test in $PWD"
	exit 1
fi
if [ "$(id -u)" -ne 0 ] || [ ! -e /dev/fuse ]; then
	echo "skip - $t: the mount tests need root and /dev/fuse"
	exit 77
fi

out=$(mktemp "${TMPDIR:-/tmp}/ofs-run.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
trap 'exit 143' TERM INT
# Through tee, so that the output shows as it comes (meson test -v) and the
# summary line can be checked after.
bash "./$t" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
if [ -z "$line" ]; then
	echo "not ok - $t: exited $rc without its \"N passed, N failed\" line"
	exit 1
fi
if [ "$rc" -ne 0 ]; then
	echo "# $t exited $rc"
	exit 1
fi
[ "${line#* passed, }" == "0 failed" ]
