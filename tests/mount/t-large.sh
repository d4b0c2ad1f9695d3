#!/usr/bin/env bash
# t-large.sh: files larger than a bucket, cut into extents.  A file written
# by cp, read back cold and after a remount; its descriptor's extents hold
# its bytes; a sparse file holds nothing until written and reads zeros; an
# overwrite in the middle keeps the rest and takes no second copy of the
# file; the pool-file call sequences of NVIDIA Dynamo's KVBM disk tier,
# SGLang's HF3FS-style pool, Mooncake's offset-allocator storage and vLLM's
# O_DIRECT pools; a kill -9 during offset writes keeps what was fsynced; a
# full store while a pool file grows; removal frees every extent; fsck.
set -u
. "$(dirname "$0")/lib.sh"

# 4 buckets of 16 MiB, extents of 4 MiB: a 64 MiB store.
GEOM="bucket_count=4,bucket_size=16M,extent_size=4M"
MB=$((1 << 20))
ofs_mount "$GEOM" || ofs_bail "cannot mount"
mkdir "$MNT/t"
TOTAL=$(ofs_free)

# ---- larger than a bucket, by cp ----
mkrand "$REF/big" $((40 * MB + 12345))
check "cp of a 40 MiB file into 16 MiB buckets" cp "$REF/big" "$MNT/t/big"
check_eq "its size" $((40 * MB + 12345)) "$(stat -c %s "$MNT/t/big")"
check_cmp "read back" "$REF/big" "$MNT/t/big"
echo 3 >/proc/sys/vm/drop_caches
check_cmp "read back cold (the daemon's reads across extents)" "$REF/big" "$MNT/t/big"

# The descriptor: object_size, extent_size, page_size, extents=N, then per extent its
# offset in the file and a one-run descriptor; each extent's bytes, read
# from its bucket file at its offset, are the file's at that offset.
desc_check() { # desc_check FILE REFERENCE: prints "extents N" or "BAD ..."
	python3 - "$1" "$2" <<'PY'
import os, sys
v = os.getxattr(sys.argv[1], "user.offload.descriptor").decode()
lines = v.split("\n")
assert lines[-1] == ""
kv = [l.split("=", 1) for l in lines[:-1]]
head = dict(kv[:4])
if [k for k, _ in kv[:4]] != ["object_size", "extent_size", "page_size", "extents"]:
    print("BAD head", kv[:4]); sys.exit()
n = int(head["extents"]); es = int(head["extent_size"])
blocks = []
ps = int(head["page_size"])
if ps < 4096 or ps & (ps - 1) or int(head["extent_size"]) % ps:
    print("BAD page_size", ps); sys.exit()
for k, val in kv[4:]:
    if k == "extent_offset":
        blocks.append({})
    if not blocks:
        print("BAD no extent_offset first"); sys.exit()
    blocks[-1][k] = val
if len(blocks) != n:
    print("BAD count", len(blocks), n); sys.exit()
ref = open(sys.argv[2], "rb").read()
if int(head["object_size"]) != len(ref):
    print("BAD size"); sys.exit()
for e in blocks:
    fo, size = int(e["extent_offset"]), int(e["object_size"])
    if fo % es or size > es:
        print("BAD extent", e); sys.exit()
    if "file_path" not in e:
        continue  # a value in a KV store (ubsio): read by its key, not here
    with open(e["file_path"], "rb") as f:
        f.seek(int(e["offset"]))
        if f.read(size) != ref[fo:fo + size]:
            print("BAD bytes of extent at", fo); sys.exit()
print("extents", n)
PY
}
check_eq "the descriptor lists 11 extents, each holding the file's bytes" "extents 11" \
	"$(desc_check "$MNT/t/big" "$REF/big" 2>&1)"
check_eq "no whole-file checksum (each extent has its own)" ENODATA \
	"$(pyerr 'os.getxattr(a[1], "user.offload.checksum")' "$MNT/t/big")"
used=$((TOTAL - $(ofs_free)))
check_pages "it takes its pages and no more" $(((40 * MB + 12345 + PAGE - 1) / PAGE)) "$used"

# ---- an overwrite in the middle ----
mkrand "$REF/patch" 4096
cp "$REF/big" "$REF/big2"
dd if="$REF/patch" of="$REF/big2" bs=4096 seek=5000 conv=notrunc status=none
check "a 4 KiB overwrite at 20 MiB" dd if="$REF/patch" of="$MNT/t/big" bs=4096 seek=5000 \
	conv=notrunc status=none
check_cmp "the file has it, and the rest as it was" "$REF/big2" "$MNT/t/big"
check_pages "after the barrier it holds no more pages than before" "$used" \
	"$((TOTAL - $(ofs_free)))"

# ---- a punched hole gives whole extents back ----
check "punch 8 MiB at 8 MiB (extents 2 and 3) and 100 KiB across the next boundary" \
	sh -c "fallocate -p -o 8M -l 8M '$MNT/t/big' && fallocate -p -o $((20 * MB - 50000)) -l 100000 '$MNT/t/big'"
python3 - "$REF/big2" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8 << 20:16 << 20] = bytes(8 << 20)
b[(20 << 20) - 50000:(20 << 20) + 50000] = bytes(100000)
open(sys.argv[1] + ".holed", "wb").write(b)
PY
check_cmp "zeros there, the rest as it was" "$REF/big2.holed" "$MNT/t/big"
check_pages "the two extents' pages are free after the barrier" $((used - 128)) \
	"$((TOTAL - $(ofs_free)))"
cp "$REF/big2.holed" "$REF/big2"
ofs_remount || ofs_bail "cannot remount"
check_cmp "after a remount" "$REF/big2" "$MNT/t/big"

# ---- sparse ----
free0=$(ofs_free)
check "truncate a new file to 48 MiB" truncate -s 48M "$MNT/t/sparse"
check_eq "it holds no pages" "$free0" "$(ofs_free)"
check_cmp "it reads as zeros" <(head -c $((48 * MB)) /dev/zero) "$MNT/t/sparse"
check_eq "past the store's capacity: EFBIG" EFBIG \
	"$(pyerr 'os.truncate(a[1], 1 << 40)' "$MNT/t/sparse")"
check_eq "its descriptor has no extents" "extents 0" \
	"$(desc_check "$MNT/t/sparse" <(head -c $((48 * MB)) /dev/zero) 2>&1)"
rm -f "$MNT/t/sparse"

# ---- the batch interface (pages backend) ----
export OFFLOADFS_BATCH_LIB=${OFFLOADFS_BATCH_LIB:-"$OFS_BUILD/liboffloadfs_batch.so"}
if ldd "$OFFLOADFS_BATCH_LIB" 2>/dev/null | grep -q libasan; then
	skip "the batch interface on a file of extents" "$OFFLOADFS_BATCH_LIB is built with ASan, which python cannot load"
elif [ "$OFS_BACKEND" == pages ]; then
	mkrand "$REF/mid" $((6 * MB))
	cp "$REF/mid" "$MNT/t/mid"
	check_eq "get_many of a file of extents (read through the mount), exists_many, and a put_many past one extent: EFBIG" \
		"6291456 True EFBIG" "$(python3 - "$MNT/t" "$OFS_TESTS_DIR/../../lib/python" "$REF/mid" <<'PY' 2>&1
import errno, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
buf = [bytearray(8 << 20)]
n = t.get_many(["mid"], buf)[0]
same = bytes(buf[0][:n]) == open(sys.argv[3], "rb").read()
ex = t.exists_many(["mid"])[0]
errs = t.put_many_errs(["toolarge"], [bytes(5 << 20)])
print(n if same else "differs", ex, errno.errorcode.get(-errs[0], errs[0]))
PY
)"
	rm -f "$MNT/t/mid"
fi

# ---- back under one extent ----
check "a truncate to 1 MiB" truncate -s 1M "$MNT/t/big"
head -c $((1 * MB)) "$REF/big2" >"$REF/small"
check_cmp "keeps its first MiB" "$REF/small" "$MNT/t/big"
ofs_remount || ofs_bail "cannot remount"
check_cmp "after a remount" "$REF/small" "$MNT/t/big"
check_eq "it is one run again: the one-run descriptor" object_size=$MB \
	"$(getfattr --absolute-names -n user.offload.descriptor --only-values "$MNT/t/big" |
		grep ^object_size=)"

# ---- mmap, copy_file_range, unlinked while open ----
check_eq "msync of one page of a 64 MiB MAP_SHARED mapping, then its reads" OK "$(python3 - "$MNT/t/mapped" <<'PY' 2>&1
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 64 << 20)
m = mmap.mmap(fd, 64 << 20)
for off in (0, 33 << 20, (64 << 20) - 4096):
    m[off:off + 4096] = bytes([off % 251 + 1]) * 4096
    m.flush(off, 4096)
m.close()
os.close(fd)
d = open(sys.argv[1], "rb").read()
ok = len(d) == 64 << 20 and all(d[o:o + 4096] == bytes([o % 251 + 1]) * 4096
                                   for o in (0, 33 << 20, (64 << 20) - 4096))
print("OK" if ok and d[4096:8192] == bytes(4096) else "differs")
PY
)"
rm -f "$MNT/t/mapped"
check_eq "copy_file_range of a file of extents into a new file" OK "$(python3 - "$MNT/t/big" "$MNT/t/copy" <<'PY' 2>&1
import os, sys
src = os.open(sys.argv[1], os.O_RDONLY)
dst = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
n, size = 0, os.fstat(src).st_size
while n < size:
    c = os.copy_file_range(src, dst, size - n, n, n)
    if c <= 0:
        break
    n += c
os.close(dst)
print("OK" if open(sys.argv[1], "rb").read() == open(sys.argv[2], "rb").read() else "differs")
PY
)"
rm -f "$MNT/t/copy"
free1=$(ofs_free)
check_eq "a file of extents unlinked while open still reads, and its pages come back at its close" \
	"OK" "$(python3 - "$MNT/t/gone" "$REF/big2" <<'PY' 2>&1
import os, shutil, sys
shutil.copyfile(sys.argv[2], sys.argv[1])
fd = os.open(sys.argv[1], os.O_RDONLY)
os.unlink(sys.argv[1])
ref = open(sys.argv[2], "rb").read()
print("OK" if os.pread(fd, len(ref) + 1, 0) == ref else "differs")
os.close(fd)
PY
)"
check_pages "... all of them" "$free1" "$(wait_free "$free1" && echo "$free1" || ofs_free)"

# ---- removal frees every extent ----
check "cp again" cp "$REF/big2" "$MNT/t/big"
check "rm" rm "$MNT/t/big"
check_pages "every page is free again" "$TOTAL" "$(ofs_free)"

# ---- the clients' pool files ----
# Each prints OK or what went wrong; ORDER of calls as the clients make them.
pool() { # pool MODE PATH SIZE
	python3 - "$@" <<'PY'
import mmap, os, random, sys
mode, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(7)
blk = 128 << 10
n = size // blk
def aligned(nbytes):
    m = mmap.mmap(-1, nbytes)
    m.write(os.urandom(nbytes))
    return m
want = {}
if mode == "dynamo":
    # NVIDIA Dynamo KVBM disk tier (lib/llm/src/block_manager/storage/disk.rs):
    # O_RDWR|O_CREAT|O_EXCL, then fcntl F_SETFL O_DIRECT, fallocate the pool,
    # aligned O_DIRECT pwrite/pread of blocks at block offsets.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    import fcntl
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_DIRECT)
    os.posix_fallocate(fd, 0, size)
    for i in rnd.sample(range(n), n // 2):
        b = aligned(blk)
        assert os.pwrite(fd, b, i * blk) == blk
        want[i] = bytes(b)
    for i, v in want.items():
        b = aligned(blk)
        assert os.preadv(fd, [b], i * blk) == blk
        assert bytes(b) == v, "block %d" % i
elif mode == "sglang":
    # SGLang's HF3FS-style pool (hicache.N.bin): ftruncate the pool, offset I/O.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, size)
    for i in rnd.sample(range(n), n // 3):
        v = os.urandom(blk)
        assert os.pwrite(fd, v, i * blk) == blk
        want[i] = v
elif mode == "mooncake":
    # Mooncake's offset-allocator storage: fallocate (ftruncate as a
    # fallback), pwritev of records at allocator offsets, fdatasync before
    # each metadata checkpoint.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        os.ftruncate(fd, size)
    off = 0
    while off + blk <= size:
        v1, v2 = os.urandom(blk // 2), os.urandom(blk // 2)
        assert os.pwritev(fd, [v1, v2], off) == blk
        want[off // blk] = v1 + v2
        off += blk * 3
        if len(want) % 16 == 0:
            os.fdatasync(fd)
    os.fdatasync(fd)
elif mode == "vllm":
    # vLLM's per-rank O_DIRECT pool files: pwritev/preadv of aligned buffers.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    os.ftruncate(fd, size)
    for i in rnd.sample(range(n), n // 4):
        b = aligned(blk)
        assert os.pwritev(fd, [b], i * blk) == blk
        want[i] = bytes(b)
os.close(fd)
# Reopened: what was written, zeros elsewhere.
fd = os.open(path, os.O_RDONLY)
assert os.fstat(fd).st_size == size, os.fstat(fd).st_size
for i in range(n):
    got = os.pread(fd, blk, i * blk)
    if got != want.get(i, bytes(blk)):
        print("block", i, "differs"); sys.exit()
print("OK")
PY
}
for m in dynamo sglang mooncake vllm; do
	check_eq "$m's pool sequence on a 32 MiB pool (2 buckets)" OK \
		"$(pool $m "$MNT/t/pool-$m" $((32 * MB)) 2>&1 | tail -1)"
	rm -f "$MNT/t/pool-$m"
done

# ---- a full store while a pool file grows ----
check "a 40 MiB file" cp "$REF/big2" "$MNT/t/big"
check_eq "a file growing to 30 MiB beside it in a 64 MiB store: ENOSPC at the write" ENOSPC \
	"$(pyerr '
fd = os.open(a[1], os.O_WRONLY | os.O_CREAT)
try:
    for i in range(30):
        os.write(fd, os.urandom(1 << 20))
finally:
    try:
        os.close(fd)
    except OSError:
        pass' "$MNT/t/grow")"
rm -f "$MNT/t/grow" "$MNT/t/big"
check_pages "the failed writer's pages are free again" "$TOTAL" "$(ofs_free)"
check_eq "past the store's capacity: EFBIG at the write" EFBIG \
	"$(pyerr 'os.pwrite(os.open(a[1], os.O_WRONLY | os.O_CREAT), b"x", 64 << 20)' "$MNT/t/far")"
rm -f "$MNT/t/far"

# ---- eviction takes a file of extents whole ----
ofs_remount "$GEOM,evict=lru,evict_min_age=0" || ofs_bail "cannot remount with eviction"
check "a 40 MiB file to evict" cp "$REF/big2" "$MNT/t/old"
check "offloadctl evict 1 MiB" "$OFSCTL" evict "$MNT" --bytes 1M
check_eq "the least recently used file went: it was the only one" \
	"No such file or directory" "$(stat "$MNT/t/old" 2>&1 | sed 's/.*: //')"
check_pages "every extent's pages came back" "$TOTAL" "$(wait_free "$TOTAL" && echo "$TOTAL" || ofs_free)"
ofs_remount "$GEOM" || ofs_bail "cannot remount"

# ---- kill -9 during offset writes ----
mkrand "$REF/k" $((24 * MB))
python3 - "$MNT/t/killed" "$REF/k" 2>/dev/null <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
ref = open(sys.argv[2], "rb").read()
os.ftruncate(fd, len(ref))
for off in range(0, len(ref), 1 << 20):
    os.pwrite(fd, ref[off:off + (1 << 20)], off)
os.fsync(fd)
open(sys.argv[1] + ".synced", "w").close()
while True:  # writes that never reach a close or fsync
    os.pwrite(fd, os.urandom(1 << 20), (1 << 20) * (os.getpid() % 24))
PY
writer=$!
bg_track "$writer"
wait_until 20 test -e "$MNT/t/killed.synced"
sleep 0.3
kill -9 "$OFS_PID"
ofs_reap "$OFS_PID"
OFS_PID=""
kill -9 "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
ofs_mount "$GEOM" || ofs_bail "cannot mount after the kill"
check_cmp "after kill -9 of the daemon: the fsynced content, not the later writes" \
	"$REF/k" "$MNT/t/killed"
rm -f "$MNT/t/killed" "$MNT/t/killed.synced"
check "a file of extents again" cp "$REF/big2" "$MNT/t/kept"

# 4 KiB overwrites in place in the third extent, each fsynced by one
# writer: after the first (which copies the extent), each commit reads and
# writes about the page it changed, not the extent (the daemon's I/O, from
# /proc/PID/io); the extent's checksum is then the sum of its page sums,
# which scrub and fsck below check too.
# On ubsio a commit puts the extent's whole value again: the bound is the pages backend's.
[ "$OFS_BACKEND" == pages ] && want=OK || want=
check_eq "fsynced 4 KiB overwrites in the middle move about a page each, not the 4 MiB extent" "$want" \
	"$(python3 - "$MNT/t/kept" "$REF/big2" "$OFS_PID" "$want" <<'PY' 2>&1
import os, sys
def io():
    return {k: int(v) for k, v in (l.split(":") for l in open("/proc/%s/io" % sys.argv[3]))}
blk = os.urandom(4096)
fd, ref = os.open(sys.argv[1], os.O_RDWR), os.open(sys.argv[2], os.O_RDWR)
n, at = 20, (9 << 20) + 8192
for k in range(n + 1):
    if k == 1:
        i0 = io()
    os.pwrite(fd, blk, at)
    os.pwrite(ref, blk, at)
    os.fsync(fd)
i1 = io()
os.close(fd); os.close(ref)
per = (i1["rchar"] - i0["rchar"] + i1["wchar"] - i0["wchar"]) / n
if sys.argv[4]:
    print("OK" if per < 512 << 10 else "%d bytes read and written per overwrite" % per)
PY
)"
check_cmp "the file has them" "$REF/big2" "$MNT/t/kept"

if [ "$OFS_BACKEND" == ubsio ]; then
	run "$OFSCTL" scrub "$MNT" --ubsio-lib "$OFS_BUILD/tests/libubsio_kvc.so" --ubsio-ssd-size 0
else
	run "$OFSCTL" scrub "$MNT"
fi
check_eq "scrub of a file of extents: exits 0" 0 "$RC"
[ "$RC" -eq 0 ] || note "scrub: ${OUT//$'\n'/ | } ${ERR//$'\n'/ | }"
check_contains "scrub counts it once" "1 files" "$OUT"
if [ "$OFS_BACKEND" == pages ]; then
	# One byte of its third extent changed behind the daemon's back.
	read -r bf bo fo <<<"$(python3 - "$MNT/t/kept" <<'PY'
import os, sys
v = os.getxattr(sys.argv[1], "user.offload.descriptor").decode().split("\n")
i = [k for k, l in enumerate(v) if l.startswith("extent_offset=")][2]
blk = dict(l.split("=", 1) for l in v[i:i + 5])
print(blk["file_path"], int(blk["offset"]) + 100, int(blk["extent_offset"]) + 100)
PY
)"
	flip() { python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); o = int(sys.argv[2])
os.pwrite(fd, bytes([os.pread(fd, 1, o)[0] ^ 1]), o)' "$bf" "$bo"; }
	flip
	run "$OFSCTL" scrub "$MNT"
	check_eq "scrub finds a damaged extent: exits 1" 1 "$RC"
	check_contains "and names it" "checksum mismatch" "$OUT"
	# O_DIRECT READs skip the bucket's page cache (kvb_read_uncached): still checked.
	direct_read() { python3 -c 'import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT); buf = mmap.mmap(-1, 1 << 20)
try:
    os.preadv(fd, [buf], int(sys.argv[2]) // 4096 * 4096); print("read")
except OSError as e:
    print(os.strerror(e.errno))' "$MNT/t/kept" "$fo"; }
	check_eq "an O_DIRECT read of the damaged page: EIO" "Input/output error" "$(direct_read)"
	flip
	check_eq "and of the page restored: its bytes" "read" "$(direct_read)"
fi
ofs_umount || ofs_bail "cannot unmount"
check_fsck_clean "fsck of a store with a file of extents"

# ---- 6 GiB by cp, on the default geometry (4 GiB buckets, 64 MiB extents) ----
avail=$(df --output=avail -B1G "$TESTDIR" | tail -1)
if [ "$OFS_BACKEND" == ubsio ]; then
	# Its 4 MiB extents: 1,536 of them, past what the 64 KiB descriptor lists (E2BIG).
	skip "a 6 GiB file by cp" "on ubsio: see the file past kv_buffer_max at the end"
elif [ "${OFS_META:-sqlite}" != sqlite ]; then
	skip "a 6 GiB file by cp" "a second store needs a database of its own"
elif [ "$avail" -lt 20 ]; then
	skip "a 6 GiB file by cp" "$avail GiB free under $TESTDIR, 20 needed (the source and the store)"
else
	ROOT6="$TESTDIR/root6"
	mkdir "$ROOT6"
	ROOT_SAVED=$ROOT
	ROOT=$ROOT6
	ofs_mount "" || ofs_bail "cannot mount a default store"
	mkdir "$MNT/t"
	mkrand "$REF/64m" $((64 * MB))
	for i in $(seq 96); do cat "$REF/64m"; done >"$REF/6g"
	rm -f "$REF/64m"
	check "cp of a 6 GiB file" cp "$REF/6g" "$MNT/t/6g"
	echo 3 >/proc/sys/vm/drop_caches
	check_cmp "it reads back cold" "$REF/6g" "$MNT/t/6g"
	check_eq "in 96 extents of 64 MiB" "extents=96" \
		"$(getfattr --absolute-names -n user.offload.descriptor --only-values "$MNT/t/6g" |
			grep ^extents=)"
	ofs_umount || ofs_bail "cannot unmount"
	check_fsck_clean "fsck of the store of a 6 GiB file"
	rm -f "$REF/6g"
	rm -rf "$ROOT6"
	ROOT=$ROOT_SAVED
fi

ofs_mount "bucket_count=4,bucket_size=16M,extent_size=8M"
check_eq "a mount asking for another extent_size is refused, naming both" 1 \
	"$(grep -c 'extent_size=8388608 asked, but the store has 4194304' "$LOG")"
ofs_mount "$GEOM" || ofs_bail "cannot mount"
check_cmp "kept across the fsck" "$REF/big2" "$MNT/t/kept"

# ==== ubsio only: a file past the default kv_buffer_max (1 GiB) ====
# A default store (4 MiB extents, each one value); the writer's extents are
# staged as values before the close, so the file is not bounded by the
# memory for writers' data.  t-ubsio-large has the rest (kill -9, offsets).
if [ "$OFS_BACKEND" == ubsio ]; then
	avail=$(df --output=avail -B1G "$TESTDIR" | tail -1)
	if [ "${OFS_META:-sqlite}" != sqlite ]; then
		skip "ubsio: a 2 GiB file by cp" "a second store needs a database of its own"
	elif [ "$avail" -lt 8 ]; then
		skip "ubsio: a 2 GiB file by cp" "$avail GiB free under $TESTDIR, 8 needed"
	else
		ofs_umount || ofs_bail "cannot unmount"
		ROOT_SAVED=$ROOT KV_SAVED=$UBSIO_STUB_DIR
		ROOT="$TESTDIR/rootu" UBSIO_STUB_DIR="$TESTDIR/kvu"
		mkdir "$ROOT" "$UBSIO_STUB_DIR"
		ofs_mount "" || ofs_bail "cannot mount a default store"
		mkdir "$MNT/t"
		mkrand "$REF/2g" $((2048 * MB + 12345))
		check "ubsio: cp of a 2 GiB file, kv_buffer_max 1G" cp "$REF/2g" "$MNT/t/2g"
		ofs_remount "" || ofs_bail "cannot remount"
		check_cmp "ubsio: it reads back cold after a remount" "$REF/2g" "$MNT/t/2g"
		check_eq "ubsio: its descriptor lists 513 values of 4 MiB (within 64 KiB)" "extents=513" \
			"$(getfattr --absolute-names -n user.offload.descriptor --only-values "$MNT/t/2g" |
				grep ^extents=)"
		ofs_umount || ofs_bail "cannot unmount"
		check_fsck_clean "ubsio: fsck of the store of a 2 GiB file"
		rm -rf "$REF/2g" "$ROOT" "$UBSIO_STUB_DIR"
		ROOT=$ROOT_SAVED UBSIO_STUB_DIR=$KV_SAVED
		ofs_mount "$GEOM" || ofs_bail "cannot mount"
	fi
fi
ofs_done
