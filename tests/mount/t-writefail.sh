#!/usr/bin/env bash
# t-writefail.sh: a WRITE of a file's data that fails, as the kernel's
# write-back of mmap'd pages, a buffered write(2) or an O_DIRECT one, loses
# nothing in silence: the file's flush, fsync and close fail with the error,
# nothing of that open is committed, the file keeps its previous content and
# the daemon logs the key.  The failure is an EIO injected by an LD_PRELOAD
# shim (pwrite to a bucket file fails while a flag file exists), then the
# real thing: ENOSPC on a full loop-mounted ext4 made here.
set -u
. "$(dirname "$0")/lib.sh"

if [ "$OFS_BACKEND" != pages ]; then
	skip "failed bucket writes" "bucket files are the pages backend's"
	ofs_done
fi
command -v cc >/dev/null || { skip "failed bucket writes" "no C compiler"; ofs_done; }

FLAG="$TESTDIR/eio.on"
cat >"$TESTDIR/eio.c" <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* pwrite to a bucket file fails with EIO while $OFS_EIO_FLAG exists. */
static int failing(int fd)
{
	const char *flag = getenv("OFS_EIO_FLAG");
	char p[64], target[4096];
	ssize_t n;

	if (!flag || access(flag, F_OK))
		return 0;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return strstr(target, "/bucket_") != NULL;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
	if (failing(fd)) {
		errno = EIO;
		return -1;
	}
	return real(fd, buf, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return pwrite64(fd, buf, len, off);
}
CEOF
cc -shared -fPIC -O2 -o "$TESTDIR/eio.so" "$TESTDIR/eio.c" -ldl ||
	ofs_bail "cannot build the EIO shim"

# writer KIND PATH FLAG REF: write over PATH (holding REF's bytes) the way
# KIND does, the flag file created at the moment the data goes to the
# daemon; prints what each call returned.
cat >"$TESTDIR/writer.py" <<'PYEOF'
import errno, mmap, os, sys
kind, path, flag, out = sys.argv[1:5]
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
def on():
    if flag != "-": open(flag, "w").close()
def off():
    if flag != "-" and os.path.exists(flag): os.unlink(flag)
res = []
acked = bytearray(open(path, "rb").read()) if os.path.exists(path) else bytearray()
size = 1 << 20
data = os.urandom(size)
try:
    if kind == "mmap":
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size)
            res.append("ftruncate OK")
        except OSError as e:
            res.append("ftruncate " + name(e))
            off(); os.close(fd); print(" ".join(res)); sys.exit(0)
        m = mmap.mmap(fd, size, mmap.MAP_SHARED)
        m[:] = data
        acked = bytearray(data)
        on()
        try:
            m.flush()
            res.append("msync OK")
        except OSError as e:
            res.append("msync " + name(e))
        m.close()
    else:
        flags = os.O_WRONLY | os.O_CREAT
        if kind == "direct":
            flags |= os.O_DIRECT
        fd = os.open(path, flags, 0o644)
        buf = mmap.mmap(-1, 65536)  # page-aligned, for O_DIRECT
        failed = False
        for i in range(size // 65536):
            if i == 4: on()
            buf[:] = data[i * 65536:(i + 1) * 65536]
            try:
                n = os.pwrite(fd, buf, i * 65536)
                end = i * 65536 + n
                if end > len(acked): acked.extend(b"\0" * (end - len(acked)))
                acked[i * 65536:end] = data[i * 65536:i * 65536 + n]
            except OSError as e:
                res.append("write%d %s" % (i, name(e)))
                failed = True
                break
        if not failed: res.append("writes OK")
    try:
        os.fsync(fd)
        res.append("fsync OK")
    except OSError as e:
        res.append("fsync " + name(e))
    try:
        os.close(fd)
        res.append("close OK")
        open(out, "wb").write(acked)
    except OSError as e:
        res.append("close " + name(e))
finally:
    off()
print(" ".join(res))
PYEOF

# settled NAME FILE REF: FILE reads back as REF (the daemon drops the
# kernel's cached pages of a failed writer from its group-commit thread).
settled() {
	local i
	for ((i = 0; i < 40; i++)); do
		cmp -s "$2" "$3" && { ok "$1"; return; }
		sleep 0.1
	done
	not_ok "$1" "$(cmp "$2" "$3" 2>&1 | head -1)"
}

GEOM="bucket_count=2,bucket_size=16M"
LD_PRELOAD="$TESTDIR/eio.so" OFS_EIO_FLAG="$FLAG" ofs_mount "$GEOM" || ofs_bail "cannot mount"
mkdir "$MNT/t"
for kind in mmap buffered direct; do
	mkrand "$REF/$kind" 300000
	cp "$REF/$kind" "$MNT/t/$kind"
	ofs_sync
	run python3 "$TESTDIR/writer.py" "$kind" "$MNT/t/$kind" "$FLAG" "$REF/$kind.acked"
	note "$kind writer, EIO: $OUT $ERR"
	check_contains "$kind writer, EIO: close fails with EIO" "close EIO" "$OUT"
	check_contains "$kind writer, EIO: fsync fails with EIO" "fsync EIO" "$OUT"
	settled "$kind writer, EIO: the file keeps its previous content" "$REF/$kind" "$MNT/t/$kind"
	check_grep_log "$kind writer, EIO: the daemon logs the failed write with the key" \
		"to 't/$kind'"
	# The same file takes a new writer afterwards: the poison was that open's.
	mkrand "$REF/$kind.2" 100000
	check "$kind: a later writer of the same file succeeds" cp "$REF/$kind.2" "$MNT/t/$kind"
	check_cmp "$kind: and its bytes read back" "$REF/$kind.2" "$MNT/t/$kind"
done
ofs_umount
check_eq "the daemon exits 0 after the failed writes" 0 "$OFS_RC"
ofs_mount "$GEOM" || ofs_bail "cannot remount"
for kind in mmap buffered direct; do
	check_cmp "after remount: $kind holds the later writer's bytes" "$REF/$kind.2" "$MNT/t/$kind"
done
ofs_umount
check_fsck_clean "after the injected write failures"

# ---- a really full disk: ext4 on a loop device, 24 MiB under 64 MiB of buckets ----
if ! command -v mkfs.ext4 >/dev/null || ! truncate -s 24M "$TESTDIR/disk.img" ||
	! mkfs.ext4 -q -m 0 -F "$TESTDIR/disk.img" || ! mkdir -p "$TESTDIR/disk" ||
	! mount -o loop "$TESTDIR/disk.img" "$TESTDIR/disk"; then
	skip "writers on a full ext4" "cannot make and loop-mount an ext4 image"
	ofs_done
fi
ofs_track_mnt "$TESTDIR/disk"
ROOT="$TESTDIR/disk/root"
mkdir "$ROOT"
GEOM="bucket_count=2,bucket_size=32M"
ofs_mount "$GEOM" || ofs_bail "cannot mount on the ext4"
mkdir "$MNT/t"
for kind in mmap buffered direct; do
	mkrand "$REF/$kind" 200000
	cp "$REF/$kind" "$MNT/t/$kind"
done
# Fill the disk through the mount, 256 KiB files, until ENOSPC; again once
# the daemon has had time to give back the metadata's reserve (which the
# data may then use down to the reserve's size).
i=0
for round in 1 2 3 4 5; do
	start=$i
	sleep 1.5
	while head -c 262144 /dev/urandom >"$MNT/t/fill$i" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 400 ] || break
	done
	rm -f "$MNT/t/fill$i"
	[ "$i" -gt "$start" ] || break
done
note "full after $i fill files; ext4 free: $(df -k --output=avail "$TESTDIR/disk" | tail -1) KiB"
check "the disk filled" test "$i" -lt 400
for kind in mmap buffered direct; do
	run python3 "$TESTDIR/writer.py" "$kind" "$MNT/t/$kind" - "$REF/$kind.acked"
	note "$kind writer, full disk: $OUT $ERR"
	check_contains "$kind writer, full disk: the disk says ENOSPC" "ENOSPC" "$OUT"
	if [[ "$OUT" == *"close OK"* ]]; then
		check_cmp "$kind writer, full disk: close succeeded, so every acknowledged byte reads back" \
			"$REF/$kind.acked" "$MNT/t/$kind"
	else
		settled "$kind writer, full disk: close failed, so the previous content stays" \
			"$REF/$kind" "$MNT/t/$kind"
	fi
done
check_contains "mmap writer, full disk: ENOSPC comes at ftruncate, not at write-back" \
	"ftruncate ENOSPC" "$(python3 "$TESTDIR/writer.py" mmap "$MNT/t/mmap2" - "$REF/x")"
ofs_umount
check_eq "the daemon exits 0 on the full disk" 0 "$OFS_RC"
check_fsck_clean "after the writers on the full disk"
ofs_mount "$GEOM" || ofs_bail "cannot remount on the full disk"
for kind in mmap buffered direct; do
	if [ -e "$REF/$kind.acked" ]; then
		check_cmp "after remount: $kind as its successful close left it" "$REF/$kind.acked" "$MNT/t/$kind"
	else
		check_cmp "after remount: $kind keeps its previous content" "$REF/$kind" "$MNT/t/$kind"
	fi
done
ofs_umount
ofs_done
