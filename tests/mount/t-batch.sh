#!/usr/bin/env bash
# t-batch.sh: the batch interface (TENANT/.offload-batch,
# liboffloadfs_batch, docs/batch.md) on the pages backend: put_many/get_many
# of 64 keys of 128 KiB, visible to POSIX readers at once; exists_many and
# delete_many; 1,500 keys (more than one request) and empty objects; the
# Python module; a client killed between reserve and commit gives its runs
# back; duplicate keys refuse a batch (put_many: the whole call, before any
# directory is made; a file in the way of a key refuses only that key); a
# commit with a wrong page sum fails and shows nothing; commits racing
# unlinks of the same key leave either the whole file or none; a daemon
# kill -9 between reserve and commit leaves nothing visible and no leaked
# page (fsck clean); delete_many gives each key its result, and a kill -9
# right after it loses none of its deletes; keys read by get_many count as
# used, so eviction keeps them; with evict=off, keys past the tenant's quota
# get EDQUOT, the others are put; bad keys get their own error (EINVAL,
# ENAMETOOLONG) and make no directory; EOVERFLOW gives the size needed; a
# batch that fails whole gives each key its error; a client that cannot
# write the bucket files gets EACCES and holds no page.  On the ubsio
# backend: every batch is EOPNOTSUPP.
set -u
. "$(dirname "$0")/lib.sh"

BT=${OFS_BATCH_TOOL:-"$OFS_BUILD/tests/batch_tool"}
[ -x "$BT" ] || ofs_bail "$BT missing (ninja -C build)"
PYLIB="$OFS_TESTS_DIR/../../lib/python"
export OFFLOADFS_BATCH_LIB=${OFFLOADFS_BATCH_LIB:-"$OFS_BUILD/liboffloadfs_batch.so"}

ofs_mount || ofs_bail "cannot mount"
mkdir -p "$MNT/t1/held"

# ---- the control file's name is special in a tenant's top level only ----
C=.offload-batch
check "TENANT/$C is there" stat "$MNT/t1/$C"
check_fails "TENANT/$C cannot be made again (EEXIST)" "File exists" mkdir "$MNT/t1/$C"
check_fails "... nor removed (EPERM)" "Operation not permitted" rm -f "$MNT/t1/$C"
echo f >"$MNT/t1/rf"
check_fails "... nor renamed onto (EPERM)" "Operation not permitted" mv "$MNT/t1/rf" "$MNT/t1/$C"
rm -f "$MNT/t1/rf"
mkdir "$MNT/t1/sub"
check_fails "TENANT/sub/$C is not there (ENOENT)" "No such file" stat "$MNT/t1/sub/$C"
check "... so a file of that name can be made there" sh -c "echo x >'$MNT/t1/sub/$C'"
check_eq "... read back" x "$(cat "$MNT/t1/sub/$C" 2>&1)"
check "... renamed" mv "$MNT/t1/sub/$C" "$MNT/t1/sub/other"
check "... renamed back" mv "$MNT/t1/sub/other" "$MNT/t1/sub/$C"
check "... removed" rm "$MNT/t1/sub/$C"
check "... made by mknod (a regular file)" python3 -c \
	'import os, stat, sys; os.mknod(sys.argv[1], stat.S_IFREG | 0o600)' "$MNT/t1/sub/$C"
rm -f "$MNT/t1/sub/$C"
check "... a directory of that name" mkdir "$MNT/t1/sub/$C"
check "... removed" rmdir "$MNT/t1/sub/$C"
check "at the root, among the tenants, it is a tenant's name like any" mkdir "$MNT/$C"
check "... a tenant with its own control file" stat "$MNT/$C/$C"
rmdir "$MNT/$C"
rmdir "$MNT/t1/sub"
if [ "$OFS_BACKEND" != pages ]; then
	# Values live in the KV store: no bucket file for a client to write.
	check_fails "batches are EOPNOTSUPP on $OFS_BACKEND" "Operation not supported" \
		"$BT" put "$MNT/t1" 4 4096
	ofs_umount
	ofs_done
fi
FREE0=$(ofs_free)

# ---- round trip ----
stat "$MNT/t1/k0000" >/dev/null 2>&1 # the kernel now remembers the name as missing
check "put_many of 64 keys of 128 KiB" "$BT" put "$MNT/t1" 64 131072 5
check "get_many returns every byte" "$BT" get "$MNT/t1" 64 131072 5
check_eq "the files are in the namespace" 64 "$(find "$MNT/t1" -maxdepth 1 -name 'k*' -type f | wc -l)"
check_eq "a name stat saw missing before the put is there" 131072 "$(stat -c %s "$MNT/t1/k0000" 2>&1)"
python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
buf = [bytearray(131072)]
n = t.get_many(["k0007"], buf)[0]
sys.exit(0 if open(sys.argv[1] + "/k0007", "rb").read() == bytes(buf[0][:n]) and n == 131072 else 1)
' "$MNT/t1" "$PYLIB"
check_eq "a POSIX read gives the bytes get_many gives" 0 $?
check_eq "checksum xattr of a batch-put file" \
	"$(python3 -c 'import sys; print(len(sys.argv[1]))' "$(getfattr -n user.offload.checksum --only-values "$MNT/t1/k0001" 2>/dev/null)")" 16

# ---- names the kernel may remember, keys in directories ----
mkdir -p "$MNT/t1/neg/a/b"
stat "$MNT/t1/neg/a/b/k0002" >/dev/null 2>&1 # a missing name in a nested directory
check "put_many of keys in a nested directory" "$BT" put "$MNT/t1" 4 4096 3 neg/a/b
check_eq "a nested name stat saw missing before the put is there at once" 4096 \
	"$(stat -c %s "$MNT/t1/neg/a/b/k0002" 2>&1)"
check_eq "a name the kernel never looked up is there too" 4096 \
	"$(stat -c %s "$MNT/t1/neg/a/b/k0003" 2>&1)"
check "get_many of keys in a nested directory" "$BT" get "$MNT/t1" 4 4096 3 neg/a/b
python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
keys = ["mix/a/x", "mix/b/x", "mix/a/y", "mixtop", "mix/a/b/z", "mix/a/z"]
t.put_many(keys, [k.encode() * 3 for k in keys])
bufs = [bytearray(64) for _ in keys]
n = t.get_many(["mix/a/y", "mix/b/x", "mixtop", "mix/a/x", "mix/a/z", "mix/a/b/z"], bufs)
want = [k.encode() * 3 for k in ["mix/a/y", "mix/b/x", "mixtop", "mix/a/x", "mix/a/z", "mix/a/b/z"]]
ok = [bytes(b[:m]) for b, m in zip(bufs, n)] == want
ok = ok and t.exists_many(["mix/a/x", "mix/b/y", "mix/b/x", "mix/c/x", "mix/a/b/z"]) == \
	[True, False, True, False, True]
sys.exit(0 if ok else 1)
' "$MNT/t1" "$PYLIB"
check_eq "keys of several directories in one batch, in any order: each its own bytes" 0 $?
rm -rf "$MNT/t1/neg" "$MNT/t1/mix" "$MNT/t1/mixtop"
run "$BT" exists "$MNT/t1" 70
check_eq "exists_many: 64 of 70" "exists 64" "$OUT"
run "$BT" put "$MNT/t1" 2 131072 9
check_contains "a put of an existing key is EEXIST" "File exists" "$ERR"
run "$BT" get "$MNT/t1" 2 131072 5
check_eq "and keeps its content" "get 0 bad 0" "$OUT"
run "$BT" delete "$MNT/t1" 64
check_eq "delete_many: 64" "deleted 64" "$OUT"
check_eq "deleted names are gone for stat" "no" "$(stat "$MNT/t1/k0000" >/dev/null 2>&1 && echo yes || echo no)"
run "$BT" exists "$MNT/t1" 64
check_eq "exists_many after delete" "exists 0" "$OUT"
check_eq "pages back after delete" "$FREE0" "$(ofs_free)"

# ---- more keys than one request holds; empty objects ----
run "$BT" put "$MNT/t1" 1500 4096 2 many
check_eq "put_many of 1,500 keys (two requests)" "put 0" "$OUT"
run "$BT" exists "$MNT/t1" 1500 4096 2 many
check_eq "exists_many of 1,500 keys" "exists 1500" "$OUT"
check "get_many of 1,500 keys" "$BT" get "$MNT/t1" 1500 4096 2 many
run "$BT" delete "$MNT/t1" 1500 4096 2 many
check_eq "delete_many of 1,500 keys" "deleted 1500" "$OUT"
check "empty objects: put" "$BT" put "$MNT/t1" 3 0 2 empty
check "empty objects: get" "$BT" get "$MNT/t1" 3 0 2 empty
check_eq "an empty object is an empty file" 0 "$(stat -c %s "$MNT/t1/empty/k0002" 2>&1)"
"$BT" delete "$MNT/t1" 3 0 2 empty >/dev/null
check_eq "pages back after the large batches" "$FREE0" "$(ofs_free)"

# ---- the Python module, keys with directories ----
run python3 -c '
import os, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
keys = ["Qwen/Qwen3-32B/blk%d" % i for i in range(32)]
data = [os.urandom(1000 * i + 1) for i in range(32)]
t.put_many(keys[:16], data[:16])
t.put_many(keys[16:], data[16:], flags=ob.SYNC)
bufs = [bytearray(40000) for _ in keys]
sizes = t.get_many(keys, bufs)
assert all(bytes(b[:s]) == d for b, s, d in zip(bufs, sizes, data)), "content"
assert t.exists_many(keys[:1] + ["Qwen/none"]) == [True, False]
t.delete_many(keys)
assert t.exists_many(keys) == [False] * 32
print("py ok")
' "$MNT/t1" "$PYLIB"
check_eq "Python module: put (and with SYNC), get, exists, delete of 32 nested keys" "py ok" "$OUT${ERR:+ $ERR}"

# ---- a client killed between reserve and commit ----
"$BT" hold "$MNT/t1" 8 131072 >"$TESTDIR/hold.out" 2>&1 &
HPID=$!
bg_track "$HPID"
wait_until 10 grep -q held "$TESTDIR/hold.out"
check_eq "reserved runs are taken (8 keys x 2 pages)" $((FREE0 - 16)) "$(ofs_free)"
check_eq "reserved keys are invisible" 0 "$(find "$MNT/t1/held" -type f | wc -l)"
bg_kill "$HPID"
wait_free "$FREE0"
check_eq "a killed client's runs are freed" "$FREE0" "$(ofs_free)"

# ---- duplicate keys ----
run "$BT" dup "$MNT/t1"
check_contains "a reserve with a duplicate key is refused (EINVAL)" "reserve-dup -22 -22 -22 -22" "$OUT"
check_contains "the same keys once: committed" "commit-unique 0 0" "$OUT"
check_contains "a commit with a duplicate key is refused (EINVAL)" "commit-dup -22" "$OUT"
check_contains "a key reserved again on the same description: EBUSY" "reserve-again -16" "$OUT"
check_eq "only the committed keys are visible" "dupa dupb" "$(cd "$MNT/t1" && echo dup*)"
rm -f "$MNT/t1"/dup*
wait_free "$FREE0"
check_eq "the refused batch's run is freed at close" "$FREE0" "$(ofs_free)"

# ---- put_many with a key twice: refused whole, before any directory is made ----
echo f >"$MNT/t1/nf"
run python3 -c '
import errno, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
def names(errs):
    return " ".join(errno.errorcode[-e] if e else "ok" for e in errs)
print(names(t.put_many_errs(["dd/a/k", "dd/b/k", "dd/a/k"], [b"1", b"2", b"3"])))
# The same key in different requests of one call (1,024 keys each).
keys = ["de/x/k%d" % i for i in range(1100)] + ["de/x/k3"]
print(" ".join(sorted(set(names(t.put_many_errs(keys, [b""] * len(keys))).split()))))
# A file where a key needs a directory: that key ENOTDIR, the others put.
print(names(t.put_many_errs(["dn/x/k", "nf/y/k", "dn/k2"], [b"1", b"2", b"3"])))
' "$MNT/t1" "$PYLIB"
check_eq "put_many with a key twice: every key EINVAL" "EINVAL EINVAL EINVAL" \
	"$(sed -n 1p <<<"$OUT")${ERR:+ $ERR}"
check_eq "a key twice in different requests of one call: every key EINVAL" "EINVAL" \
	"$(sed -n 2p <<<"$OUT")"
check_eq "the refused puts made no directory" "" "$(cd "$MNT/t1" && ls -d dd de 2>/dev/null)"
check_eq "a key with a file in its way: ENOTDIR for it, the others put" "ok ENOTDIR ok" \
	"$(sed -n 3p <<<"$OUT")"
check_eq "... and only their files and directories are there" "dn/k2 dn/x/k nf" \
	"$(cd "$MNT/t1" && echo dn/k2 dn/x/* nf*)"
rm -rf "$MNT/t1/dn" "$MNT/t1/nf"

# ---- keys that cannot name a file: that key's error, nothing made, the others done ----
run python3 -c '
import errno, os, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
long_key = ("d" * 200 + "/") * 20 + "k" * 76 # 4,096 bytes
keys = ["../tbad/k", "bk/trail/", "bk/" + "n" * 256, "bk/x/../y", long_key, "bk/ok"]
errs = t.put_many_errs(keys, [b"v"] * len(keys))
print(" ".join(errno.errorcode[-e] if e else "ok" for e in errs))
print(" ".join(errno.errorcode[-e] if e else "ok" for e in
               t.get_many_errs([long_key, "bk/ok"], [bytearray(1), bytearray(1)])[1]))
t.get_many_errs(["bk/none"], [bytearray(1)]) # a lookup the long key below does not fail
print(" ".join(errno.errorcode[-e] if e else "ok" for e in t.delete_many_errs(["bk/ok", long_key])))
try:
    t.put_many(["bk/a", "bk/b"], [b"1"])
    print("mismatch taken")
except ValueError:
    print("mismatch refused")
' "$MNT/t1" "$PYLIB"
check_eq "put_many: bad keys EINVAL or ENAMETOOLONG (as through the mount), the good key put" \
	"EINVAL EINVAL ENAMETOOLONG EINVAL ENAMETOOLONG ok" "$(sed -n 1p <<<"$OUT")${ERR:+ $ERR}"
check_eq "get_many: a key past 4,095 bytes is that key's ENAMETOOLONG, not the batch's" \
	"ENAMETOOLONG ok" "$(sed -n 2p <<<"$OUT")"
check_eq "delete_many: the good key deleted, the long one ENAMETOOLONG" \
	"ok ENAMETOOLONG" "$(sed -n 3p <<<"$OUT")"
check_eq "Python: fewer buffers than keys are refused (ValueError), not put empty" \
	"mismatch refused" "$(sed -n 4p <<<"$OUT")"
check_eq "refused keys made no directory (no tenant through '..')" "bk: " \
	"$(cd "$MNT" && ls -d tbad 2>/dev/null; cd "$MNT/t1" && echo "bk: $(ls -A bk)")"
rm -rf "$MNT/t1/bk"

# ---- a get_many buffer too small: EOVERFLOW and the size it needs ----
run python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
t.put_many(["ov"], [b"x" * 5000])
sizes, errs = t.get_many_errs(["ov"], [bytearray(100)])
print(sizes[0], errs[0])
t.delete_many(["ov"])
' "$MNT/t1" "$PYLIB"
check_eq "EOVERFLOW with lens = the object's size" "5000 -75" "$OUT${ERR:+ $ERR}"

# ---- bad checksums ----
run "$BT" badsum "$MNT/t1"
check_eq "a wrong page sum fails the whole commit (EBADMSG; the others ECANCELED)" \
	"badsum 0 -74 -125 -125 -125 -74" "$OUT"
check_eq "nothing of it is visible" "" "$(cd "$MNT/t1" && ls -d bad* 2>/dev/null)"
wait_free "$FREE0"
check_eq "its runs are freed at close" "$FREE0" "$(ofs_free)"

# ---- a commit with the whole sums records them unread; OFFLOADFS_VERIFY reads back ----
# torn: the bytes in the bucket file are not those the sums were taken of.
run env OFFLOADFS_VERIFY=1 "$BT" torn "$MNT/t1"
check_eq "OFFLOADFS_VERIFY=1: the commit reads the pages back and refuses it (EBADMSG)" \
	"torn -74 -74" "$OUT"
check_eq "nothing of it is visible" "" "$(cd "$MNT/t1" && ls -d torn 2>/dev/null)"
run "$BT" torn "$MNT/t1"
check_eq "by default the commit records the client's sums without reading the pages" \
	"torn 0 0" "$OUT"
check_fails "a read through the mount (verify) gets EIO" "Input/output error" cat "$MNT/t1/torn"
run python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
print(ob.Tenant(sys.argv[1]).get_many_errs(["torn"], [bytearray(200000)])[1][0])
' "$MNT/t1" "$PYLIB"
check_eq "and so does get_many (EIO)" "-5" "$OUT${ERR:+ $ERR}"
run "$OFSCTL" scrub "$MNT"
check_contains "offloadctl scrub names it" "torn" "$OUT $ERR"
rm -f "$MNT/t1/torn"

# ---- names taken, directories removed between reserve and commit ----
run "$BT" taken "$MNT/t1"
check_eq "a name taken since its reserve: that entry EEXIST, the others commit" \
	"taken -17 0 -17 0" "$OUT"
check_eq "the taken name keeps the file made through the mount" "mount" "$(cat "$MNT/t1/tk1")"
check_eq "the others are the batch's" "70000 70000" "$(stat -c %s "$MNT/t1/tk0" "$MNT/t1/tk2" | xargs)"
rm -f "$MNT/t1"/tk*
wait_free "$FREE0"
check_eq "the refused entry's run is freed" "$FREE0" "$(ofs_free)"
mkdir "$MNT/t1/tdir"
run "$BT" taken "$MNT/t1" rmdir
check_eq "a directory removed since the reserve fails the whole commit (ENOENT)" "taken -2 -2" "$OUT"
check_eq "nothing of it is visible" "no" "$(test -e "$MNT/t1/tdir" && echo yes || echo no)"
wait_free "$FREE0"
check_eq "its run is freed at close" "$FREE0" "$(ofs_free)"

# ---- commits racing unlinks ----
run "$BT" race "$MNT/t1" 200
check_eq "commit vs unlink: every committed file whole or gone" 0 "$RC"
note "$OUT"
wait_free "$FREE0"
check_eq "no page leaked by the race" "$FREE0" "$(ofs_free)"

# ---- the tenant removed between reserve and commit ----
mkdir "$MNT/gone"
run python3 -c '
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[2])
lib.offloadfs_batch_open.restype = ctypes.c_void_p
lib.offloadfs_batch_reserve.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
lib.offloadfs_batch_commit.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.offloadfs_batch_close.argtypes = [ctypes.c_void_p]
b = lib.offloadfs_batch_open(sys.argv[1].encode())
keys = (ctypes.c_char_p * 1)(b"k")
lens = (ctypes.c_size_t * 1)(0)
desc = (ctypes.c_char * 64)()
r = lib.offloadfs_batch_reserve(b, keys, lens, 1, desc)
os.rmdir(sys.argv[1])
errs = (ctypes.c_int * 1)()
pcs = (ctypes.c_void_p * 1)()
print(r, lib.offloadfs_batch_commit(b, keys, lens, pcs, 1, 0, errs))
lib.offloadfs_batch_close(b)
' "$MNT/gone" "$OFFLOADFS_BATCH_LIB"
check_eq "a commit into a tenant removed since the reserve: ENOENT" "0 -2" "$OUT${ERR:+ $ERR}"

# ---- a clean unmount: fsck ----
"$BT" put "$MNT/t1" 16 131072 3 >/dev/null
ofs_umount
check_fsck_clean "after batches and a clean unmount"
ofs_mount || ofs_bail "cannot remount"
check "batch-put files survive a remount" "$BT" get "$MNT/t1" 16 131072 3

# ---- the daemon killed between reserve and commit ----
FREE1=$(ofs_free)
"$BT" hold "$MNT/t1" 8 131072 >"$TESTDIR/hold2.out" 2>&1 &
HPID=$!
bg_track "$HPID"
wait_until 10 grep -q held "$TESTDIR/hold2.out"
check_eq "reserved before the kill" $((FREE1 - 16)) "$(ofs_free)"
ofs_kill9
bg_kill "$HPID"
ofs_mount || ofs_bail "cannot mount after kill -9"
check_grep_log "bitmaps rebuilt after the kill" "$OFS_LOG_REBUILT"
check_eq "nothing reserved is visible after the kill" 0 "$(find "$MNT/t1/held" -type f | wc -l)"
check_eq "the reserved runs are free after the kill" "$FREE1" "$(ofs_free)"
check "committed files intact after the kill" "$BT" get "$MNT/t1" 16 131072 3
ofs_umount
check_fsck_clean "after a kill -9 between reserve and commit"

# ---- delete_many: a result per key, and every delete that returned survives a kill -9 ----
ofs_mount || ofs_bail "cannot mount"
FREE2=$(ofs_free)
run python3 -c '
import errno, os, signal, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
keys = ["dm/k%03d" % i for i in range(300)]
t.put_many(keys, [k.encode() * 300 for k in keys])
os.mkdir(sys.argv[1] + "/dm/sub")
ask, want = [], []
for i in range(0, 300, 2): # every other key, a missing one after every tenth
	ask.append(keys[i]); want.append(0)
	if i % 20 == 0:
		ask.append("dm/none%d" % i); want.append(-errno.ENOENT)
ask += [keys[0], "dm/sub", "nodir/k", "dm/k299"]
want += [-errno.ENOENT, -errno.EISDIR, -errno.ENOENT, 0]
errs = t.delete_many_errs(ask)
os.kill(int(sys.argv[3]), signal.SIGKILL) # at once: no group commit in between
print("ok" if errs == want else "got %s want %s" % (errs, want))
' "$MNT/t1" "$PYLIB" "$OFS_PID"
check_eq "delete_many: each key its own result (deleted, missing, twice, a directory)" \
	"ok" "$OUT${ERR:+ $ERR}"
ofs_kill9
ofs_mount || ofs_bail "cannot mount after kill -9"
run python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
keys = ["dm/k%03d" % i for i in range(300)]
ex = t.exists_many(keys)
gone = [k for k, e in zip(keys, ex) if not e]
kept = [k for k, e in zip(keys, ex) if e]
want_gone = keys[0::2] + ["dm/k299"]
bufs = [bytearray(4000) for _ in kept]
sizes = t.get_many(kept, bufs)
ok = all(bytes(b[:n]) == k.encode() * 300 for k, b, n in zip(kept, bufs, sizes))
print("gone %d kept %d%s" % (len(gone), len(kept),
      "" if sorted(gone) == sorted(want_gone) and ok else " wrong"))
t.delete_many(kept)
' "$MNT/t1" "$PYLIB"
check_eq "after a kill -9 right after delete_many: every delete kept, the other keys whole" \
	"gone 151 kept 149" "$OUT${ERR:+ $ERR}"
rmdir "$MNT/t1/dm/sub" "$MNT/t1/dm"
wait_free "$FREE2"
check_eq "their pages are free" "$FREE2" "$(ofs_free)"
ofs_umount
check_fsck_clean "after a kill -9 right after delete_many"

# ---- get_many is a use: eviction keeps the keys it read ----
ofs_new_store
ofs_mount "bucket_count=2,bucket_size=4M,evict=lru,evict_min_age=0" || ofs_bail "cannot mount"
mkdir "$MNT/r"
"$BT" put "$MNT/r" 16 131072 4 >/dev/null
sleep 1.1 # atimes in whole seconds for stat
stat "$MNT/r/k0000" >/dev/null # in the daemon's memory when read
check "get_many of the 8 oldest keys" "$BT" get "$MNT/r" 8 131072 4
stat "$MNT/r/k0002" >/dev/null # loaded after its read
newer_atime() { [ "$(stat -c %X "$1")" -gt "$(stat -c %Y "$1")" ]; }
check "a get_many moves st_atime" wait_until 5 newer_atime "$MNT/r/k0003"
check "offloadctl evict of 8 keys' bytes" "$OFSCTL" evict "$MNT" --tenant r --bytes $((8 * 131072))
check "the keys get_many read are kept" "$BT" get "$MNT/r" 8 131072 4
run "$BT" exists "$MNT/r" 16
check_eq "the 8 keys never read are evicted" "exists 8" "$OUT"
ofs_umount

# ---- evict=off: puts past the tenant's quota get EDQUOT ----
ofs_new_store
ofs_mount "evict=off" || ofs_bail "cannot mount"
mkdir "$MNT/q" "$MNT/o"
setfattr -n user.offload.quota -v $((4 * 131072)) "$MNT/q"
sleep 1.2 # the tick that notes the quota
put_errs() {
	run python3 -c '
import errno, os, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
keys = sys.argv[3:]
errs = ob.Tenant(sys.argv[1]).put_many_errs(keys, [os.urandom(131072) for _ in keys])
print(" ".join(errno.errorcode[-e] if e else "ok" for e in errs))
' "$1" "$PYLIB" "${@:2}"
}
put_errs "$MNT/q" a b c d e f
check_eq "put_many past the quota: the keys that fit are put, the others EDQUOT" \
	"ok ok ok ok EDQUOT EDQUOT" "$OUT${ERR:+ $ERR}"
check_eq "the refused keys are not there" "a b c d" "$(cd "$MNT/q" && echo *)"
put_errs "$MNT/o" a b c d e f
check_eq "another tenant puts" "ok ok ok ok ok ok" "$OUT${ERR:+ $ERR}"
sleep 1.2 # the tick that finds the tenant at its quota
put_errs "$MNT/q" g
check_eq "a tenant at its quota: EDQUOT" "EDQUOT" "$OUT${ERR:+ $ERR}"
rm "$MNT/q/a"
sleep 1.2
put_errs "$MNT/q" g
check_eq "below its quota again, the tenant puts" "ok" "$OUT${ERR:+ $ERR}"
ofs_umount
check_fsck_clean "after puts refused for the quota"

# ---- a client without access to ROOT: EACCES, its reservations given back at once ----
ofs_new_store
ofs_mount "$OFS_OPTS_DEFAULT,allow_other" || ofs_bail "cannot mount"
# nobody reaches the mount; ROOT stays 0700
if nobody_ready; then
	mkdir "$MNT/nb" && chown 65534 "$MNT/nb"
	mkdir "$TESTDIR/py" && cp "$PYLIB/offloadfs_batch.py" "$TESTDIR/py/" &&
		cp -L "$OFFLOADFS_BATCH_LIB" "$TESTDIR/py/liboffloadfs_batch.so.1" && chmod -R a+rX "$TESTDIR/py"
	FREE3=$(ofs_free_nosync)
	run setpriv --reuid=65534 --regid=65534 --clear-groups \
		env OFFLOADFS_BATCH_LIB="$TESTDIR/py/liboffloadfs_batch.so.1" python3 -c '
import os, sys
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
errs = ob.Tenant(sys.argv[1]).put_many_errs(["a", "b"], [b"x" * 200000, b"y" * 200000])
print(errs, os.statvfs(sys.argv[1]).f_bfree) # while the process, and its description, live
' "$MNT/nb" "$TESTDIR/py"
	check_eq "put_many without access to the bucket files: EACCES, no page held while the client lives" \
		"[-13, -13] $FREE3" "$OUT${ERR:+ $ERR}"
else
	skip "a client without access to ROOT" "$NOBODY_WHY"
fi
ofs_umount

# ---- a batch that fails whole (the daemon gone) gives each key that error ----
ofs_new_store
ofs_mount || ofs_bail "cannot mount"
mkdir -p "$MNT/t1"
run python3 -c '
import errno, os, signal, sys, time
sys.path.insert(0, sys.argv[2])
import offloadfs_batch as ob
t = ob.Tenant(sys.argv[1])
t.get_many_errs(["none/a", "none/b"], [bytearray(1), bytearray(1)]) # a reply of ENOENTs
pid = int(sys.argv[3])
os.kill(pid, signal.SIGKILL)
def alive(pid):
    try:
        return open("/proc/%d/stat" % pid).read().split(")")[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError): # reaped already (ENOENT, or ESRCH mid-read)
        return False
while alive(pid):
    time.sleep(0.01)
errs = t.delete_many_errs(["none/a", "none/b"])
gone = [-errno.ENOTCONN, -errno.ECONNABORTED] # the connection aborted, or being aborted
# Over io_uring (Linux 6.18) a request made while the rings of the dead
# daemon are torn down mostly ends with ECANCELED, the kernel answer for
# the whole batch.
if sys.argv[4] == "uring":
    gone.append(-errno.ECANCELED)
print(" ".join("gone" if e in gone else errno.errorcode.get(-e, str(e)) for e in errs))
' "$MNT/t1" "$PYLIB" "$OFS_PID" "${OFS_TRANSPORT:-}"
check_eq "delete_many after the daemon died: every key ENOTCONN, none an earlier reply's ENOENT" \
	"gone gone" "$OUT${ERR:+ $ERR}"
ofs_kill9

ofs_done
