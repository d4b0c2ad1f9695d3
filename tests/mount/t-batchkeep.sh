#!/usr/bin/env bash
# t-batchkeep.sh: descriptors a batch client keeps (docs/batch.md,
# "Descriptors a client keeps"), with -o verify and -o noverify (where no
# checksum stands behind a stale descriptor).  One client process keeps the
# descriptors of its puts and lookups; then a POSIX unlink, an overwrite,
# a rename of the key or of its directory, a delete_many from another
# process, and a delete whose pages a later put reuses must each make its
# next get_many and exists_many answer for the key as it is now, never with
# the bytes it had; a descriptor read with after its key was deleted and
# its pages put again is no longer valid; readers racing a writer that
# moves runs from key to key never get another key's bytes.  The epoch
# table (ROOT/batch-epochs): live while mounted, not after an unmount, a
# new generation at every mount and after a kill -9, and after an
# offloadctl fsck --repair of the store a kill left; a table of the wrong size or
# magic is made new; a live table the daemon cannot write makes the mount
# wait out what clients kept; fsck is clean with it in ROOT.  A client that cannot
# map the table looks each key up once; a full ROOT without a table, or
# with one full of holes, mounts without one.
set -u
. "$(dirname "$0")/lib.sh"

PYLIB="$OFS_TESTS_DIR/../../lib/python"
BT=${OFS_BATCH_TOOL:-"$OFS_BUILD/tests/batch_tool"}
export OFFLOADFS_BATCH_LIB=${OFFLOADFS_BATCH_LIB:-"$OFS_BUILD/liboffloadfs_batch.so"}
[ "$OFS_BACKEND" == pages ] || {
	skip "kept descriptors" "the batch interface is pages-only"
	ofs_done
}

# table FIELD: live or gen of ROOT/batch-epochs (struct ofs_batch_epochs).
table() {
	python3 -c '
import struct, sys
magic, live, gen = struct.unpack_from("<QQQ", open(sys.argv[1], "rb").read(24))
print({"live": live, "gen": gen, "magic": "%x" % magic}[sys.argv[2]])
' "$ROOT/batch-epochs" "$1"
}

# The client: prints "NAME<TAB>EXPECTED<TAB>GOT" per check.
cat >"$TESTDIR/keep.py" <<'EOF'
import os, subprocess, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob

mnt, t = sys.argv[1], sys.argv[1] + "/t1"
tn = ob.Tenant(t)
S = 131072

def block(tag, i):
    return (tag * (S // len(tag) + 1))[:S] if i is None else bytes([i % 251]) * S

def get(key, size=S):
    buf = [bytearray(size)]
    sizes, errs = tn.get_many_errs([key], buf)
    if errs[0]:
        return "errno %d" % -errs[0]
    return "bytes %s" % bytes(buf[0][:sizes[0]])[:8].hex()

def show(name, want, got):
    print("%s\t%s\t%s" % (name, want, got), flush=True)

def barrier():
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)

A, B, C, N = block(b"aaaa", None), block(b"bbbb", None), block(b"cccc", None), block(b"nnnn", None)
tn.put_many(["a", "b", "c", "d/x"], [A, B, C, A])
# The daemon stopped: what get_many and exists_many answer comes from the kept descriptors.
import signal, threading, time
os.kill(int(sys.argv[3]), signal.SIGSTOP)
threading.Timer(3, os.kill, (int(sys.argv[3]), signal.SIGCONT)).start()
t0 = time.monotonic()
got = get("a"), tn.exists_many(["b", "c", "d/x"])
fast = time.monotonic() - t0 < 2
os.kill(int(sys.argv[3]), signal.SIGCONT)
show("get_many with the descriptors its put kept, the daemon stopped", "bytes " + A[:8].hex(),
     got[0])
show("exists_many with them", "[True, True, True]", str(got[1]))
show("neither asked the daemon", "True", str(fast))

os.remove(t + "/a")
show("after a POSIX unlink, get_many of the key", "errno 2", get("a"))
show("after a POSIX unlink, exists_many of the key", "[False]", str(tn.exists_many(["a"])))

with open(t + "/b", "wb") as f:
    f.write(N[:S // 2])
show("after a POSIX overwrite, get_many gives the new content", "bytes " + N[:8].hex(),
     get("b"))
buf = [bytearray(S)]
show("... and its new size", str(S // 2), str(tn.get_many_errs(["b"], buf)[0][0]))

os.rename(t + "/c", t + "/c2")
show("after a rename, the old key is missing", "errno 2", get("c"))
show("after a rename, the new key has the bytes", "bytes " + C[:8].hex(), get("c2"))

os.rename(t + "/d", t + "/e")
show("after a rename of its directory, the old key is missing", "errno 2", get("d/x"))
show("the key under the new directory has the bytes", "bytes " + A[:8].hex(), get("e/x"))

tn.put_many(["o"], [C])
get("o")
subprocess.run([sys.executable, "-c", """
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
ob.Tenant(sys.argv[1]).delete_many(["o"])
""", t, sys.argv[2]], check=True)
show("after a delete_many by another process, get_many of the key", "errno 2", get("o"))

# Pages freed and used again: descriptors of the old key must not read the new bytes.
tn.put_many(["p"], [A])
get("p")
old = os.getxattr(t + "/p", "user.offload.descriptor")
os.remove(t + "/p")
barrier()
keys = ["q%d" % i for i in range(16)]
tn.put_many(keys, [block(None, i + 1) for i in range(16)])
reused = sum(os.getxattr(t + "/" + k, "user.offload.descriptor").split(b" ")[0:2] ==
             old.split(b" ")[0:2] for k in keys)
show("a later put reuses the deleted key's pages", "True", str(reused > 0))
show("after its pages were reused, get_many of the deleted key", "errno 2", get("p"))
# Readers racing a writer that deletes the keys, runs a barrier and puts
# them again with new bytes: the runs go from key to key, and a read must
# never return bytes of another key (the first 8 bytes name key and round).
WRITER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1] + "/t1")
S, keys, end, rnd = 131072, ["r%d" % i for i in range(32)], time.monotonic() + 3, 0
while time.monotonic() < end:
    rnd += 1
    t.delete_many(keys)
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    t.put_many(keys, [(i + 1).to_bytes(4, "little") + rnd.to_bytes(4, "little") +
                      bytes([i + 1]) * (S - 8) for i in range(32)])
print(rnd)
"""
keys = ["r%d" % i for i in range(32)]
tn.put_many(keys, [(i + 1).to_bytes(4, "little") + bytes(4) + bytes([i + 1]) * (S - 8)
                   for i in range(32)])
w = subprocess.Popen([sys.executable, "-c", WRITER, mnt, sys.argv[2]], stdout=subprocess.PIPE,
                     text=True)
bad = good = 0
bufs = [bytearray(S) for _ in keys]
while w.poll() is None:
    sizes, errs = tn.get_many_errs(keys, bufs)
    for i, e in enumerate(errs):
        b = bytes(bufs[i][:sizes[i]])
        if e == 0 and b[:4] == (i + 1).to_bytes(4, "little") and b[8:] == bytes([i + 1]) * (S - 8):
            good += 1
        elif e != -2:
            bad += 1
rounds = int(w.stdout.read() or 0)
show("racing a writer that reuses the runs, no read gave another key's bytes", "0", str(bad))
show("... over many rounds and reads", "True", str(rounds > 10 and good > 100))
EOF

run_client() {
	local name want got
	while IFS=$'\t' read -r name want got; do
		check_eq "$1: $name" "$want" "$got"
	done < <(python3 "$TESTDIR/keep.py" "$MNT" "$PYLIB" "$OFS_PID" 2>"$TESTDIR/keep.err"
		echo "the client ran to its end	0	$?")
	[ -s "$TESTDIR/keep.err" ] && echo "# $(head -c 600 "$TESTDIR/keep.err")"
}

for mode in verify noverify; do
	ROOT="$TESTDIR/root-$mode"
	mkdir -p "$ROOT"
	ofs_mount "bucket_count=1,bucket_size=64M,$mode" || ofs_bail "cannot mount"
	mkdir "$MNT/t1"
	check_eq "$mode: the table is live while mounted" 1 "$(table live)"
	run_client "$mode"
	run "$BT" stale "$MNT/t1"
	check_eq "$mode: a descriptor read after its key was deleted and its pages put again is no longer valid" \
		"1 0 reused" "$OUT${ERR:+ $ERR}"
	G0=$(table gen)
	ofs_umount || ofs_bail "cannot unmount"
	check_eq "$mode: not live after an unmount" 0 "$(table live)"
	check "$mode: a new generation at unmount" test "$(table gen)" -gt "$G0"
	check_fsck_clean "$mode: fsck with the table in ROOT"
done

# ---- generations across mounts and kills; a damaged table ----
ROOT="$TESTDIR/root-gen"
mkdir -p "$ROOT"
ofs_mount || ofs_bail "cannot mount"
G1=$(table gen)
ofs_kill9 || ofs_bail "cannot kill the daemon"
check_eq "after kill -9 the table still says live" 1 "$(table live)"
ofs_mount "$OFS_LAST_OPTS" || ofs_bail "cannot mount after kill -9"
check "a mount after kill -9 starts a new generation" test "$(table gen)" -gt "$G1"
# A live table the daemon cannot write (immutable): the mount waits out
# what clients kept (OFS_BATCH_KEEP_S, 5 s) before it changes anything.
ofs_kill9 || ofs_bail "cannot kill the daemon"
if chattr +i "$ROOT/batch-epochs" 2>/dev/null; then
	t0=$(date +%s.%N)
	ofs_mount "$OFS_LAST_OPTS" || ofs_bail "cannot mount beside an immutable table"
	t1=$(date +%s.%N)
	chattr -i "$ROOT/batch-epochs"
	check_grep_log "a live table it cannot retire: the mount says it waits" "waiting 5 s"
	check "... and waits 5 s before serving" python3 -c "import sys; sys.exit($t1 - $t0 < 5)"
	check_eq "... and keeps no table" 1 "$(grep -c 'no epoch table' "$LOG")"
else
	skip "a live table it cannot retire" "chattr +i does not work under $ROOT"
	ofs_mount "$OFS_LAST_OPTS" || ofs_bail "cannot mount"
fi
ofs_umount || ofs_bail "cannot unmount"
head -c 100 /dev/urandom >"$ROOT/batch-epochs"
ofs_mount "$OFS_LAST_OPTS" || ofs_bail "cannot mount over a damaged table"
check_eq "a table of the wrong size is made new" 32832 "$(stat -c %s "$ROOT/batch-epochs")"
check_eq "... with its magic" 6f66626570636873 "$(table magic)"
check_eq "... and live" 1 "$(table live)"
ofs_umount || ofs_bail "cannot unmount"
head -c 32832 /dev/zero >"$ROOT/batch-epochs"
ofs_mount "$OFS_LAST_OPTS" || ofs_bail "cannot mount over a table without its magic"
check_eq "a table of the right size without the magic is made new" \
	"6f66626570636873 1" "$(table magic) $(table live)"
ofs_kill9 || ofs_bail "cannot kill the daemon"
G2=$(table gen)
run "$OFSCTL" fsck "$ROOT"
check_eq "a read-only fsck writes nothing, the table neither" "$G2 1" "$(table gen) $(table live)"
check "fsck --repair of the store a kill left says no descriptor holds any more" \
	"$OFSCTL" fsck "$ROOT" --repair
check_eq "... the table is not live after it" 0 "$(table live)"
check "... with a new generation" test "$(table gen)" -gt "$G2"

# ---- a client that cannot map the table: one lookup per key, every read checked ----
ofs_mount "$OFS_LAST_OPTS" -d || ofs_bail "cannot mount with -d"
mkdir -p "$MNT/t1"
check "put 8 keys" "$BT" put "$MNT/t1" 8 4096
# Two get_many of the same keys in one process: with the table the second
# uses the descriptors the first kept.
cat >"$TESTDIR/twice.py" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
keys = ["k%04d" % i for i in range(8)]
for _ in range(2):
    t.get_many(keys, [bytearray(4096) for _ in keys])
EOF
writes() { grep -a -c 'opcode: WRITE' "$LOG"; }
before=$(writes)
run python3 "$TESTDIR/twice.py" "$MNT/t1" "$PYLIB"
check_eq "a client with the table: two gets of 8 keys, one INFO and one LOOKUP" "0 2" \
	"$RC $(($(writes) - before))"
before=$(writes)
run unshare -m sh -c "mount --bind /dev/null '$ROOT/batch-epochs' &&
	exec python3 '$TESTDIR/twice.py' '$MNT/t1' '$PYLIB'"
check_eq "a client that cannot map it: one INFO and one LOOKUP per get, no more" "0 3" \
	"$RC $(($(writes) - before))"
ofs_umount || ofs_bail "cannot unmount"

# ---- a full ROOT without a table: the store mounts, without one ----
FS="$TESTDIR/fs"
mkdir -p "$FS"
mount -t tmpfs -o size=16M tmpfs "$FS" || ofs_bail "cannot mount a tmpfs"
ofs_track_mnt "$FS"
ROOT="$FS/root"
mkdir "$ROOT"
ofs_mount "bucket_count=2,bucket_size=64M,meta=$TESTDIR/full-meta.db" || ofs_bail "cannot mount"
mkdir "$MNT/t1"
check "put 2 keys" "$BT" put "$MNT/t1" 2 4096
ofs_umount || ofs_bail "cannot unmount"
rm -f "$ROOT/batch-epochs"
dd if=/dev/zero of="$FS/filler" bs=4k 2>/dev/null
check "a full ROOT without the table: the store mounts" \
	ofs_mount "bucket_count=2,bucket_size=64M,meta=$TESTDIR/full-meta.db"
check_grep_log "... and says it keeps no table" "no epoch table"
check "... get_many looks the keys up and checks them" "$BT" get "$MNT/t1" 2 4096
ofs_umount || ofs_bail "cannot unmount"
# A table with holes (a sparse copy or restore of ROOT), live, on a full disk.
rm -f "$FS/filler" "$ROOT/batch-epochs"
python3 -c '
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<QQQ", 0x6f66626570636873, 1, 7))
    f.truncate(32832)
' "$ROOT/batch-epochs"
dd if=/dev/zero of="$FS/filler" bs=4k 2>/dev/null
check "a full ROOT with a sparse table: the store mounts" \
	ofs_mount "bucket_count=2,bucket_size=64M,meta=$TESTDIR/full-meta.db"
check_grep_log "... and keeps no table" "no epoch table"
check_eq "... which it retired: not live, a new generation" "0 8" "$(table live) $(table gen)"
check_eq "... and lists its keys" "k0000 k0001" "$(ls "$MNT/t1" | tr '\n' ' ' | sed 's/ $//')"
check "... get_many looks the keys up and checks them" "$BT" get "$MNT/t1" 2 4096
ofs_umount || ofs_bail "cannot unmount"
umount "$FS"
ofs_done
