#!/usr/bin/env bash
# t-prefill.sh: -o prefill.  The first open of a committed object after the
# kernel looked it up puts the whole object into the kernel's page cache, so
# its reads and a stat after them take no request to the daemon; it never
# happens for a writer, for an object larger than the limit, or with
# prefill=0; it never puts old bytes over a writer's newer ones (racing
# openers, asynchronous O_DIRECT overwrites); a corrupted object is not
# prefilled and its read is still EIO.
set -u
. "$(dirname "$0")/lib.sh"

GEOM="bucket_count=2,bucket_size=64M"

metric() { # metric NAME: its value from the live metrics of the mount
	getfattr --only-values -n user.offload.metrics "$MNT" 2>/dev/null |
		awk -v n="$1" '$1 == n {print $2}'
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# ops_since LINE: the FUSE opcodes in the -d log after line LINE, one per line
ops_since() { tail -n +"$(($1 + 1))" "$LOG" | grep -oE 'opcode: [A-Z_]+' | awk '{print $2}'; }
count_op() { # count_op OPCODE LINE
	ops_since "$2" | grep -cx "$1"
}

# ---- a cold get is one OPEN; the stat after it is answered by the kernel ----
ofs_mount "$GEOM" -d || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/a" 300000
mkrand "$REF/b" 70000
cp "$REF/a" "$MNT/t/a"
cp "$REF/b" "$MNT/t/b"
drop_caches
p0=$(metric offloadfs_prefills_total) r0=$(metric offloadfs_read_latency_seconds_count)
mark=$(wc -l <"$LOG")
# The first open, held so that no drop_caches (another test's) makes the
# kernel inode new again before the second open.
exec 9<"$MNT/t/a"
check_cmp "after the caches are dropped, the object reads right" "$REF/a" "$MNT/t/a"
stat "$MNT/t/a" >/dev/null
stat "$MNT/t/a" >/dev/null
sleep 0.2
check_eq "its first open prefilled it" $((p0 + 1)) "$(metric offloadfs_prefills_total)"
check_eq "no READ reached the daemon" "$r0" "$(metric offloadfs_read_latency_seconds_count)"
check_eq "the -d log shows no READ" 0 "$(count_op READ "$mark")"
check_eq "the -d log shows two OPENs" 2 "$(count_op OPEN "$mark")"
check_eq "the stats after the read needed no GETATTR" 0 "$(count_op GETATTR "$mark")"
# A later open of the same kernel inode finds the pages cached: no prefill.
check_cmp "a second read is right" "$REF/a" "$MNT/t/a"
check_eq "a later open does not prefill again" $((p0 + 1)) "$(metric offloadfs_prefills_total)"
exec 9<&-

# Partial and random reads of a prefilled object are right too.
drop_caches
p0=$(metric offloadfs_prefills_total)
run python3 - "$MNT/t/b" "$REF/b" <<'EOF'
import os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
ref = open(sys.argv[2], "rb").read()
rng = random.Random(7)
for _ in range(200):
    off = rng.randrange(0, len(ref) + 100)
    n = rng.randrange(1, 20000)
    if os.pread(fd, n, off) != ref[off:off + n]:
        sys.exit("pread(%d, %d) differs" % (n, off))
os.close(fd)
EOF
check_eq "200 random preads of a prefilled object match" 0 "$RC"
check_eq "it was prefilled" $((p0 + 1)) "$(metric offloadfs_prefills_total)"

# The default limit is 512 KiB: a larger object is read on demand.
mkrand "$REF/big" 600000
cp "$REF/big" "$MNT/t/big"
drop_caches
p0=$(metric offloadfs_prefills_total)
mark=$(wc -l <"$LOG")
# Read whole in one read(2), as a KV client reads a block.
check_eq "a 600,000-byte object reads right" same "$(python3 -c '
import sys
a, b = (open(p, "rb").read() for p in sys.argv[1:])
print("same" if a == b else "differs")' "$MNT/t/big" "$REF/big")"
check_eq "by default it is not prefilled (over 512K)" "$p0" "$(metric offloadfs_prefills_total)"
# The mount reads ahead as much as one READ carries (1 MiB), not the
# kernel's default 128 KiB: the object comes in one READ, not five.
check_eq "the mount's read-ahead is 1024 KiB" 1024 \
	"$(cat "/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb" 2>&1)"
check_eq "its cold read is one READ" 1 "$(count_op READ "$mark")"

# ---- an overwrite after a prefill is seen at once, and after the caches drop ----
mkrand "$REF/a2" 250000
cp "$REF/a2" "$MNT/t/a"
check_cmp "an overwrite after a prefill reads back new" "$REF/a2" "$MNT/t/a"
drop_caches
check_cmp "and after the caches are dropped" "$REF/a2" "$MNT/t/a"

# ---- a writer's first open does not prefill; appends read right ----
drop_caches
p0=$(metric offloadfs_prefills_total)
mkrand "$REF/tail" 5000
cat "$REF/tail" >>"$MNT/t/b"
cat "$REF/b" "$REF/tail" >"$REF/b2"
check_eq "a writer's first open does not prefill" "$p0" "$(metric offloadfs_prefills_total)"
check_cmp "the appended object reads right" "$REF/b2" "$MNT/t/b"

# ---- readers racing a writer on a fresh inode: never old bytes over new ----
# Each round drops the caches (a fresh kernel inode), then four readers and
# one overwriter open it at once.  A prefill that stored the committed bytes
# over the writer's would leave the cache showing old bytes after the close.
run python3 - "$MNT/t/race" <<'EOF'
import os, sys, threading
path = sys.argv[1]
def put(data):
    with open(path, "wb") as f:
        f.write(data)
old = os.urandom(200000)
for rnd in range(24):
    new = os.urandom(200000 + rnd * 4096)
    put(old)
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    go = threading.Event()
    def reader():
        go.wait()
        with open(path, "rb") as f:
            f.read()
    def writer():
        go.wait()
        put(new)
    ts = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=writer)]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join()
    with open(path, "rb") as f:
        got = f.read()
    if got != new:
        sys.exit("round %d: the cache shows %s bytes after the writer's close" %
                 (rnd, "old" if got == old else "mixed"))
    old = new
EOF
check_eq "24 rounds of readers racing an overwriter: the new bytes, always" 0 "$RC"
[ "$RC" -eq 0 ] || echo "# $OUT $ERR"

# ---- a write-only create writes around the kernel's cache ----
# No GETXATTR of security.capability before its WRITEs (the kernel asks
# before every cached write), and the first read after its close is a
# prefill: its pages are not in the cache, and nothing else opened it.
mkrand "$REF/wo" 200000
p0=$(metric offloadfs_prefills_total)
mark=$(wc -l <"$LOG")
run python3 - "$MNT/t/wo" "$REF/wo" <<'EOF'
import os, sys
data = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
os.write(fd, data[:100000])
os.write(fd, data[100000:])
os.close(fd)
EOF
check_eq "a write-only create of two writes" 0 "$RC"
sleep 0.2
check_eq "sends no GETXATTR" 0 "$(count_op GETXATTR "$mark")"
check_eq "and two WRITEs" 2 "$(count_op WRITE "$mark")"
mark=$(wc -l <"$LOG")
check_cmp "its bytes read back right" "$REF/wo" "$MNT/t/wo"
check_eq "through a prefill at the first open" $((p0 + 1)) "$(metric offloadfs_prefills_total)"
check_eq "with no READ" 0 "$(count_op READ "$mark")"

# Beside such a writer every open bypasses the cache too: a reader sees each
# write at once, cannot map the file shared, and the pages a private mapping
# left are dropped at the next open, which sees the last commit.
run python3 - "$MNT/t/wo2" <<'EOF'
import errno, mmap, os, sys
path = sys.argv[1]
a, b, c = b"A" * 8192, b"B" * 8192, b"C" * 8192
w = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
os.write(w, a)
os.fsync(w)
r = os.open(path, os.O_RDONLY)
assert os.pread(r, 8192, 0) == a, "the reader's first read"
os.pwrite(w, b, 0)
got = os.pread(r, 8192, 0)
assert got == b, "the reader's second read shows %r, not the new write" % got[:1]
try:
    mmap.mmap(r, 8192, mmap.MAP_SHARED, mmap.PROT_READ)
    sys.exit("a shared mapping beside a write-only create was allowed")
except OSError as e:
    assert e.errno == errno.ENODEV, e
m = mmap.mmap(r, 8192, mmap.MAP_PRIVATE, mmap.PROT_READ)
assert m[:8192] == b, "the private mapping's pages"
m.close()
os.close(r)
os.pwrite(w, c, 0)
os.close(w)
r = os.open(path, os.O_RDONLY)
got = os.pread(r, 8192, 0)
os.close(r)
assert got == c, "after the writer's close a new open reads %r" % got[:1]
EOF
check_eq "a reader beside a write-only create sees every write, then the last commit" 0 "$RC"
[ "$RC" -eq 0 ] || echo "# $OUT $ERR"

# A read-write create keeps the cache: it can be mapped and written.
run python3 - "$MNT/t/rw" <<'EOF'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
os.ftruncate(fd, 65536)
m = mmap.mmap(fd, 65536, mmap.MAP_SHARED)
m[:5] = b"mmap!"
m.flush()
m.close()
os.close(fd)
with open(sys.argv[1], "rb") as f:
    assert f.read(5) == b"mmap!"
EOF
check_eq "a read-write create maps shared and its writes commit" 0 "$RC"
[ "$RC" -eq 0 ] || echo "# $OUT $ERR"
ofs_umount

# ---- asynchronous O_DIRECT overwrites racing cached readers ----
# The kernel drops a file's cached pages before an O_DIRECT write but not
# when an asynchronous one completes: a page a reader fetched meanwhile
# keeps the old bytes.  An open after the writer's close must not show them
# (xfstests generic/451).  io_submit through syscall(2): no libaio needed.
ofs_mount "$GEOM" || ofs_bail "cannot mount"
run python3 - "$MNT/t/aio" <<'EOF'
import ctypes, mmap, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
IO_SETUP, IO_SUBMIT, IO_GETEVENTS = 206, 209, 208  # x86_64
path, size = sys.argv[1], 655360
bufs = []
for pat in (b"\x55", b"\xaa"):
    m = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT wants
    m.write(pat * size)
    bufs.append(m)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, bufs[0])
os.close(fd)
readers, parent = [], os.getpid()
for _ in range(2):
    pid = os.fork()
    if pid == 0:  # a cached reader, until its parent is gone
        rfd = os.open(path, os.O_RDONLY)
        while os.getppid() == parent:
            os.pread(rfd, size, 0)
        os._exit(0)
    readers.append(pid)
ctx = ctypes.c_ulong(0)
if libc.syscall(IO_SETUP, 1, ctypes.byref(ctx)):
    sys.exit("io_setup: errno %d" % ctypes.get_errno())
stale, end, rnd = 0, time.time() + 15, 0
while time.time() < end and rnd < 600:
    rnd += 1
    want = bufs[rnd % 2]
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    iocb = ctypes.create_string_buffer(struct.pack("QIIHhIQQqQII", 0, 0, 0, 1, 0, fd,
        ctypes.addressof(ctypes.c_char.from_buffer(want)), size, 0, 0, 0, 0), 64)
    p = ctypes.c_void_p(ctypes.addressof(iocb))
    ev = ctypes.create_string_buffer(32)
    if libc.syscall(IO_SUBMIT, ctx, 1, ctypes.byref(p)) != 1 or \
            libc.syscall(IO_GETEVENTS, ctx, 1, 1, ev, None) != 1 or \
            struct.unpack("QQqq", ev.raw)[2] != size:
        sys.exit("round %d: the asynchronous write failed" % rnd)
    os.close(fd)
    with open(path, "rb") as f:
        stale += f.read() != want[:]
for pid in readers:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(rnd, stale)
EOF
check_eq "asynchronous O_DIRECT overwrites racing readers: no old bytes after the close" \
	"0 0" "$RC $(echo "$OUT" | awk '{print $2}')"
[ "$RC" -eq 0 ] || echo "# $OUT $ERR"
ofs_umount

# ---- the limit, and prefill=0 ----
ofs_mount "$GEOM,prefill=100K" || ofs_bail "cannot mount with prefill=100K"
drop_caches
p0=$(metric offloadfs_prefills_total) r0=$(metric offloadfs_read_latency_seconds_count)
check_cmp "prefill=100K: a 250,000-byte object reads right" "$REF/a2" "$MNT/t/a"
check_eq "prefill=100K: it is not prefilled" "$p0" "$(metric offloadfs_prefills_total)"
check_eq "prefill=100K: its reads reach the daemon" yes \
	"$([ "$(metric offloadfs_read_latency_seconds_count)" -gt "$r0" ] && echo yes || echo no)"
check_cmp "prefill=100K: a 75,000-byte object reads right" "$REF/b2" "$MNT/t/b"
check_eq "prefill=100K: it is prefilled" $((p0 + 1)) "$(metric offloadfs_prefills_total)"
ofs_umount
ofs_mount "$GEOM,prefill=0" || ofs_bail "cannot mount with prefill=0"
drop_caches
check_cmp "prefill=0: the object reads right" "$REF/b2" "$MNT/t/b"
check_eq "prefill=0: nothing is prefilled" 0 "$(metric offloadfs_prefills_total)"
ofs_umount
check_fails "prefill=abc is refused" "invalid prefill 'abc'" \
	"$OFS" "$ROOT" "$MNT" -f -o "$GEOM,prefill=abc"
check_fails "prefill over 64M is refused" "invalid prefill '65M': a size up to 64M" \
	"$OFS" "$ROOT" "$MNT" -f -o "$GEOM,prefill=65M"

# ---- a corrupted object is not prefilled; its read is EIO and logged ----
if [ "$OFS_BACKEND" == pages ]; then
	ofs_mount "$GEOM" || ofs_bail "cannot mount"
	d=$(getfattr --only-values -n user.offload.descriptor "$MNT/t/a" 2>/dev/null)
	f=$(echo "$d" | sed -n 's/^file_path=//p')
	o=$(echo "$d" | sed -n 's/^offset=//p')
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
off = int(sys.argv[2]) + 70000
b = os.pread(fd, 1, off)
os.pwrite(fd, bytes([b[0] ^ 0xff]), off)
os.close(fd)' "$f" "$o"
	drop_caches
	p0=$(metric offloadfs_prefills_total)
	check_fails "a corrupted object's read is EIO" "Input/output error" cat "$MNT/t/a"
	check_eq "it was not prefilled" "$p0" "$(metric offloadfs_prefills_total)"
	check_grep_log "the mismatch is logged with the key" "key 'a'"
	ofs_umount
else
	skip "a corrupted object's read is EIO" "flips bytes in a bucket file (pages backend)"
fi

# ---- the read-ahead, at a mount point whose name mountinfo escapes ----
MNT0=$MNT
MNT="$TESTDIR/m \\"$'\t'"x"
mkdir "$MNT"
ofs_mount "$GEOM" || ofs_bail "cannot mount at '$MNT'"
check_eq "the read-ahead of a mount at a name with a space, backslash and tab" 1024 \
	"$(cat "/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb" 2>&1)"
ofs_umount
MNT=$MNT0
ofs_done
