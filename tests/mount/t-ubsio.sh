#!/usr/bin/env bash
# t-ubsio: what only the ubsio backend has, through the real dlopen path over
# the stand-in library (tests/ubsio): loading (missing library, missing
# symbol, failing Init, both Init signatures, the default search path),
# option checks, store keys, deletes of old values, restart without a key
# scan, fetch once per open, batched puts, failed puts and partial batches
# leaving no orphan, the crash journal, capacity limits and the writer
# memory bound.  The file semantics themselves run on this backend through
# t-io, t-namespace, t-persist, t-perms, t-stress and t-commitfail with
# OFS_BACKEND=ubsio (scripts/test).
. "$(dirname "$0")/lib.sh"

LIBDIR="$OFS_BUILD/tests"
LIB="$LIBDIR/libubsio_kvc.so"
KV="$TESTDIR/kv"
mkdir -p "$KV"
export UBSIO_STUB_DIR="$KV"
export UBSIO_STUB_LOG="$TESTDIR/ubsio.log"
BASE="bucket_count=4,bucket_size=64M,backend=ubsio"
U="$BASE,ubsio_lib=$LIB,ubsio_ssd_size=0"

hexkey() { printf %s "$1" | od -An -tx1 -v | tr -d ' \n'; }
# The store key of FILE, from its descriptor.
skey() { getfattr --absolute-names --only-values -n user.offload.descriptor "$1" 2>/dev/null |
	sed -n 's/^key=//p'; }
has_value() { [ -f "$KV/$(hexkey "$1")" ]; }
nvalues() { find "$KV" -type f ! -name '.tmp-*' | wc -l; }
nrecorded() { sqlite3 "$ROOT/offloadfs.db" 'SELECT count(*) FROM inodes WHERE skey IS NOT NULL'; }
log_since() { tail -n +"$(($1 + 1))" "$UBSIO_STUB_LOG"; }
# pywrite PATH TEXT: one open, write, close (bash's > closes a dup first, which
# commits the truncated file on its own); a close error goes to stderr.
pywrite() {
	python3 -c '
import sys
try:
    with open(sys.argv[1], "w") as f:
        f.write(sys.argv[2])
except OSError as e:
    sys.exit("%s: %s" % (sys.argv[1], e.strerror))
' "$1" "$2"
}
loglines() { wc -l <"$UBSIO_STUB_LOG" 2>/dev/null || echo 0; }
# put_together SIZE PATH...: one thread per file, each opened first, then
# written and closed together (a barrier): processes forked one by one can
# reach the daemon one by one on a slow machine, and never share a batch.
put_together() {
	python3 -c '
import os, sys, threading
size, paths = int(sys.argv[1]), sys.argv[2:]
go = threading.Barrier(len(paths), timeout=60)
failed = []
def put(path):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        failed.append("%s: %s" % (path, e))
        go.abort()
        return
    try:
        data = os.urandom(size)
        go.wait()
        os.write(fd, data)
        os.close(fd)
    except (OSError, threading.BrokenBarrierError) as e:
        failed.append("%s: %s" % (path, e))
threads = [threading.Thread(target=put, args=(p,)) for p in paths]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.exit("\n".join(failed) if failed else 0)
' "$@"
}

# ---- loading the library ----
run "$OFS" "$ROOT" "$MNT" -f -o "$BASE,ubsio_lib=$TESTDIR/nope.so"
check_eq "a missing library stops the mount" 1 "$RC"
check_contains "the message names the library and gives dlerror's text" \
	"cannot load the ubsio library $TESTDIR/nope.so: $TESTDIR/nope.so: cannot open shared object file" "$ERR"
run "$OFS" "$ROOT" "$MNT" -f -o "$BASE,ubsio_lib=$LIBDIR/libubsio_kvc_nodelete.so,ubsio_ssd_size=0"
check_eq "a library without UbsioKvCacheBatchDelete stops the mount" 1 "$RC"
check_contains "the message names the missing symbol" "lacks symbol UbsioKvCacheBatchDelete: " "$ERR"
UBSIO_STUB_FAIL_INIT=1 run "$OFS" "$ROOT" "$MNT" -f -o "$U"
check_eq "a failing Init stops the mount" 1 "$RC"
check_contains "the message gives Init's result (device -1: no Ascend device by default)" \
	"UbsioKvCacheInit(-1, ssd_size) failed with code 1" "$ERR"
# A device id needs Ascend's ACL library, which this machine lacks
# (ubsio-kv/src/csrc/kvc/dl_acl_api.cpp: dlopen under ASCEND_HOME_PATH).
run "$OFS" "$ROOT" "$MNT" -f -o "$U,ubsio_device=0"
check_eq "device 0 without Ascend's library: Init fails" 1 "$RC"
check_contains "and the message says why" "ubsio_device=-1 runs without one" "$ERR"
check_eq "refused mounts left no store behind" "" "$(ls "$ROOT")"
run "$OFS" "$ROOT" "$MNT" -f -o "bucket_count=4,backend=pages,kv_max_bytes=1M"
check_contains "a ubsio option without backend=ubsio is refused" "option kv_max_bytes needs backend=ubsio" "$ERR"
run "$OFS" "$ROOT" "$MNT" -f -o "backend=s3"
check_contains "an unknown backend is refused" "invalid backend 's3': pages or ubsio" "$ERR"
run "$OFS" "$ROOT" "$MNT" -f -o "$U,kv_buffer_max=1K"
check_contains "a writer memory bound below 1M is refused" "invalid kv_buffer_max 1024" "$ERR"

# The older Init(deviceId): ubsio_ssd_size absent; the capacity comes from the library.
UBSIO_STUB_ACL=1 UBSIO_STUB_SSD_SIZE=1000000 ofs_mount "$BASE,ubsio_lib=$LIBDIR/libubsio_kvc_oldinit.so,ubsio_device=3" ||
	ofs_bail "cannot mount with the old Init"
check_contains "old Init: called with the device id only" "Init 3 1000000 0" "$(cat "$UBSIO_STUB_LOG")"
mkdir "$MNT/t"
head -c 100000 /dev/urandom >"$REF/a"
cp "$REF/a" "$MNT/t/a"
check_cmp "old Init: a file round-trips" "$REF/a" "$MNT/t/a"
ofs_umount
check_eq "old Init: clean unmount" 0 "$OFS_RC"

# Without ubsio options: the library, Init and device the store was last mounted with.
: >"$UBSIO_STUB_LOG"
UBSIO_STUB_ACL=1 UBSIO_STUB_SSD_SIZE=1000000 ofs_mount "bucket_count=4,bucket_size=64M" ||
	ofs_bail "cannot mount with the recorded settings"
check_contains "no options: the recorded library" "libubsio_kvc_oldinit.so:" "$(head -1 "$LOG")"
check_eq "no options: the recorded Init (the older) and device" "Init 3 1000000 0" \
	"$(head -1 "$UBSIO_STUB_LOG")"
check_cmp "no options: the file is there" "$REF/a" "$MNT/t/a"
ofs_umount
check_eq "the store records how it was reached (device, Init, library)" "3|old|" \
	"$(sqlite3 "$ROOT/offloadfs.db" "SELECT group_concat(v, '|') FROM (SELECT v FROM store
		WHERE k IN ('ubsio_lib', 'ubsio_init', 'ubsio_device') ORDER BY k)" |
		sed "s|$LIBDIR/libubsio_kvc_oldinit.so||")"

# The default: libubsio_kvc.so through the search path (no library recorded);
# the store remembers its backend.
sqlite3 "$ROOT/offloadfs.db" "UPDATE store SET v = '' WHERE k = 'ubsio_lib'"
: >"$UBSIO_STUB_LOG"
LD_LIBRARY_PATH="$LIBDIR" ofs_mount "bucket_count=4,bucket_size=64M,backend=ubsio,ubsio_ssd_size=0,ubsio_device=-1" ||
	ofs_bail "cannot mount with the default library name"
check_contains "the default library is found through the search path" "libubsio_kvc.so:" "$(head -1 "$LOG")"
check_eq "restart: only Init reaches the store (no key scan); Exit at unmount" "Init -1 0 0" \
	"$(cat "$UBSIO_STUB_LOG")"
check_cmp "restart: the file is back" "$REF/a" "$MNT/t/a"
ofs_umount
check_eq "the library's Exit is called at unmount" Exit "$(tail -1 "$UBSIO_STUB_LOG")"
run "$OFS" "$ROOT" "$MNT" -f -o "bucket_count=4,backend=pages"
check_contains "a ubsio store refuses a pages mount" \
	"store uses backend 'ubsio', this mount asked for 'pages'" "$ERR"

# ---- keys, overwrite, unlink ----
ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount"
mkdir -p "$MNT/t2/x"
echo one >"$MNT/t/k"
echo two >"$MNT/t2/k"
k1=$(skey "$MNT/t/k")
k2=$(skey "$MNT/t2/k")
check_contains "the store key is <tenant>/<key>#<vid>" "t/k#" "$k1"
check "tenants' equal keys are different values" test -n "$k1" -a -n "$k2" -a "$k1" != "$k2"
check "the value is in the store under its key" has_value "$k1"
echo nested >"$MNT/t2/x/deep"
check_contains "a key with '/' keeps its path" "t2/x/deep#" "$(skey "$MNT/t2/x/deep")"
echo three >"$MNT/t/k"
k3=$(skey "$MNT/t/k")
check "an overwrite puts a new value" has_value "$k3"
ofs_sync
check "an overwrite deletes the old value once the record is durable" test ! -f "$KV/$(hexkey "$k1")"
check_eq "the overwritten file reads back" three "$(cat "$MNT/t/k")"
mv "$MNT/t/k" "$MNT/t/renamed"
check_eq "a rename keeps the value (and its key)" "$k3" "$(skey "$MNT/t/renamed")"
rm "$MNT/t/renamed"
ofs_sync
check "an unlink deletes the value" test ! -f "$KV/$(hexkey "$k3")"
: >"$MNT/t/empty"
check_eq "an empty file has no value" "" "$(skey "$MNT/t/empty")"

# An unlinked file's value stays while it is open; its last close deletes it.
echo held >"$MNT/t/open1"
kh=$(skey "$MNT/t/open1")
holder_start "$MNT/t/open1" r "" || ofs_bail "cannot hold a file"
rm "$MNT/t/open1"
ofs_sync
check "an unlinked file's value stays while it is open" has_value "$kh"
holder_close
ofs_sync
check "its last close deletes the value" test ! -f "$KV/$(hexkey "$kh")"

# ---- the journal line an unlink or rename syncs before it takes the metadata
# lock: harmless when the drop then does not happen ----
echo target >"$MNT/t2/y"
echo source >"$MNT/t/x"
ky=$(skey "$MNT/t2/y")
run python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/x" "$MNT/t2/y"
check_contains "a rename across tenants fails with EXDEV" "Invalid cross-device link" "$ERR"
check "a journal line names the target's key when the rename fails" \
	grep -qE "^[PD] [0-9]+ $(hexkey "$ky")\$" "$ROOT/ubsio.journal"
ofs_kill9
ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount after kill -9"
check_grep_log "the start after kill -9 swept the journal" "rebuilt after an unclean stop"
check "the target's value, journalled by the failed rename, is kept" has_value "$ky"
check_eq "and reads back" target "$(cat "$MNT/t2/y")"
# Unlinks racing overwrites and renames of the same names: every value a
# record names is there, and no other.
run python3 - "$MNT/t" <<'PYEOF'
import os, random, sys, threading
d = sys.argv[1]
def worker(seed):
    rng = random.Random(seed)
    for _ in range(300):
        a, b = "r%d" % rng.randrange(8), "r%d" % rng.randrange(8)
        op = rng.randrange(3)
        try:
            if op == 0:
                with open(os.path.join(d, a), "wb") as f:
                    f.write(os.urandom(rng.randrange(1, 20000)))
            elif op == 1:
                os.unlink(os.path.join(d, a))
            else:
                os.rename(os.path.join(d, a), os.path.join(d, b))
        except FileNotFoundError:
            pass
ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
PYEOF
check_eq "4 threads racing unlinks, overwrites and renames ran" 0 "$RC"
ofs_umount
check_eq "after the race: the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"
ofs_mount "$U,sync_interval=0" || ofs_bail "cannot remount"
run sh -c "cat '$MNT'/t/r* >/dev/null"
check_eq "after the race: every file reads (checksums match)" 0 "$RC"

# ---- reads: one fetch per open, served from it ----
head -c 3000000 /dev/urandom >"$REF/big"
cp "$REF/big" "$MNT/t/big"
ofs_umount
check_eq "the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"
ofs_mount "$U,sync_interval=0" || ofs_bail "cannot remount"
n0=$(loglines)
check_cmp "a 3 MB file reads back after a remount" "$REF/big" "$MNT/t/big"
check_eq "one fetch (BatchGet into our buffer) for a whole read of it" 1 \
	"$(log_since "$n0" | grep -c '^BatchGet 1 0 0$')"
check_eq "no copy through Get, and never BatchGetDirect (device buffers)" 0 \
	"$(log_since "$n0" | grep -cE '^(Get |BatchGetDirect)')"
check_eq "nothing of the library's to free (a current release fills our buffer)" 0 \
	"$(log_since "$n0" | grep -c '^BatchFree')"
ofs_umount
# An older release returns its own 4 MiB pool blocks: copied out, given back.
UBSIO_STUB_BATCHGET=pool ofs_mount "$U" || ofs_bail "cannot mount with pool blocks"
n0=$(loglines)
check_cmp "pool blocks (older releases): the 3 MB file reads back" "$REF/big" "$MNT/t/big"
check_eq "pool blocks: the block is given back with BatchFree" "BatchGet 1 0 0,BatchFree 1 0" \
	"$(log_since "$n0" | grep -E '^Batch(Get|Free) ' | paste -sd,)"
ofs_umount
# A value larger than the whole cache is still fetched once for a read of it all.
ofs_mount "$U,kv_cache=1M" || ofs_bail "cannot remount with a small cache"
n0=$(loglines)
check_cmp "a 3 MB file through a 1 MB cache" "$REF/big" "$MNT/t/big"
check_eq "still one fetch" 1 "$(log_since "$n0" | grep -c '^BatchGet ')"
ofs_umount
# A failed get is not remembered: the kernel's retry of the read fetches again.
UBSIO_STUB_FAIL_GET=1 ofs_mount "$U" || ofs_bail "cannot mount with a failing get"
n0=$(loglines)
check_cmp "after a failed get, the read is retried and succeeds" "$REF/big" "$MNT/t/big"
check_eq "a failed fetch, then a good one" "BatchGet 1 0 1,BatchGet 1 0 0" \
	"$(log_since "$n0" | grep '^BatchGet ' | paste -sd,)"
ofs_umount
# A value the store cannot give: EIO, never wrong bytes.
UBSIO_STUB_FAIL_KEYS=big ofs_mount "$U" || ofs_bail "cannot mount with a failing key"
check_fails "a value that cannot be fetched: the read is EIO" "Input/output error" cat "$MNT/t/big"
check_grep_log "the failed fetch is logged with its key" "fetching 't/big#"
ofs_umount

# ---- puts arriving together go out in one batch ----
ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount"
mkdir "$MNT/p"
n0=$(loglines)
check "48 writers open, write and close together" \
	put_together 40000 $(for i in $(seq 1 48); do echo "$MNT/p/f$i"; done)
check_eq "48 parallel writers: 48 values put" 48 "$(log_since "$n0" | awk '$1 == "BatchPut" {s += $2} END {print s + 0}')"
check "puts arriving together are grouped (some BatchPut carries several keys)" \
	test "$(log_since "$n0" | awk '$1 == "BatchPut" && $2 > 1' | wc -l)" -gt 0
note "batches: $(log_since "$n0" | awk '$1 == "BatchPut" {print $2}' | sort -n | uniq -c | tr '\n' ' ')"
ofs_umount

# ---- failed puts: the old value stays, nothing is orphaned ----
UBSIO_STUB_FAIL_KEYS=bad ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount with failing keys"
echo old >"$MNT/p/f1"
n0=$(loglines)
pids=()
for i in $(seq 1 16); do
	head -c 20000 /dev/urandom >"$MNT/p/bad$i" 2>/dev/null &
	pids+=($!)
	head -c 20000 /dev/urandom >"$MNT/p/good$i" &
	pids+=($!)
done
wait "${pids[@]}"
check_eq "writers of failing keys get an error at close: none committed" \
	"0" "$(for i in $(seq 1 16); do stat -c %s "$MNT/p/bad$i"; done | grep -vc '^0$')"
check_eq "the other keys of the same batches are committed" 16 \
	"$(for i in $(seq 1 16); do stat -c %s "$MNT/p/good$i"; done | grep -c '^20000$')"
check_fails "a failed put is EIO to the writer" "Input/output error" pywrite "$MNT/p/bad-again" x
ofs_sync
check "a delete was sent for every failed key (the library may have written part of it)" \
	test "$(log_since "$n0" | awk '$1 == "BatchDelete" {s += $2} END {print s + 0}')" -ge 17
ofs_umount
# The stand-in fails every call on those keys, deletes too: the journal keeps them.
check_eq "deletes that failed stay in the journal (their keys named by a line each)" 17 \
	"$(grep -E "^[PD] .*$(hexkey bad)" "$ROOT/ubsio.journal" | awk '{print $2}' | sort -u | wc -l)"
check_eq "after failing keys: the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"
ofs_mount "$U" || ofs_bail "cannot remount"
check_grep_log "the next start deletes them" "orphaned values deleted"
check_eq "and empties the journal" "" "$(grep -v '^V ' "$ROOT/ubsio.journal")"
ofs_umount

# A batch call the library fails as a whole (one key of it at fault, the
# call's results left unset): each key is tried again on its own, so the
# others of the batch still go in (ubsio-kv/src/csrc/kvc/ubsio_kvc.cpp:99-103).
UBSIO_STUB_FAIL_BATCH_KEYS=wb ofs_mount "$U,sync_interval=0" ||
	ofs_bail "cannot mount with failing batches"
mkdir -p "$MNT/wb"
n0=$(loglines)
check "48 writers of failing and good keys open, write and close together" \
	put_together 20000 $(for i in $(seq 1 24); do echo "$MNT/wb/wb$i" "$MNT/wb/ok$i"; done)
check "some batch calls failed as a whole" \
	test "$(log_since "$n0" | grep -cE '^Batch(Put|Delete) [0-9]+ 1$')" -gt 0
check_eq "every file of those batches is committed all the same" 48 \
	"$(find "$MNT/wb" -type f -size 20000c | wc -l)"
rm -f "$MNT"/wb/*
ofs_sync
ofs_umount
check_eq "and every value deleted: the store holds exactly the recorded values" \
	"$(nrecorded)" "$(nvalues)"

UBSIO_STUB_FAIL_PUT=2 ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount with a failing put"
pywrite "$MNT/p/f2" first
check_fails "the 2nd put fails: the overwrite returns EIO" "Input/output error" \
	pywrite "$MNT/p/f2" second
check_eq "a failed put leaves the previous value" first "$(cat "$MNT/p/f2")"
ofs_umount
ofs_mount "$U" || ofs_bail "cannot remount"
check_eq "and the previous record, after a remount" first "$(cat "$MNT/p/f2")"
ofs_umount
check_eq "after a failed put: the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"

# A failing delete keeps the value doomed and retries it: nothing is left.
UBSIO_STUB_FAIL_DELETE=1 ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount with a failing delete"
pywrite "$MNT/p/del1" one
pywrite "$MNT/p/del2" two
rm "$MNT/p/del1" "$MNT/p/del2"
ofs_sync
check_grep_log "a failed delete is logged" "kept in the journal, retried at the next sync"
ofs_sync
ofs_umount
check_eq "after a failed delete and its retry: the store holds exactly the recorded values" \
	"$(nrecorded)" "$(nvalues)"

# ---- the journal: a put whose commit never happened is deleted at start ----
ghost="t/ghost#999999"
printf 'orphan' >"$KV/$(hexkey "$ghost")"
printf 'P 999999 %s\n' "$(hexkey "$ghost")" >>"$ROOT/ubsio.journal"
ofs_mount "$U" || ofs_bail "cannot mount with a journal"
check_grep_log "start: the journalled orphan is deleted" "1 orphaned values deleted (1 journalled"
check "its value is gone from the store" test ! -f "$KV/$(hexkey "$ghost")"
check_eq "the journal is emptied (but for the vid mark)" "" "$(grep -v '^V ' "$ROOT/ubsio.journal")"
# A kill -9 while writers hold files open, some unlinked: no orphan either.
for i in 1 2 3; do echo "v$i" >"$MNT/p/k$i"; done
head -c 70000 /dev/urandom >"$REF/held"
holder_start "$MNT/p/k1" w "$REF/held" || ofs_bail "cannot hold a file"
rm "$MNT/p/k2"
check "kill -9 with a writer open" ofs_kill9
holder_kill
ofs_mount "$U" || ofs_bail "cannot mount after kill -9"
check_grep_log "after kill -9: rebuilt" "rebuilt after an unclean stop"
ofs_umount
check_eq "after kill -9: the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"

# ---- capacity limits ----
# Limits a little above what the store holds: 5 more keys, about 2 MiB more.
keys=$(nrecorded)
bytes=$(sqlite3 "$ROOT/offloadfs.db" "SELECT coalesce(sum(size), 0) FROM inodes WHERE skey IS NOT NULL")
maxk=$((keys + 5)) maxp=$((bytes / 65536 + 33))
ofs_mount "$U,kv_max_keys=$maxk,kv_max_bytes=$((maxp * 65536)),sync_interval=0" ||
	ofs_bail "cannot mount with limits"
check_eq "statfs: files is kv_max_keys" "$maxk" "$(stat -f -c %c "$MNT")"
check_eq "statfs: free files is what the limit leaves" 5 "$(stat -f -c %d "$MNT")"
check_eq "statfs: blocks is kv_max_bytes in pages" "$maxp" "$(stat -f -c %b "$MNT")"
check_eq "statfs: free blocks is what the values' bytes leave" $(((maxp * 65536 - bytes) / 65536)) \
	"$(stat -f -c %f "$MNT")"
run "$OFSCTL" stats "$MNT"
check_contains "offloadctl stats: the capacity is kv_max_bytes" "($maxp pages of 64 KiB)" "$OUT"
check_contains "offloadctl stats: the backend's calls" "backend    ubsio: " "$OUT"
for i in 1 2 3 4 5; do pywrite "$MNT/p/cap$i" "$i" || break; done
check_eq "five more keys fit" 5 "$(ls "$MNT/p" | grep -c '^cap')"
check_fails "one key past kv_max_keys: ENOSPC" "No space left on device" \
	pywrite "$MNT/p/one-too-many" x
rm -f "$MNT"/p/cap*
ofs_sync
check_fails "a file past kv_max_bytes: ENOSPC" "No space left on device" \
	dd if=/dev/zero of="$MNT/p/huge" bs=1M count=3 status=none
check "after deletes, room again" pywrite "$MNT/p/fits" x
ofs_umount
ofs_mount "$U,kv_buffer_max=1M" || ofs_bail "cannot mount with a small buffer"
check_fails "a file larger than kv_buffer_max: EFBIG, not an OOM" "File too large" \
	dd if=/dev/zero of="$MNT/p/toolarge" bs=256K count=5 status=none
check_eq "the daemon is still serving" v3 "$(cat "$MNT/p/k3")"
ofs_umount
check_eq "after the limits: the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"

# ---- scrub: values re-read from the KV store, as another client would ----
ofs_mount "$U" || ofs_bail "cannot mount for scrub"
mkdir -p "$MNT/s"
for i in 1 2 3; do head -c $((i * 50000)) /dev/urandom >"$REF/scrub$i"; cp "$REF/scrub$i" "$MNT/s/v$i"; done
SCRUB=("$OFSCTL" scrub "$MNT" --ubsio-lib "$LIB" --ubsio-ssd-size 0)
run "${SCRUB[@]}"
check_eq "scrub of a healthy mounted store: clean" 0 "$RC"
check_contains "scrub checked every file" "$MNT: $(find "$MNT" -type f | wc -l) files" "$OUT"
v1=$(skey "$MNT/s/v1") v2=$(skey "$MNT/s/v2")
printf '\xff' | dd of="$KV/$(hexkey "$v1")" bs=1 seek=100 conv=notrunc status=none
rm -f "$KV/$(hexkey "$v2")"
run "${SCRUB[@]}"
check_eq "scrub after damage in the KV store: exit 1" 1 "$RC"
check_contains "a changed value is a checksum mismatch" "s/v1: checksum mismatch (value '$v1'" "$OUT"
check_contains "a lost value is a cache miss: named, and its file dropped" \
	"s/v2: value '$v2' missing from the KV store (evicted): file dropped" "$OUT"
check "the dropped file is gone" test ! -e "$MNT/s/v2"
check_contains "the metrics say how the daemon reached the library" \
	"offloadfs_ubsio_info{lib=\"$LIB\",init=\"0\",device=\"-1\"} 1" \
	"$(getfattr --absolute-names --only-values -n user.offload.metrics "$MNT")"
run env -u LD_LIBRARY_PATH "$OFSCTL" scrub "$MNT"
check_eq "scrub without options: the daemon's library and Init, the same findings" 1 "$RC"
check_contains "scrub without options finds the changed value" "s/v1: checksum mismatch" "$OUT"
# Reads (zero copy from the library's buffer) are checked too: EIO, never the changed bytes.
ofs_umount
ofs_mount "$U" || ofs_bail "cannot remount after the damage"
check_fails "a read of a value changed in the KV store is EIO" "Input/output error" cat "$MNT/s/v1"
check_grep_log "the mismatch is logged with its key" "checksum mismatch: inode"
check_cmp "an intact value reads back" "$REF/scrub3" "$MNT/s/v3"
rm -f "$MNT/s/v1" "$MNT/s/v2"
ofs_umount
check_eq "the daemon exits cleanly" 0 "$OFS_RC"

# ---- values the library lost: a cache miss, the file goes ----
# The library evicts by itself and never says so (boostio's write-back
# cache, ubsio-kv/src/csrc/kvc/dl_biosdk_api.cpp); a missing key's Get is 7.
ofs_mount "$U" || ofs_bail "cannot mount for lost values"
mkdir -p "$MNT/lost"
head -c 100000 /dev/urandom >"$REF/lost1"
cp "$REF/lost1" "$MNT/lost/a"
cp "$REF/lost1" "$MNT/lost/b"
ofs_umount
ofs_mount "$U" || ofs_bail "cannot remount for lost values"
ka=$(skey "$MNT/lost/a") # the kernel knows the name before the loss
rm -f "$KV/$(hexkey "$ka")"
check_fails "opening a file whose value was evicted: ENOENT" "No such file or directory" \
	cat "$MNT/lost/a"
check_grep_log "one line names it, with its tenant" "'lost/a' (inode"
check_eq "the file is gone from the listing" b "$(ls "$MNT/lost")"
check_contains "the metric counts it" 'offloadfs_objects_lost_total{reason="missing"} 1' \
	"$(getfattr --absolute-names --only-values -n user.offload.metrics "$MNT")"
check_cmp "the other file reads back" "$REF/lost1" "$MNT/lost/b"
check "the name can be written again" cp "$REF/lost1" "$MNT/lost/a"
check_cmp "and read" "$REF/lost1" "$MNT/lost/a"
ofs_umount
check_eq "after a lost value: the store holds exactly the recorded values" "$(nrecorded)" "$(nvalues)"
# In-process write-back (current releases in standalone mode): a kill -9
# loses the newest values; the next mount probes every value (BatchExist)
# and drops the files whose value is gone, instead of failing their reads.
UBSIO_STUB_FLUSH_MS=60000 ofs_mount "$U,sync_interval=0" || ofs_bail "cannot mount write-back"
for i in 1 2 3; do cp "$REF/lost1" "$MNT/lost/wb$i"; done
ofs_sync # the records are durable; the values are not
ofs_kill9
: >"$UBSIO_STUB_LOG"
ofs_mount "$U" || ofs_bail "cannot mount after losing the write-back cache"
check_grep_log "the mount drops the files whose values the kill lost" \
	"dropped 3 files whose value the backend no longer had"
check_contains "probed with BatchExist" "BatchExist " "$(cat "$UBSIO_STUB_LOG")"
check_eq "they are gone; the older files stay" "a b" "$(ls "$MNT/lost" | paste -sd' ')"
check_cmp "an older file reads back" "$REF/lost1" "$MNT/lost/b"
ofs_umount
check_eq "after the lost cache: the store holds exactly the recorded values" \
	"$(nrecorded)" "$(nvalues)"

# ---- paths longer than the library's 255-byte keys ----
ofs_mount "$U" || ofs_bail "cannot mount for long paths"
long="$MNT/lp/$(printf 'd%.0s' $(seq 1 120))/$(printf 'f%.0s' $(seq 1 175))"
mkdir -p "$(dirname "$long")"
head -c 70000 /dev/urandom >"$REF/long"
check "a file at a 300-byte path is written" cp "$REF/long" "$long"
check_cmp "and reads back" "$REF/long" "$long"
kl=$(skey "$long")
check "its key is at most 255 bytes (shortened with a hash)" test "${#kl}" -le 255 -a "${#kl}" -gt 0
ofs_umount
ofs_mount "$U" || ofs_bail "cannot remount for long paths"
check_cmp "after a remount it reads back" "$REF/long" "$long"
rm "$long"
ofs_umount
check "its value is deleted" test ! -f "$KV/$(hexkey "$kl")"

# ---- two stores (two ROOTs, say two nodes) sharing one KV store ----
# Each store's vids start at 1; the store id in the keys keeps the same
# tenant and key in the two stores from being one value.
ROOT1="$TESTDIR/root1" ROOT2="$TESTDIR/root2"
mkdir -p "$ROOT1" "$ROOT2"
ROOT=$ROOT1
ofs_mount "$U" || ofs_bail "cannot mount store 1"
mkdir -p "$MNT/shared"
echo "store one" >"$MNT/shared/k"
ka=$(skey "$MNT/shared/k")
check "a key is <tenant>/<key>#<vid>.<store id>" \
	grep -qE '^shared/k#[0-9]+\.[0-9a-f]{16}$' <<<"$ka"
ofs_umount
ROOT=$ROOT2
ofs_mount "$U" || ofs_bail "cannot mount store 2"
mkdir -p "$MNT/shared"
echo "store two" >"$MNT/shared/k"
kb=$(skey "$MNT/shared/k")
check "the same tenant and key in another store is another value" test "$ka" != "$kb"
rm "$MNT/shared/k"
ofs_umount
check "store 2's unlink deleted its own value" test ! -f "$KV/$(hexkey "$kb")"
ROOT=$ROOT1
ofs_mount "$U" || ofs_bail "cannot remount store 1"
check_eq "store 1's file is intact" "store one" "$(cat "$MNT/shared/k")"
echo again >"$MNT/shared/k2"
check_eq "store 1 keeps its id across mounts" "${ka##*.}" "$(skey "$MNT/shared/k2" | sed 's/.*\.//')"
ofs_umount

ofs_done
