#!/usr/bin/env bash
# run.sh [t-NAME.sh...]: run the mount tests (all t-*.sh by default), each
# in its own process; print each script's summary and exit non-zero if any
# script failed.  Full output of a failing script is shown; use -v to see
# every script's output.
set -u
cd "$(dirname "$0")" || exit 1
verbose=0
if [ "${1:-}" == "-v" ]; then
	verbose=1
	shift
fi
[ $# -gt 0 ] || set -- t-*.sh
failed=()
for t in "$@"; do
	start=$SECONDS
	out=$(./"$t" 2>&1)
	rc=$?
	if [ "$rc" -ne 0 ] || [ "$verbose" -eq 1 ]; then
		echo "$out" | sed "s/^/[$t] /"
	fi
	[ "$rc" -ne 0 ] && failed+=("$t")
	printf '%-16s %s (%ds)%s\n' "$t" "$(echo "$out" | tail -n 1)" $((SECONDS - start)) \
		"$([ "$rc" -ne 0 ] && echo " FAILED, exit $rc")"
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "failed: ${failed[*]}"
	exit 1
fi
echo "all passed"
