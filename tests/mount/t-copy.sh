#!/usr/bin/env bash
# t-copy.sh: copy_file_range(2) as a write of the source's bytes: between
# files at any offsets, from a writer's uncommitted bytes, within one file
# (overlap: EINVAL), short at the source's end, len 0, flags (EINVAL), a
# destination opened O_APPEND or read-only (EBADF), the batch control
# file (EINVAL), across tenants, a
# quota (EDQUOT with evict=off); cp of a large file; the bytes and their
# checksums (verified reads) kept across a remount.  On the pages backend
# the copies run inside the kernel between bucket files (noverify), or
# through the daemon's memory when committed bytes are verified.
set -u
. "$(dirname "$0")/lib.sh"

MIB=$((1024 * 1024))
metric() { getfattr -n user.offload.metrics --only-values "$MNT" 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'; }

# cfr SRC OFF_IN DST OFF_OUT LEN [FLAGS [DST_FLAGS]]: copy_file_range once
# (DST opened read-write with DST_FLAGS, default none); prints the count
# or the errno name.
cfr() {
	python3 -c '
import ctypes, errno, os, sys
src, oi, dst, oo, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
flags = int(sys.argv[6]) if len(sys.argv) > 6 else 0
dflags = {"": os.O_RDWR, "append": os.O_WRONLY | os.O_APPEND, "rdonly": os.O_RDONLY}[sys.argv[7] if len(sys.argv) > 7 else ""]
# A batch control file opens read-write only.
fi = os.open(src, os.O_RDWR if src.endswith("/.offload-batch") else os.O_RDONLY)
fo = os.open(dst, dflags | (os.O_CREAT if dflags != os.O_RDONLY else 0), 0o644)
# Through libc: os.copy_file_range has no flags.
libc = ctypes.CDLL(None, use_errno=True)
libc.copy_file_range.restype = ctypes.c_ssize_t
libc.copy_file_range.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.c_uint]
r = libc.copy_file_range(fi, ctypes.byref(ctypes.c_int64(oi)), fo, ctypes.byref(ctypes.c_int64(oo)), n, flags)
print(r if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())))
' "$@"
}

# ref_copy SRC OFF_IN DST OFF_OUT LEN: what cfr does, on the reference files in $REF.
ref_copy() {
	python3 -c '
import os, sys
src, oi, dst, oo, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
with open(src, "rb") as f:
    f.seek(oi); b = f.read(n)
fd = os.open(dst, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b, oo)
os.close(fd)' "$@"
}

# Both ways: a mount whose committed bytes are not verified copies inside
# the kernel; the default (verify) reads committed sources through memory.
for mode in noverify verify; do
	note "---- $mode ----"
	ofs_new_store
	if [ "$OFS_BACKEND" == ubsio ]; then
		rm -rf "$UBSIO_STUB_DIR" && mkdir -p "$UBSIO_STUB_DIR"
	fi
	opts="$OFS_OPTS_DEFAULT"
	[ $mode == noverify ] && opts="$opts,noverify"
	ofs_mount "$opts" || ofs_bail "cannot mount"
	T="$MNT/t"
	mkdir -p "$T" "$MNT/u"
	rm -f "$REF"/*

	# ---- between files, unaligned ----
	mkrand "$REF/a" $((3 * PAGE + 1234))
	cp "$REF/a" "$T/a"
	mkrand "$REF/b" $((2 * PAGE))
	cp "$REF/b" "$T/b"
	c0=$(metric 'offloadfs_copies_total{how="backend"}')
	m0=$(metric 'offloadfs_copies_total{how="memory"}')
	check_eq "$mode: copy 100000 bytes between files at unaligned offsets" 100000 \
		"$(cfr "$T/a" 777 "$T/b" 5000 100000)"
	ref_copy "$REF/a" 777 "$REF/b" 5000 100000
	check_cmp "$mode: the destination holds the source's bytes" "$REF/b" "$T/b"
	check_cmp "$mode: the source is unchanged" "$REF/a" "$T/a"
	c1=$(metric 'offloadfs_copies_total{how="backend"}')
	m1=$(metric 'offloadfs_copies_total{how="memory"}')
	if [ "$OFS_BACKEND" == pages ] && [ $mode == noverify ]; then
		check_eq "$mode: the daemon copied inside the backend" 1 $((c1 - c0))
	else
		check_eq "$mode: the daemon copied through its memory" 1 $((m1 - m0))
	fi

	# ---- past the end: a new file grows, with zeros before ----
	check_eq "$mode: copy into a new file at an offset" $PAGE "$(cfr "$T/a" 0 "$T/n" 70000 $PAGE)"
	ref_copy "$REF/a" 0 "$REF/n" 70000 $PAGE
	check_cmp "$mode: the new file is zeros then the bytes" "$REF/n" "$T/n"

	# ---- the source's end ----
	size=$(stat -c %s "$REF/a")
	check_eq "$mode: a copy past the source's end is short" 234 \
		"$(cfr "$T/a" $((size - 234)) "$T/s" 0 $PAGE)"
	ref_copy "$REF/a" $((size - 234)) "$REF/s" 0 234
	check_cmp "$mode: the short copy's bytes" "$REF/s" "$T/s"
	check_eq "$mode: a copy from the source's end copies nothing" 0 "$(cfr "$T/a" "$size" "$T/s" 0 10)"
	check_eq "$mode: len 0 copies nothing" 0 "$(cfr "$T/a" 0 "$T/s" 0 0)"
	check_eq "$mode: ... and leaves the destination's size" 234 "$(stat -c %s "$T/s")"

	# ---- errors ----
	check_eq "$mode: flags other than 0: EINVAL" EINVAL "$(cfr "$T/a" 0 "$T/s" 0 10 1)"
	check_eq "$mode: a destination opened O_APPEND: EBADF" EBADF \
		"$(cfr "$T/a" 0 "$T/s" 0 10 0 append)"
	check_eq "$mode: a destination opened read-only: EBADF" EBADF \
		"$(cfr "$T/a" 0 "$T/s" 0 10 0 rdonly)"
	check_eq "$mode: overlapping ranges of one file: EINVAL" EINVAL \
		"$(cfr "$T/a" 0 "$T/a" 1000 5000)"
	check_cmp "$mode: a refused copy changes nothing" "$REF/s" "$T/s"
	check_eq "$mode: into the tenant's batch control file: EINVAL" EINVAL \
		"$(cfr "$T/a" 0 "$T/.offload-batch" 0 10)"
	# Its size is 0: the kernel copies nothing from it without asking.
	check_eq "$mode: from it: nothing" 0 "$(cfr "$T/.offload-batch" 0 "$T/s" 0 10)"

	# ---- within one file, apart ----
	check_eq "$mode: copy within one file, ranges apart" 5000 "$(cfr "$T/a" 0 "$T/a" $((PAGE + 3)) 5000)"
	ref_copy "$REF/a" 0 "$REF/a" $((PAGE + 3)) 5000
	check_cmp "$mode: the file holds its own bytes copied" "$REF/a" "$T/a"

	# ---- from a writer's uncommitted bytes, in the same open and another ----
	mkrand "$REF/w" $((PAGE + 99))
	mkrand "$REF/w2" $((2 * PAGE))
	run python3 -c '
import os, sys
src, dst, data = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
fw = os.open(src, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fw, data)                      # not closed: not committed
fo = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fo, open(sys.argv[4], "rb").read()) # its checksum runs as it is written
print(os.copy_file_range(fw, fo, len(data), 0, 0)) # over bytes already summed
fr = os.open(src, os.O_RDONLY)          # another open of the file
print(os.copy_file_range(fr, fw, 1000, 0, len(data)))
os.close(fr); os.close(fo); os.close(fw)' "$T/w" "$T/w2" "$REF/w" "$REF/w2"
	check_eq "$mode: copies from a writer's uncommitted bytes" "$((PAGE + 99)) 1000" "$(echo $OUT)"
	ref_copy "$REF/w" 0 "$REF/w2" 0 $((PAGE + 99))
	ref_copy "$REF/w" 0 "$REF/w" $((PAGE + 99)) 1000
	check_cmp "$mode: ... the other file holds them" "$REF/w2" "$T/w2"
	check_cmp "$mode: ... and so does the writer's own file" "$REF/w" "$T/w"

	# ---- across tenants ----
	check_eq "$mode: copy into another tenant" $((2 * PAGE)) "$(cfr "$T/b" 0 "$MNT/u/b" 0 $((2 * PAGE)))"
	check_cmp "$mode: ... its bytes" "$REF/b" "$MNT/u/b"

	# ---- cp of a large file ----
	mkrand "$REF/big" $((9 * MIB + 4321))
	cp "$REF/big" "$T/big"
	m0=$(metric 'offloadfs_copies_total{how="memory"}')
	c0=$(metric 'offloadfs_copies_total{how="backend"}')
	check "$mode: cp of a 9 MiB file within the mount" cp "$T/big" "$T/big2"
	check "$mode: cp --reflink=auto" cp --reflink=auto "$T/big" "$MNT/u/big3"
	check_cmp "$mode: cp's copy" "$REF/big" "$T/big2"
	check_cmp "$mode: cp --reflink=auto's copy" "$REF/big" "$MNT/u/big3"
	m1=$(metric 'offloadfs_copies_total{how="memory"}')
	c1=$(metric 'offloadfs_copies_total{how="backend"}')
	check "$mode: cp went by copy_file_range" [ $((m1 + c1 - m0 - c0)) -ge 2 ]

	# ---- copies both ways between two files at once: no deadlock ----
	run timeout 60 python3 -c '
import os, sys
a, b = sys.argv[1], sys.argv[2]
pid = os.fork()
src, dst = (a, b) if pid else (b, a)
fi = os.open(src, os.O_RDWR)
fo = os.open(dst, os.O_RDWR)
for i in range(2000):
    os.copy_file_range(fi, fo, 4096, (i % 16) * 4096, (i % 16) * 4096)
os.close(fi); os.close(fo)
if pid:
    _, st = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(st))' "$T/big" "$T/big2"
	check_eq "$mode: copies both ways between two files at once finish" 0 "$RC"

	# ---- durable: the bytes and their checksums after a remount (reads verified) ----
	ofs_remount "$OFS_OPTS_DEFAULT" || ofs_bail "cannot remount"
	if [ "$OFS_BACKEND" == pages ]; then
		check "$mode: offloadctl scrub finds every checksum right" "$OFSCTL" scrub "$MNT"
	fi
	for f in a b n s w w2; do
		check_cmp "$mode: after a remount: $f" "$REF/$f" "$T/$f"
	done
	check_cmp "$mode: after a remount: big2" "$REF/big" "$T/big2"
	check_cmp "$mode: after a remount: the other tenant's copy" "$REF/big" "$MNT/u/big3"
	ofs_umount
done

# ---- a quota holds a copy as a write ----
ofs_new_store
if [ "$OFS_BACKEND" == ubsio ]; then
	rm -rf "$UBSIO_STUB_DIR" && mkdir -p "$UBSIO_STUB_DIR"
fi
ofs_mount "$OFS_OPTS_DEFAULT,evict=off" || ofs_bail "cannot mount"
mkdir "$MNT/q" "$MNT/r"
mkrand "$REF/q" $((4 * MIB))
cp "$REF/q" "$MNT/r/src"
setfattr -n user.offload.quota -v $((2 * MIB)) "$MNT/q"
sleep 1.2 # the tick that notes the quota
run python3 -c '
import errno, os, sys
fi = os.open(sys.argv[1], os.O_RDONLY)
fo = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
done = 0
try:
    while done < 4 << 20:
        done += os.copy_file_range(fi, fo, (4 << 20) - done, done, done)
    print("copied", done)
except OSError as e:
    print(errno.errorcode[e.errno], done)' "$MNT/r/src" "$MNT/q/dst"
check_eq "evict=off: a copy past the tenant's quota gets EDQUOT" EDQUOT "${OUT% *}"
check "... having copied no more than the quota" [ "${OUT#* }" -le $((2 * MIB)) ]
ofs_umount

ofs_done
