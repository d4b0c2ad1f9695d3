#!/usr/bin/env bash
# t-warmfull.sh: freed runs kept warm (holding their blocks) never stand
# between a write and a disk that the metadata finds short.  ROOT and its
# metadata on a tmpfs of 16 MiB: the disk filled from outside until the
# daemon gives the metadata's reserve back, then filled again; a writer
# frees 3 MiB of its own working pages (ftruncate to 0: warm at once) and
# writes 64 KiB at once: those blocks are the store's, so the write must
# not get ENOSPC (the write path's "metadata short" check punches the
# warm runs and looks again).
set -u
. "$(dirname "$0")/lib.sh"

if [ "$OFS_BACKEND" != pages ]; then
	skip "warm runs on a short disk" "the pages backend only"
	ofs_done
fi
DISK="$TESTDIR/disk"
mkdir "$DISK"
mount -t tmpfs -o size=16M tmpfs "$DISK" || { skip "warm runs on a short disk" "cannot mount a tmpfs"; ofs_done; }
ofs_track_mnt "$DISK"
ROOT="$DISK/root"
mkdir "$ROOT"
ofs_mount "bucket_count=2,bucket_size=64M" || ofs_bail "cannot mount"
mkdir "$MNT/t"

run timeout 60 python3 - "$MNT/t/w" "$DISK" <<'EOF'
import errno, os, sys, time
path, disk = sys.argv[1], sys.argv[2]
def avail():
    st = os.statvfs(disk)
    return st.f_bavail * st.f_frsize
def fill(name):
    # In this process: a fork would close a copy of fd at its exec, a FLUSH that commits.
    with open("%s/%s" % (disk, name), "wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(4096))
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    os.sync()
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, os.urandom(3 << 20))        # 3 MiB of working pages with their blocks
fill("filler1")                          # the disk full: the next tick gives the reserve back
for _ in range(50):
    time.sleep(0.1)
    if avail() > 1 << 20:
        break
print("reserve given back:", avail() > 1 << 20)
fill("filler2")                          # full again: the metadata is short
os.truncate("%s/filler2" % disk, max(0, os.path.getsize("%s/filler2" % disk) - (512 << 10)))
print("short: %d KiB" % (avail() >> 10))  # room for the metadata, less than half its reserve
time.sleep(1.5)                          # a tick: no warm run yet to punch
os.ftruncate(fd, 0)                      # its 3 MiB freed: warm, blocks kept
print("after truncate: %d KiB" % (avail() >> 10))
try:
    os.pwrite(fd, b"x" * 65536, 0)
    print("write ok")
except OSError as e:
    print("write", errno.errorcode[e.errno], "%d KiB" % (avail() >> 10))
try:
    os.close(fd)
except OSError as e:
    print("close", errno.errorcode[e.errno])
EOF
note "$OUT $ERR"
check_contains "the metadata's reserve was given back" "reserve given back: True" "$OUT"
check_contains "a write into blocks the store holds warm gets no ENOSPC" "write ok" "$OUT"
rm -f "$DISK"/filler*
ofs_umount
ofs_done
