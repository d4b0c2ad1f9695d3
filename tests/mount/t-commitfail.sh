#!/usr/bin/env bash
# t-commitfail.sh: a close whose metadata commit fails.  The writer gets
# EIO, the file keeps its previous content (not committed later by a retry
# at release), and no reader is shown the uncommitted bytes the kernel had
# cached: the daemon makes the kernel drop them.  The commit is made to
# fail by making the WAL immutable (chattr +i) for the length of the close.
set -u
. "$(dirname "$0")/lib.sh"

ofs_mount "bucket_count=2,bucket_size=16M" || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/a" 200000
cp "$REF/a" "$MNT/t/a"
ofs_sync
cat "$MNT/t/a" >/dev/null # in the kernel's page cache
if ! chattr +i "$ROOT/offloadfs.db-wal" 2>/dev/null; then
	skip "a failed commit" "chattr +i is not supported under $ROOT"
	ofs_umount
	ofs_done
fi
run sh -c "head -c 4096 /dev/zero | dd of='$MNT/t/a' conv=notrunc status=none"
chattr -i "$ROOT/offloadfs.db-wal"
check_eq "the writer's close reports the failed commit" 1 "$([ "$RC" -ne 0 ] && echo 1 || echo 0)"
check_contains "as an I/O error" "Input/output error" "$ERR"
ok_seen=0
for ((i = 0; i < 40; i++)); do
	if cmp -s "$REF/a" "$MNT/t/a"; then ok_seen=1; break; fi
	sleep 0.1
done
check_eq "readers see the previous content, not the kernel's cached new bytes" 1 "$ok_seen"
sleep 1.5 # a release-time retry would have committed by now
check_cmp "and it stays so (no commit behind the writer's back)" "$REF/a" "$MNT/t/a"
ofs_umount
ofs_mount "bucket_count=2,bucket_size=16M" || ofs_bail "cannot remount"
check_cmp "after remount: the previous content" "$REF/a" "$MNT/t/a"
ofs_umount
check_fsck_clean "after the failed commit"

ofs_done
