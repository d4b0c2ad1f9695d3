#!/usr/bin/env bash
# t-fulldisk.sh: the filesystem under ROOT fills up (a tmpfs of 8 MiB under
# a store whose sparse buckets promise 128 MiB).  Writers get a clear
# ENOSPC, a file keeps exactly the bytes whose write(2) returned, nothing
# committed before is lost, and once the disk grows the store mounts, reads
# back and checks clean.  Then the same on ext4 filesystems made here and
# loop-mounted, filled to the last block (by the store and from outside),
# once under ROOT and once under meta=: df tells the truth, deletes,
# renames, truncates, mkdir and rmdir work, deleting gives the disk its
# space back, unmount is clean, fsck passes and the store mounts again.
set -u
. "$(dirname "$0")/lib.sh"

mount -t tmpfs -o size=8M tmpfs "$ROOT" || ofs_bail "cannot mount a tmpfs on ROOT"
ofs_track_mnt "$ROOT"
GEOM="bucket_count=2,bucket_size=64M"

ofs_mount "$GEOM" || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/a" $((1024 * 1024))
mkrand "$REF/b" $((1024 * 1024 + 5))
check "a 1 MiB file fits" cp "$REF/a" "$MNT/t/a"
check "a second one fits" cp "$REF/b" "$MNT/t/b"

# Fill: each file written 64 KiB at a time; remember what write(2) acknowledged.
run python3 - "$MNT/t" "$REF" <<'EOF'
import errno, os, sys
d, ref = sys.argv[1], sys.argv[2]
for i in range(200):
    path = "%s/fill%d" % (d, i)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    acked = b""
    err = None
    try:
        for _ in range(16):
            chunk = os.urandom(65536)
            os.write(fd, chunk)
            acked += chunk
    except OSError as e:
        err = e
    closed = True
    try:
        os.close(fd)
    except OSError as e:
        err = err or e
        closed = False
    # A failed close is a failed commit: the file keeps its previous (empty) content.
    with open("%s/fill%d" % (ref, i), "wb") as f:
        f.write(acked if closed else b"")
    if err:
        print("FULL %d %s %d %s" % (i, errno.errorcode[err.errno], len(acked),
                                    "close-ok" if closed else "close-failed"))
        sys.exit(0)
print("NEVER FULL")
EOF
check_contains "the disk fills: a writer gets ENOSPC" "ENOSPC" "$OUT"
n=$(echo "$OUT" | awk '/^FULL/ {print $2}')
check_cmp "committed file a intact after the disk filled" "$REF/a" "$MNT/t/a"
check_cmp "committed file b intact after the disk filled" "$REF/b" "$MNT/t/b"
for ((i = 0; i < ${n:-0}; i++)); do
	cmp -s "$REF/fill$i" "$MNT/t/fill$i" || not_ok "fill$i (written before the disk filled) intact"
done
ok "every file completed before the disk filled is intact (${n:-0} of them)"
note "$OUT"
if [ -e "$MNT/t/fill$n" ]; then
	check_cmp "the file that hit ENOSPC holds exactly what was committed (the acknowledged bytes if its close succeeded, else nothing)" \
		"$REF/fill$n" "$MNT/t/fill$n"
else
	ok "the file that hit ENOSPC was not committed"
fi
check_fails "a new write on the full disk fails clearly" "No space left on device" \
	sh -c "head -c 1048576 /dev/urandom > '$MNT/t/more'"
ofs_umount
mount -o remount,size=256M "$ROOT" || ofs_bail "cannot grow the tmpfs"

# With room again: everything committed is there and the store checks clean.
ofs_mount "$GEOM" || ofs_bail "cannot remount after the disk grew"
check_cmp "after the disk grew: a reads back" "$REF/a" "$MNT/t/a"
check_cmp "after the disk grew: b reads back" "$REF/b" "$MNT/t/b"
bad=0
for ((i = 0; i < ${n:-0}; i++)); do
	cmp -s "$REF/fill$i" "$MNT/t/fill$i" || bad=$((bad + 1))
done
check_eq "after the disk grew: every filled file reads back" 0 "$bad"
mkrand "$REF/c" 300000
check "writing works again" cp "$REF/c" "$MNT/t/c"
check_cmp "and reads back" "$REF/c" "$MNT/t/c"
ofs_umount
ofs_fsck
check_eq "fsck after the full disk: exits 0" 0 "$RC"
[ "$RC" -eq 0 ] || note "${OUT//$'\n'/ | }"

# ---- ext4 under ROOT, filled to the last block ----
# mkdisk NAME SIZE: a fresh ext4 (no root-reserved blocks) at $TESTDIR/NAME.
mkdisk() {
	truncate -s "$2" "$TESTDIR/$1.img" && mkfs.ext4 -q -b 4096 -m 0 -F "$TESTDIR/$1.img" &&
		mkdir -p "$TESTDIR/$1" && mount -o loop "$TESTDIR/$1.img" "$TESTDIR/$1" &&
		ofs_track_mnt "$TESTDIR/$1"
}
# avail DIR: KiB available on DIR's filesystem.
avail() { df -k --output=avail "$1" | tail -1 | tr -d ' '; }
# fill_outside DIR: take every free block of DIR's filesystem (a file there).
fill_outside() {
	local i
	for i in 1 2 3; do
		dd if=/dev/zero of="$1/filler$i" bs=4k status=none 2>/dev/null
		sync -f "$1"
	done
}
if ! command -v mkfs.ext4 >/dev/null || ! mkdisk disk 48M; then
	skip "ROOT on a full ext4" "cannot make and loop-mount an ext4 image"
	ofs_done
fi
DISK="$TESTDIR/disk"
ROOT="$DISK/root"
mkdir "$ROOT"
GEOM="bucket_count=4,bucket_size=64M"
ofs_mount "$GEOM" || ofs_bail "cannot mount on the ext4"
mkdir "$MNT/t"
size_k=$(( $(stat -f -c '%b * %S' "$MNT") / 1024 ))
check "df: the store's size is no more than its 48 MiB disk (not the buckets' 256 MiB)" \
	test "$size_k" -le $((48 * 1024))
free_k=$(( $(stat -f -c '%f * %S' "$MNT") / 1024 ))
check "df: free is no more than the disk has" test "$free_k" -le "$(avail "$DISK")"
n=0
while mkrand "$REF/e$n" 524288 && cp "$REF/e$n" "$MNT/t/e$n" 2>/dev/null; do
	n=$((n + 1))
	[ "$n" -lt 200 ] || break
done
rm -f "$MNT/t/e$n"
check "ROOT's disk fills through the mount (ENOSPC after $n files of 512 KiB)" test "$n" -lt 200
note "after the store filled it: ext4 has $(avail "$DISK") KiB available, df of the mount says $(( $(stat -f -c '%f * %S' "$MNT") / 1024 )) KiB free"
# df is true to within a page per bucket: the metadata of the file that
# takes the last pages takes some of the disk too.
left=$(stat -f -c %f "$MNT")
if [ "$left" -gt 4 ]; then
	mkrand "$REF/last" $(((left - 4) * PAGE))
	check "df: the $left pages df says are free, less one a bucket, can be written" \
		cp "$REF/last" "$MNT/t/last"
fi
check "df: then at most one a bucket is free" test "$(stat -f -c %f "$MNT")" -le 4
fill_outside "$DISK"
check_eq "and from outside: not a block left" 0 "$(avail "$DISK")"
run rm "$MNT/t/e0"
check_eq "full disk: rm works" 0 "$RC"
run mv "$MNT/t/e1" "$MNT/t/e1.moved"
check_eq "full disk: mv works" 0 "$RC"
run truncate -s 1000 "$MNT/t/e2"
check_eq "full disk: truncate works" 0 "$RC"
head -c 1000 "$REF/e2" >"$REF/e2.cut"
run mkdir "$MNT/t/dir"
check_eq "full disk: mkdir works" 0 "$RC"
run rmdir "$MNT/t/dir"
check_eq "full disk: rmdir works" 0 "$RC"
rm -f "$DISK"/filler*
# KiB the bucket files hold (the metadata takes its reserve back meanwhile).
held() { du -k -c "$ROOT"/bucket_*.data | tail -1 | cut -f1; }
before=$(held)
free_before=$(stat -f -c %f "$MNT")
for ((i = 3; i < 13 && i < n; i++)); do rm "$MNT/t/e$i"; done
ofs_sync
check "deleting 10 files of 512 KiB: df of the mount counts their pages free at once" \
	test $(($(stat -f -c %f "$MNT") - free_before)) -ge $((10 * 524288 / PAGE - 4))
# Their blocks stay with the store for the next files (warm) until they
# have been free for 5 s; then the disk has them back.
for _ in $(seq 60); do
	after=$(held)
	[ $((before - after)) -ge $((10 * 512 - 256)) ] && break
	sleep 0.25
done
check "deleting 10 files of 512 KiB gives their blocks back to the disk within seconds (bucket files $before -> $after KiB)" \
	test $((before - after)) -ge $((10 * 512 - 256))
fill_outside "$DISK"
ofs_umount
check_eq "full disk: the daemon unmounts cleanly (exit 0)" 0 "$OFS_RC"
check_fsck_clean "ROOT's disk full"
check_contains "every freed page was given back to the disk (fsck finds no free page holding blocks)" \
	"free pages holding disk blocks: 0 " "$OUT"
check_eq "fsck found the clean-unmount snapshot" 1 \
	"$(echo "$OUT" | grep -c 'bitmap snapshot: identical')"
# sqlite's shared-memory index as a file of holes on the full disk: a
# process that maps it faults (SIGBUS) at its first write there.
truncate -s 32768 "$ROOT/offloadfs.db-shm"
ofs_fsck
check_eq "full disk, a -shm of holes: fsck runs (no SIGBUS) and finds the store clean" 0 "$RC"
ofs_mount "$GEOM" || ofs_bail "cannot mount on the full ext4"
check_grep_log "full disk: the store mounts from its clean snapshot" "$OFS_LOG_CLEAN"
check_cmp "full disk, after remount: the moved file" "$REF/e1" "$MNT/t/e1.moved"
check_cmp "full disk, after remount: the truncated file" "$REF/e2.cut" "$MNT/t/e2"
bad=0
for ((i = 13; i < n; i++)); do cmp -s "$REF/e$i" "$MNT/t/e$i" || bad=$((bad + 1)); done
check_eq "full disk, after remount: every other file intact" 0 "$bad"
check "full disk, after remount: rm works" rm "$MNT/t/e1.moved"
ofs_umount
rm -f "$DISK"/filler*
check_fsck_clean "after the second mount on the full disk"

# Blocks under a free page (what a crash between a free and its punch leaves):
# fsck reports them, --repair punches them.
dd if=/dev/urandom of="$ROOT/bucket_00.data" bs=64k count=2 seek=$((64 * 16 - 2)) conv=notrunc \
	status=none
sync -f "$DISK"
before=$(avail "$DISK")
ofs_fsck
check_eq "blocks under free pages: fsck still exits 0" 0 "$RC"
check_contains "fsck reports the 2 free pages holding blocks" \
	"free pages holding disk blocks: 2 (128 KiB)" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_contains "fsck --repair punches them" "repair: gave 2 free page(s) back to the filesystem" "$OUT"
sync -f "$DISK"
check "and the disk has the 128 KiB back ($before -> $(avail "$DISK") KiB)" \
	test "$(avail "$DISK")" -ge $((before + 128))
ofs_fsck
check_contains "fsck after the repair: no free page holds blocks" \
	"free pages holding disk blocks: 0 " "$OUT"

# ---- meta= on an ext4 of its own, filled to the last block ----
if ! mkdisk mdisk 16M; then
	skip "meta= on a full ext4" "cannot make a second ext4 image"
	ofs_done
fi
ROOT="$TESTDIR/root3"
mkdir -p "$ROOT"
META="$TESTDIR/mdisk/ofs.db"
GEOM="bucket_count=2,bucket_size=16M,meta=$META"
ofs_mount "$GEOM" || ofs_bail "cannot mount with meta= on the ext4"
mkdir "$MNT/t"
for i in $(seq 0 19); do
	mkrand "$REF/m$i" 65536
	cp "$REF/m$i" "$MNT/t/m$i"
done
ofs_sync
fill_outside "$TESTDIR/mdisk"
check_eq "meta's disk full from outside: not a block left" 0 "$(avail "$TESTDIR/mdisk")"
# Creates may fail now, but never lose what they acknowledged.
made=0
for i in $(seq 20 219); do
	mkrand "$REF/m$i" 4096
	cp "$REF/m$i" "$MNT/t/m$i" 2>/dev/null || { rm -f "$MNT/t/m$i" "$REF/m$i"; break; }
	made=$((made + 1))
done
note "with meta's disk full: $made small files created before the first failure"
run rm "$MNT/t/m0" "$MNT/t/m1"
check_eq "meta's disk full: rm works" 0 "$RC"
rm -f "$REF/m0" "$REF/m1"
run mv "$MNT/t/m2" "$MNT/t/m2.moved"
check_eq "meta's disk full: mv works" 0 "$RC"
mv "$REF/m2" "$REF/m2.moved"
run truncate -s 100 "$MNT/t/m3"
check_eq "meta's disk full: truncate works" 0 "$RC"
head -c 100 "$REF/m3" >"$REF/m3.cut" && mv "$REF/m3.cut" "$REF/m3"
mkdir "$MNT/t/dir2" 2>/dev/null
run rmdir "$MNT/t/dir2"
check_eq "meta's disk full: rmdir works" 0 "$RC"
ofs_umount
check_eq "meta's disk full: the daemon unmounts cleanly (exit 0)" 0 "$OFS_RC"
run "$OFSCTL" fsck "$ROOT" --meta "$META"
check_eq "meta's disk full: fsck exits 0" 0 "$RC"
check_contains "meta's disk full: fsck: clean" "fsck: clean" "$OUT"
[ "$RC" -eq 0 ] || note "${OUT//$'\n'/ | } ${ERR//$'\n'/ | }"
ofs_mount "$GEOM" || ofs_bail "cannot mount with meta= on the full ext4"
bad=0
for f in "$REF"/m*; do
	cmp -s "$f" "$MNT/t/$(basename "$f")" || bad=$((bad + 1))
done
check_eq "meta's disk full, after remount: every acknowledged file reads back" 0 "$bad"
ofs_umount
rm -f "$TESTDIR/mdisk"/filler*

ofs_done
