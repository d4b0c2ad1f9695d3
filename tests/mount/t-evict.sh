#!/usr/bin/env bash
# t-evict.sh: the store as a cache.  Recency: an open moves st_atime, kept
# across a clean remount.  With evict=lru a workload writing 3x the store's
# capacity keeps succeeding and keeps the most recently used objects, open
# and pinned files; objects younger than evict_min_age go after older
# ones, and only when a write finds no room (ENOSPC only when every object
# left is open, pinned or being written);
# a tenant over its quota (user.offload.quota) is evicted first and never
# pushes out another tenant's objects (with evict=off: EDQUOT for its new
# files and its writes, truncates and fallocates past the quota);
# offloadctl evict frees on demand (and refuses --tenant . and ..);
# the metrics and offloadctl stats count it, per tenant too, and the
# per-tenant counts survive a remount and a kill -9 (never more than the
# evictions on record); the eviction worker evicts as soon as a commit
# crosses the high watermark, and a write that finds no room waits for its
# pass; a kill -9
# during eviction loses no file that was not evicted and leaks no page.
# evict=off gives ENOSPC as before.
set -u
. "$(dirname "$0")/lib.sh"

# 2 buckets of 4 MiB: 128 pages of 64 KiB, 32 objects of 256 KiB.
GEOM="bucket_count=2,bucket_size=4M"
OBJ=$((256 * 1024))
LRU="$GEOM,evict=lru,evict_min_age=0"

atime() { stat -c %X "$1"; }
# A new empty store (and KV store, on ubsio) for the next part.
fresh() {
	ofs_new_store
	if [ "$OFS_BACKEND" == ubsio ]; then
		rm -rf "$UBSIO_STUB_DIR" && mkdir -p "$UBSIO_STUB_DIR"
	fi
}
metric() { getfattr -n user.offload.metrics --only-values "$MNT" 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'; }

# ---- recency ----
ofs_mount "$GEOM,evict=lru" || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/r" $OBJ
cp "$REF/r" "$MNT/t/r"
touch -a -d '2020-01-01' "$MNT/t/r"
a0=$(atime "$MNT/t/r")
check_eq "utimens sets an old atime" "$(date -d 2020-01-01 +%s)" "$a0"
cat "$MNT/t/r" >/dev/null
# The use is recorded for eviction; a stat may show the kernel's cached
# atime until its attributes expire (cache_timeout): look after a remount.
ofs_remount || ofs_bail "cannot remount"
a1=$(atime "$MNT/t/r")
check "an open moves atime (older than mtime)" [ "$a1" -gt "$a0" ]
sleep 1.1
cat "$MNT/t/r" >/dev/null
ofs_remount || ofs_bail "cannot remount"
a2=$(atime "$MNT/t/r")
check "the last use survives a clean remount" [ "$a2" -gt "$(stat -c %Y "$MNT/t/r")" ]
check "and is the last open's" [ "$a2" -gt "$a1" ]
ofs_umount
fresh

# ---- 3x the capacity with eviction ----
ofs_mount "$LRU" || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/pin" $OBJ
cp "$REF/pin" "$MNT/t/pin"
check "pin a file" setfattr -n user.offload.pin -v 1 "$MNT/t/pin"
mkrand "$REF/open" $OBJ
cp "$REF/open" "$MNT/t/open"
holder_start "$MNT/t/open" r || ofs_bail "cannot hold a file open"
for h in 0 1 2; do
	mkrand "$REF/hot$h" $OBJ
	cp "$REF/hot$h" "$MNT/t/hot$h"
done
run python3 - "$MNT/t" $OBJ <<'PY'
import os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(96):
    with open("%s/k%d" % (d, i), "wb") as f:
        f.write(os.urandom(size))
    if i % 4 == 3:
        for h in range(3):  # used again: the most recent
            with open("%s/hot%d" % (d, h), "rb") as f:
                f.read()
print("wrote 96")
PY
check_eq "96 objects of 256 KiB (3x the capacity) written without an error" 0 "$RC"
[ "$RC" -eq 0 ] || note "$ERR"
for h in 0 1 2; do
	check_cmp "a recently used object is kept (hot$h)" "$REF/hot$h" "$MNT/t/hot$h"
done
check_cmp "a pinned object is kept" "$REF/pin" "$MNT/t/pin"
check "the last objects written are kept" test -s "$MNT/t/k95" -a -s "$MNT/t/k94"
check "the oldest objects were evicted" wait_until 5 test ! -e "$MNT/t/k0"
holder_read "$REF/open.read"
check_cmp "an open file is kept" "$REF/open" "$REF/open.read"
holder_close
check_cmp "and is there once closed" "$REF/open" "$MNT/t/open"
ev=$(( $(metric 'offloadfs_evictions_total{reason="watermark"}') + $(metric 'offloadfs_evictions_total{reason="put"}') ))
check "evictions are counted" [ "$ev" -ge 60 ]
check "evicted bytes are counted" [ "$(metric offloadfs_evicted_bytes_total)" -ge $((60 * OBJ)) ]
check_eq "the pinned object is counted" 1 "$(metric offloadfs_objects_pinned)"

# ---- offloadctl evict ----
n0=$(ls "$MNT/t" | wc -l)
check "offloadctl evict --bytes" "$OFSCTL" evict "$MNT" --tenant t --bytes $((4 * OBJ))
n1=$(ls "$MNT/t" | wc -l)
check_eq "it evicted 4 objects" $((n0 - 4)) "$n1"
check "counted as manual" [ "$(metric 'offloadfs_evictions_total{reason="manual"}')" -eq 4 ]
check_cmp "not the pinned one" "$REF/pin" "$MNT/t/pin"
for bad in . ..; do
	check_fails "offloadctl evict --tenant $bad is refused" "takes a tenant directory's name" \
		"$OFSCTL" evict "$MNT" --tenant "$bad" --bytes $((4 * OBJ))
done
check_eq "nothing evicted by them" $((n0 - 4)) "$(ls "$MNT/t" | wc -l)"
check_eq "nor any xattr set above the mount" "" "$(getfattr -d --absolute-names "$TESTDIR" 2>&1)"
ofs_umount
check_fsck_clean "after eviction"
fresh

# ---- a tenant over its quota is evicted first ----
ofs_mount "$LRU" || ofs_bail "cannot mount"
mkdir "$MNT/a" "$MNT/b"
for i in $(seq 0 7); do
	mkrand "$REF/b$i" $OBJ
	cp "$REF/b$i" "$MNT/b/k$i"
done
check "set a tenant's quota" setfattr -n user.offload.quota -v $((8 * OBJ)) "$MNT/a"
run python3 - "$MNT/a" $OBJ <<'PY'
import os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(64):
    with open("%s/k%d" % (d, i), "wb") as f:
        f.write(os.urandom(size))
PY
check_eq "a tenant writes 2x the capacity past its quota" 0 "$RC"
bad=0
for i in $(seq 0 7); do cmp -s "$REF/b$i" "$MNT/b/k$i" || bad=$((bad + 1)); done
check_eq "another tenant's older objects are all kept" 0 "$bad"
check "the tenant's last object is kept" test -s "$MNT/a/k63"
sleep 1.2 # a group-commit tick
check "the tenant is held to its quota" [ "$(metric 'offloadfs_tenant_used_bytes{tenant="a"}')" -le $((8 * OBJ)) ]
check_eq "its quota is shown" $((8 * OBJ)) "$(metric 'offloadfs_tenant_quota_bytes{tenant="a"}')"
check "quota evictions are counted" [ "$(metric 'offloadfs_evictions_total{reason="quota"}')" -ge 56 ]
EV=$(metric 'offloadfs_tenant_evictions_total{tenant="a"}')
check "the tenant's evictions are counted" [ "${EV:-0}" -ge 56 ]
check "and their bytes" [ "$(metric 'offloadfs_tenant_evicted_bytes_total{tenant="a"}')" -ge $((56 * OBJ)) ]
check_eq "none from the other tenant" 0 "$(metric 'offloadfs_tenant_evictions_total{tenant="b"}' | grep -v '^0$' | wc -l)"
STATS=$("$OFSCTL" stats "$MNT")
check "offloadctl stats shows the tenant's usage, quota and evictions" \
	grep -Eq "^    a +[0-9.]+ [KM]iB / 2\.0 MiB, $EV files \([0-9.]+ MiB\) evicted$" <<<"$STATS"
check "and the same in --json" python3 -c '
import json, sys
t = {x["tenant"]: x for x in json.load(sys.stdin)["tenants"]}
a = t["a"]
assert a["quota_bytes"] == int(sys.argv[1]) and 0 < a["used_bytes"] <= a["quota_bytes"], a
assert a["evictions"] == int(sys.argv[2]) and a["evicted_bytes"] >= 56 * int(sys.argv[3]), a
assert t.get("b", {}).get("evictions", 0) == 0, t' $((8 * OBJ)) "$EV" $OBJ < <("$OFSCTL" stats "$MNT" --json)
# The counts are written by the group-commit thread, after the evictions.
sleep 1.5 # a tick
ofs_kill9
ofs_mount "$GEOM,evict=off" || ofs_bail "cannot mount after kill -9"
EVK=$(metric 'offloadfs_tenant_evictions_total{tenant="a"}')
GONE=$((64 - $(ls "$MNT/a" | grep -c '^k')))
check "after kill -9 the tenant's evictions counted a tick before are kept" [ "${EVK:-0}" -ge "$EV" ]
check "and are never more than the evictions on record ($EVK <= $GONE)" [ "${EVK:-0}" -le "$GONE" ]
EVB=$(metric 'offloadfs_tenant_evicted_bytes_total{tenant="a"}')
check "and their bytes" [ "${EVB:-0}" -ge $((EVK * OBJ)) ]
ofs_remount || ofs_bail "cannot remount"
check_eq "the tenant's evictions survive a clean remount" "$EVK" \
	"$(metric 'offloadfs_tenant_evictions_total{tenant="a"}')"
check_eq "and their bytes" "$EVB" "$(metric 'offloadfs_tenant_evicted_bytes_total{tenant="a"}')"
check_eq "offloadctl stats shows them" 1 \
	"$("$OFSCTL" stats "$MNT" | grep -Ec "^    a .*, $EVK files \([0-9.]+ MiB\) evicted$")"
ofs_umount
check_fsck_clean "after quota evictions"
fresh

# ---- the eviction worker runs ahead of the writers ----
# A commit above the high watermark wakes the worker at once, not at its
# once-a-second tick; a write that finds no room waits for its pass.
ofs_mount "$LRU" || ofs_bail "cannot mount"
mkdir "$MNT/t"
run python3 - "$MNT" $OBJ <<'PY'
import os, sys, time
mnt, size = sys.argv[1], int(sys.argv[2])
def evictions():
    text = os.getxattr(mnt, "user.offload.metrics").decode()
    return sum(int(l.split()[1]) for l in text.splitlines()
               if l.startswith("offloadfs_evictions_total{"))
def used():
    st = os.statvfs(mnt)
    return 1 - st.f_bfree / st.f_blocks
delays, n = [], 0
for rep in range(6):
    t0 = time.monotonic()  # the last pass's barrier, which gives its pages back
    while used() > 0.85 and time.monotonic() - t0 < 3:
        time.sleep(0.005)
    e0 = evictions()
    while used() <= 0.9:
        with open("%s/t/k%d" % (mnt, n), "wb") as f:
            f.write(os.urandom(size))
        n += 1
    t0 = time.monotonic()
    while evictions() == e0 and time.monotonic() - t0 < 3:
        time.sleep(0.005)
    delays.append(time.monotonic() - t0)
print(" ".join("%.3f" % d for d in delays))
PY
note "from crossing the high watermark to the first eviction (s): $OUT"
check "the worker evicts as soon as a commit crosses the high watermark (6 times)" \
	python3 -c 'import sys; assert all(float(d) < 0.4 for d in sys.argv[1:])' $OUT
ofs_umount
fresh
# evict_high=100: only writes that find no room ask the worker for a pass.
ofs_mount "$LRU,evict_high=100" || ofs_bail "cannot mount"
mkdir "$MNT/t"
run python3 - "$MNT/t" $OBJ <<'PY'
import os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(96):
    with open("%s/k%d" % (d, i), "wb") as f:
        f.write(os.urandom(size))
PY
check_eq "writes that find no room succeed (3x the capacity)" 0 "$RC"
check "they waited for the worker's pass" [ "$(metric offloadfs_evict_waits_total)" -ge 1 ]
ev=$(( $(metric 'offloadfs_evictions_total{reason="watermark"}') + $(metric 'offloadfs_evictions_total{reason="put"}') ))
check "and evictions made the room" [ "$ev" -ge 60 ]
ofs_umount
check_fsck_clean "after the worker's evictions"
fresh

# ---- evict=off: a tenant over its quota gets EDQUOT ----
ofs_mount "$GEOM,evict=off" || ofs_bail "cannot mount"
mkdir "$MNT/a" "$MNT/b"
setfattr -n user.offload.quota -v $((4 * OBJ)) "$MNT/a"
sleep 1.2 # the tick that notes the quota
run python3 -c 'import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
try:
    for i in range(5):
        os.write(fd, os.urandom(int(sys.argv[2])))
    os.close(fd)
    print("written")
except OSError as e:
    print(errno.errorcode[e.errno])' "$MNT/a/big" $OBJ
check_eq "evict=off: a write past the tenant's quota gets EDQUOT" EDQUOT "$OUT"
rm -f "$MNT/a/big"
sleep 1.2 # the tick that recounts the tenant without it
# grow FILE SIZE truncate|fallocate|keep: what growing a new file gives.
grow() {
	run python3 -c 'import ctypes, errno, os, sys
path, size, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
try:
    if how == "truncate":
        os.ftruncate(fd, size)
    elif how == "fallocate":
        os.posix_fallocate(fd, 0, size)
    else:  # FALLOC_FL_KEEP_SIZE
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(size)):
            raise OSError(ctypes.get_errno(), "fallocate")
    print("grown")
except OSError as e:
    print(errno.errorcode[e.errno])
os.close(fd)' "$@"
}
grow "$MNT/a/tr" $((5 * OBJ)) truncate
check_eq "evict=off: ftruncate past the tenant's quota gets EDQUOT" EDQUOT "$OUT"
grow "$MNT/a/fa" $((5 * OBJ)) fallocate
check_eq "evict=off: fallocate past the tenant's quota gets EDQUOT" EDQUOT "$OUT"
if [ "$OFS_BACKEND" == pages ]; then
	grow "$MNT/a/fk" $((5 * OBJ)) keep
	check_eq "evict=off: fallocate KEEP_SIZE past the tenant's quota gets EDQUOT" EDQUOT "$OUT"
fi
grow "$MNT/a/tr" $((3 * OBJ)) truncate
check_eq "a truncate within the quota works" grown "$OUT"
grow "$MNT/a/fa" $((2 * OBJ)) fallocate
check_eq "and is charged: a fallocate past what is left gets EDQUOT" EDQUOT "$OUT"
rm -f "$MNT/a/tr" "$MNT/a/fa" "$MNT/a/fk"
sleep 1.2 # the tick that recounts the tenant without them
# A zeroed range that would grow the file past the quota: EDQUOT, and nothing zeroed.
head -c $OBJ /dev/urandom >"$MNT/a/z"
sum=$(getfattr -n user.offload.checksum --only-values "$MNT/a/z")
run python3 -c 'import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDWR)
# FALLOC_FL_ZERO_RANGE (0x10) without KEEP_SIZE: zeros over the bytes, and the size grows.
r = libc.fallocate(fd, 0x10, ctypes.c_long(0), ctypes.c_long(int(sys.argv[2])))
print("zeroed" if r == 0 else errno.errorcode[ctypes.get_errno()])
os.close(fd)' "$MNT/a/z" $((5 * OBJ))
check_eq "evict=off: a ZERO_RANGE growing past the quota gets EDQUOT" EDQUOT "$OUT"
check_eq "... and zeroes nothing (the commit at close keeps the bytes)" "$sum" \
	"$(getfattr -n user.offload.checksum --only-values "$MNT/a/z")"
rm -f "$MNT/a/z"
sleep 1.2
for i in 0 1 2 3; do head -c $OBJ /dev/urandom >"$MNT/a/k$i"; done
sleep 1.2 # the tick that finds it at its quota
run python3 -c 'import errno, sys
try:
    open(sys.argv[1], "wb").close()
    print("created")
except OSError as e:
    print(errno.errorcode[e.errno])' "$MNT/a/k4"
check_eq "evict=off: a new file in a tenant at its quota gets EDQUOT" EDQUOT "$OUT"
run python3 -c 'import errno, sys
try:
    open(sys.argv[1], "r+b").close()
    print("opened")
except OSError as e:
    print(errno.errorcode[e.errno])' "$MNT/a/k0"
check_eq "and so does an open for writing" EDQUOT "$OUT"
check "reading works" cat "$MNT/a/k0"
check "another tenant writes" cp "$REF/open" "$MNT/b/x"
check "a delete works" rm "$MNT/a/k3"
sleep 1.2
check "below its quota again, the tenant writes" cp "$REF/open" "$MNT/a/k4"
ofs_umount
fresh

# ---- evict_min_age orders eviction; under pressure it yields ----
# 4 buckets of 16 MiB and 1 MiB objects, all written well within
# evict_min_age: the writers that find no room get it from the young ones.
BIG="bucket_count=4,bucket_size=16M"
MIB=$((1024 * 1024))
ofs_mount "$BIG,evict=lru,evict_min_age=60" || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/ypin" $MIB
cp "$REF/ypin" "$MNT/t/ypin"
setfattr -n user.offload.pin -v 1 "$MNT/t/ypin"
mkrand "$REF/yopen" $MIB
cp "$REF/yopen" "$MNT/t/yopen"
holder_start "$MNT/t/yopen" r || ofs_bail "cannot hold a file open"
run python3 - "$MNT/t" $MIB <<'PY'
import errno, os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(192):
    try:
        with open("%s/y%d" % (d, i), "wb") as f:
            f.write(os.urandom(size))
    except OSError as e:
        print("error at", i, errno.errorcode.get(e.errno, e.errno))
        break
else:
    print("wrote 192")
PY
check_eq "192 objects of 1 MiB younger than evict_min_age (3x the capacity) written" \
	"wrote 192" "$OUT"
check "the last objects written are kept" test -s "$MNT/t/y191" -a -s "$MNT/t/y190"
check "the first ones were evicted" wait_until 5 test ! -e "$MNT/t/y0"
check_cmp "a pinned young object is kept" "$REF/ypin" "$MNT/t/ypin"
holder_read "$REF/yopen.read"
check_cmp "an open young object is kept" "$REF/yopen" "$REF/yopen.read"
holder_close
check "the writers' passes evicted them" [ "$(metric 'offloadfs_evictions_total{reason="put"}')" -ge 60 ]
ofs_umount
check_fsck_clean "after evicting young objects"
fresh
# Objects past evict_min_age go first, though a young one was used least
# recently (its atime set to 2020; its ctime is now).  evict_high=100: only
# the writers' passes, which free the band between the watermarks (7
# objects), all from the 8 old ones.
ofs_mount "$LRU,evict_min_age=3,evict_high=100" || ofs_bail "cannot mount"
mkdir "$MNT/t"
for i in $(seq 0 7); do head -c $OBJ /dev/urandom >"$MNT/t/o$i"; done
sleep 3.5
mkrand "$REF/young" $OBJ
cp "$REF/young" "$MNT/t/young"
touch -a -d 2020-01-01 "$MNT/t/young"
run python3 - "$MNT/t" $OBJ <<'PY'
import os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(26):  # 35 objects: 3 past the capacity
    with open("%s/n%d" % (d, i), "wb") as f:
        f.write(os.urandom(size))
PY
check_eq "written past the capacity" 0 "$RC"
check "an old object was evicted" wait_until 5 test ! -e "$MNT/t/o0"
check_cmp "before a young one used less recently" "$REF/young" "$MNT/t/young"
ofs_umount
fresh

# ---- ENOSPC when every object left is pinned ----
ofs_mount "$LRU,evict_min_age=60" || ofs_bail "cannot mount"
mkdir "$MNT/t"
run python3 - "$MNT/t" $OBJ <<'PY'
import errno, os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(96):
    try:
        with open("%s/p%d" % (d, i), "wb") as f:
            f.write(os.urandom(size))
        os.setxattr("%s/p%d" % (d, i), "user.offload.pin", b"1")
    except OSError as e:
        print("ENOSPC at", i if e.errno == errno.ENOSPC else e)
        break
PY
check_contains "every object pinned: ENOSPC" "ENOSPC at" "$OUT"
check "none of them evicted" test -s "$MNT/t/p0" -a -s "$MNT/t/p1"
check_eq "no eviction counted" 0 "$(metric 'offloadfs_evictions_total{reason="put"}')"
ofs_umount
fresh

# ---- evict=off: ENOSPC as before ----
ofs_mount "$GEOM,evict=off" || ofs_bail "cannot mount"
mkdir "$MNT/t"
run python3 - "$MNT/t" $OBJ <<'PY'
import errno, os, sys
d, size = sys.argv[1], int(sys.argv[2])
for i in range(96):
    try:
        with open("%s/o%d" % (d, i), "wb") as f:
            f.write(os.urandom(size))
    except OSError as e:
        print("ENOSPC at", i if e.errno == errno.ENOSPC else e)
        break
PY
check_contains "evict=off: ENOSPC when full" "ENOSPC at" "$OUT"
check "the first object is kept" test -s "$MNT/t/o0"
ofs_umount
fresh

# ---- kill -9 during eviction ----
ofs_mount "$GEOM,evict=off" || ofs_bail "cannot mount"
mkdir "$MNT/t"
for i in $(seq 0 23); do
	mkrand "$REF/c$i" $OBJ
	cp "$REF/c$i" "$MNT/t/c$i"
	[ $((i % 2)) -eq 0 ] && setfattr -n user.offload.pin -v 1 "$MNT/t/c$i"
done
ofs_umount
bad=0 gone=0
for round in 1 2 3; do
	ofs_mount "$LRU,evict_high=99,evict_low=5" || ofs_bail "cannot mount"
	setfattr -n user.offload.evict -v $((24 * OBJ)) "$MNT" 2>/dev/null &
	bg_track $!
	sleep 0.00$((RANDOM % 10))
	ofs_kill9
	ofs_mount "$GEOM,evict=off" || ofs_bail "cannot mount after kill -9"
	for i in $(seq 0 23); do
		if [ $((i % 2)) -eq 0 ] || [ -e "$MNT/t/c$i" ]; then
			cmp -s "$REF/c$i" "$MNT/t/c$i" || bad=$((bad + 1))
		else
			gone=$((gone + 1))
			cp "$REF/c$i" "$MNT/t/c$i" # for the next round
		fi
	done
	ofs_umount
done
check_eq "after kill -9 during eviction: every pinned file, and every unpinned one left, intact" 0 "$bad"
note "$gone of 3x12 unpinned files evicted before the kills"
ofs_mount "$GEOM,evict=off" || ofs_bail "cannot mount"
ofs_umount
check_fsck_clean "after kill -9 during eviction"

ofs_done
