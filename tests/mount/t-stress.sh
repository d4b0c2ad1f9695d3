#!/usr/bin/env bash
# t-stress.sh: four processes hammer the same 40 names at once (create and
# overwrite, in-place writes with fsync, reads, truncates, renames over each
# other, unlinks) with the DRAM tier and a fast group commit on.  The daemon
# must survive (scripts/test also runs this with the ASan/UBSan daemon, which
# catches an inode touched after the reply that let the kernel forget it),
# scrub and fsck must be clean, and the clean snapshot must equal the rebuild.
set -u
. "$(dirname "$0")/lib.sh"

SECS=${OFS_STRESS_SECONDS:-15}
ofs_mount "bucket_count=4,bucket_size=64M,dram=32M,promote_after=2,sync_interval=100" ||
	ofs_bail "cannot mount"
mkdir "$MNT/t"
pids=()
for i in 1 2 3 4; do
	python3 "$(dirname "$0")/stress_worker.py" "$MNT/t" "$i" "$SECS" >"$TESTDIR/worker$i.out" 2>&1 &
	pids+=($!)
	bg_track $!
done
bad=0
for p in "${pids[@]}"; do
	wait "$p" || bad=$((bad + 1))
done
check_eq "all four workers finished without an unexpected error" 0 "$bad"
[ "$bad" -eq 0 ] || note "$(cat "$TESTDIR"/worker*.out | tail -5)"
check_eq "the daemon is still serving" yes "$(ls "$MNT/t" >/dev/null 2>&1 && echo yes || echo no)"
note "$(cat "$TESTDIR"/worker*.out | tr '\n' ' ')"
if [ "$OFS_BACKEND" == ubsio ]; then
	run "$OFSCTL" scrub "$MNT" --ubsio-lib "$OFS_BUILD/tests/libubsio_kvc.so" --ubsio-ssd-size 0
else
	run "$OFSCTL" scrub "$MNT"
fi
check_eq "scrub of the mounted store after the stress: clean" 0 "$RC"
[ "$RC" -eq 0 ] || note "$OUT"
ofs_umount
check_eq "the daemon exits cleanly" 0 "${OFS_RC:-1}"
check_fsck_clean "after the stress"

ofs_done
