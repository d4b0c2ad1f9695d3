#!/usr/bin/env bash
# t-ubsio-large.sh: on the ubsio backend, files larger than kv_buffer_max
# (the memory for writers' data): a writer's extents are staged as values
# before the commit (DESIGN.md "Commits, reads, limits"), so a file being
# written holds at most the bound in the daemon.  A 200 MiB file with a
# 64 MiB bound, written by cp and by offset writes in random order, read
# back cold after a remount; a 4 KiB overwrite in its middle; a kill -9
# during a rewrite keeps the fsynced content and leaves no value behind;
# unlink deletes every value; pjdfstest's open/25 (its 2 GiB file); fsck.
# Always on ubsio (over the stand-in library), whatever OFS_BACKEND says.
export OFS_BACKEND=ubsio
. "$(dirname "$0")/lib.sh"

MB=$((1 << 20))
# 48 buckets of 64 MiB: a 3 GiB capacity (kv_max_bytes), room for open/25.
GEOM="bucket_count=48,bucket_size=64M,kv_buffer_max=64M"
SIZE=$((200 * MB))
ofs_mount "$GEOM" || ofs_bail "cannot mount"
mkdir "$MNT/t"
nvalues() { find "$UBSIO_STUB_DIR" -type f ! -name '.tmp-*' | wc -l; }
# Records naming a value; read only while unmounted (a second sqlite
# connection to the daemon's database would checkpoint and remove its WAL).
nrecorded() {
	ofs_sql 'SELECT (SELECT count(*) FROM inodes WHERE skey IS NOT NULL) + (SELECT count(*) FROM extents WHERE skey IS NOT NULL)'
}
nextents() {
	getfattr --absolute-names -n user.offload.descriptor --only-values "$1" | sed -n 's/^extents=//p'
}

# ---- cp of a file three times the bound ----
mkrand "$REF/big" "$SIZE"
check "cp of a 200 MiB file with kv_buffer_max=64M" cp "$REF/big" "$MNT/t/big"
check_cmp "it reads back" "$REF/big" "$MNT/t/big"
ES=$(getfattr --absolute-names -n user.offload.descriptor --only-values "$MNT/t/big" |
	sed -n 's/^extent_size=//p')
check_eq "a new ubsio store's extent (one value each) is 4 MiB, the library's longest value" \
	$((4 * MB)) "$ES"
check_eq "one value per extent" "$(((SIZE + ES - 1) / ES))" "$(nextents "$MNT/t/big")"

# ---- offset writes in random order (SGLang's pool: ftruncate, then pwrite) ----
mkrand "$REF/pool" "$SIZE"
check_eq "1 MiB pwrites at shuffled offsets over a 200 MiB ftruncated file, fsync, close" OK \
	"$(pyerr '
import random
ref = open(a[2], "rb").read()
fd = os.open(a[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, len(ref))
offs = list(range(0, len(ref), 1 << 20))
random.Random(7).shuffle(offs)
for o in offs:
    os.pwrite(fd, ref[o:o + (1 << 20)], o)
os.fsync(fd)
os.close(fd)' "$MNT/t/pool" "$REF/pool")"

# ---- a 4 KiB overwrite in the middle of the file ----
python3 -c 'import os, sys
b = os.urandom(4096)
for p in sys.argv[1:]:
    fd = os.open(p, os.O_WRONLY); os.pwrite(fd, b, 100 * (1 << 20) + 12345); os.fsync(fd); os.close(fd)' \
	"$REF/big" "$MNT/t/big"
ofs_umount || ofs_bail "cannot unmount"
check_eq "the KV store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"
ofs_mount "$GEOM" || ofs_bail "cannot remount"
check_cmp "after a remount (cold): the cp'd file with its overwrite" "$REF/big" "$MNT/t/big"
check_cmp "after a remount (cold): the pool file" "$REF/pool" "$MNT/t/pool"

# ---- kill -9 during a rewrite larger than the bound ----
mkrand "$REF/k" "$SIZE"
python3 - "$MNT/t/killed" "$REF/k" 2>/dev/null <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
ref = open(sys.argv[2], "rb").read()
for off in range(0, len(ref), 1 << 20):
    os.pwrite(fd, ref[off:off + (1 << 20)], off)
os.fsync(fd)
open(sys.argv[1] + ".synced", "w").close()
junk = os.urandom(1 << 20)
while True:  # rewrites in order, past the bound, that never reach a close or fsync
    for off in range(0, len(ref), 1 << 20):
        os.pwrite(fd, junk, off)
PY
writer=$!
bg_track "$writer"
wait_until 60 test -e "$MNT/t/killed.synced"
n0=$(nvalues)
# Until the rewrite has staged some of its extents as values of their own.
more_values() { [ "$(nvalues)" -gt "$n0" ]; }
wait_until 30 more_values
check "the rewrite staged values before any commit" more_values
kill -9 "$OFS_PID"
ofs_reap "$OFS_PID"
OFS_PID=""
bg_kill "$writer"
fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
# fsck of the killed store: the staged values are named by the journal, to delete.
ofs_fsck
check_eq "fsck after the kill: exits 0" 0 "$RC"
check_contains "and says the journal names values the next mount deletes" \
	"the next mount deletes the values they name that no record points at" "$OUT"
check "the KV store holds more values than the records name (the staged ones)" \
	test "$(nvalues)" -gt "$(nrecorded)"
ofs_mount "$GEOM" || ofs_bail "cannot mount after the kill"
check_cmp "after kill -9 of the daemon: the fsynced content, not the later writes" \
	"$REF/k" "$MNT/t/killed"
ofs_umount || ofs_bail "cannot unmount"
check_eq "the start deleted the rewrite's staged values: no value left behind" \
	"$(nrecorded)" "$(nvalues)"
ofs_mount "$GEOM" || ofs_bail "cannot mount"
rm -f "$MNT/t/killed" "$MNT/t/killed.synced"

# ---- pjdfstest tests/open/25.t: "interact with > 2 GB files" ----
# (github.com/pjd/pjdfstest, tests/open/25.t): open O_CREAT|O_WRONLY 0755,
# pwrite "a" at 2 GiB + 1; lstat size 2 GiB + 2; pread 1 at 2 GiB + 1; unlink.
check_eq "open/25: pwrite of 'a' at 2 GiB + 1, lstat size, pread, unlink" \
	"OK $((2 * 1024 * 1024 * 1024 + 2)) b'a' OK" \
	"$(python3 -c 'import os, sys
p, at = sys.argv[1], 2 * 1024 ** 3 + 1
fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o755); os.pwrite(fd, b"a", at); os.close(fd)
print("OK", os.lstat(p).st_size, end=" ")
fd = os.open(p, os.O_RDONLY); print(os.pread(fd, 1, at), end=" "); os.close(fd)
os.unlink(p); print("OK")' "$MNT/t/p25" 2>&1)"

# ---- unlink lets every value go ----
rm -f "$MNT/t/big" "$MNT/t/pool"
ofs_sync
check_eq "unlink of the large files: their values are deleted at the barrier" 0 "$(nvalues)"
ofs_umount || ofs_bail "cannot unmount"
check_fsck_clean "fsck after large files on ubsio"
ofs_done
