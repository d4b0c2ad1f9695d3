#!/usr/bin/env bash
# t-fulldisk.sh: the filesystem under ROOT fills up (a tmpfs of 8 MiB under
# a store whose sparse buckets promise 128 MiB).  Writers get a clear
# ENOSPC, a file keeps exactly the bytes whose write(2) returned, nothing
# committed before is lost, and once the disk grows the store mounts, reads
# back and checks clean.
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

ofs_done
