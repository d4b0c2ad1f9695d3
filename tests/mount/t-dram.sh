#!/usr/bin/env bash
# t-dram.sh: the DRAM tier and its persisted promotion tasks.  Promotion by
# policy and by request, reads served from DRAM while the bucket file is
# made useless underneath, tasks surviving kill -9 and clean unmount
# (warm-up), a deleted or overwritten object's task dropped, LRU eviction;
# offloadctl promote refuses a file that is not on the mount.
set -u
. "$(dirname "$0")/lib.sh"

DB="$ROOT/offloadfs.db"
GEOM="bucket_count=2,bucket_size=256M"

metric() { # metric NAME: its value from the live metrics of the mount
	getfattr --only-values -n user.offload.metrics "$MNT" 2>/dev/null |
		awk -v n="$1" '$1 == n {print $2}'
}
task_states() { # with the store unmounted: "queued running done failed dropped"
	sqlite3 "$DB" "SELECT (SELECT count(*) FROM tasks WHERE state=0), (SELECT count(*) FROM tasks WHERE state=1), (SELECT count(*) FROM tasks WHERE state=2), (SELECT count(*) FROM tasks WHERE state=3), (SELECT count(*) FROM tasks WHERE state=4)" | tr '|' ' '
}
# spoil FILE: zero the object's bytes in its bucket file (the backend "unavailable")
spoil() {
	local d f o s
	d=$(getfattr --only-values -n user.offload.descriptor "$1" 2>/dev/null)
	f=$(echo "$d" | sed -n 's/^file_path=//p')
	o=$(echo "$d" | sed -n 's/^offset=//p')
	s=$(echo "$d" | sed -n 's/^object_size=//p')
	dd if=/dev/zero of="$f" bs=4096 seek="$o" count="$s" oflag=seek_bytes iflag=count_bytes \
		conv=notrunc status=none
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
wait_metric() { # wait_metric NAME VALUE
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" == "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# ---- policy: the 2nd open for reading within the window promotes ----
ofs_mount "$GEOM,dram=4M,promote_after=2" || ofs_bail "cannot mount"
mkdir "$MNT/t"
mkrand "$REF/a" 300000
cp "$REF/a" "$MNT/t/a"
cat "$MNT/t/a" >/dev/null
check_eq "one open: nothing queued" 0 "$(metric offloadfs_promotions_queued_total)"
cat "$MNT/t/a" >/dev/null
if wait_metric offloadfs_promotions_done_total 1; then ok "second open: promoted"; else
	not_ok "second open: promoted" "done=$(metric offloadfs_promotions_done_total)"; fi
check_eq "the DRAM tier holds the object" 300000 "$(metric offloadfs_dram_bytes)"
spoil "$MNT/t/a"
drop_caches
hits=$(metric offloadfs_dram_hits_total)
check_cmp "with its pages zeroed on disk, the object still reads right (from DRAM)" \
	"$REF/a" "$MNT/t/a"
check_eq "the read was a DRAM hit" yes "$([ "$(metric offloadfs_dram_hits_total)" -gt "$hits" ] && echo yes || echo no)"
# Overwriting drops the DRAM copy: the new content is read, never the old.
mkrand "$REF/a2" 1000
cp "$REF/a2" "$MNT/t/a"
drop_caches
check_cmp "after an overwrite the new content is read" "$REF/a2" "$MNT/t/a"

# ---- on request: setfattr and offloadctl promote ----
mkrand "$REF/b" 200000
mkrand "$REF/c" 100000
cp "$REF/b" "$MNT/t/b"
cp "$REF/c" "$MNT/t/c"
check "setfattr -n user.offload.promote -v 1" setfattr -n user.offload.promote -v 1 "$MNT/t/b"
run "$OFSCTL" promote "$MNT" "$MNT/t/c"
check_eq "offloadctl promote exits 0" 0 "$RC"
check_contains "offloadctl promote says queued" "queued $MNT/t/c" "$OUT"
check_fails "a bad promote value is refused" "Invalid argument" \
	setfattr -n user.offload.promote -v 2 "$MNT/t/c"
mkrand "$REF/outside" 4096
check_fails "offloadctl promote of a file not on the mount is refused" "not a file of the mount" \
	"$OFSCTL" promote "$MNT" "$REF/outside"
check_eq "and sets nothing on it" "" "$(getfattr -d --absolute-names "$REF/outside" 2>&1)"
wait_metric offloadfs_dram_bytes $((1000 + 200000 + 100000)) || true
spoil "$MNT/t/b"
spoil "$MNT/t/c"
drop_caches
check_cmp "requested b reads from DRAM" "$REF/b" "$MNT/t/b"
check_cmp "requested c reads from DRAM" "$REF/c" "$MNT/t/c"

# ---- clean unmount: what was in DRAM is queued again and warms the next mount ----
rm "$MNT/t/b" "$MNT/t/c" # spoiled on disk above; unlinking drops their DRAM copies
mkrand "$REF/d" 250000
mkrand "$REF/e" 50000
cp "$REF/d" "$MNT/t/d"
cp "$REF/e" "$MNT/t/e"
setfattr -n user.offload.promote -v 1 "$MNT/t/d"
setfattr -n user.offload.promote -v 1 "$MNT/t/e"
wait_metric offloadfs_dram_bytes 300000
ofs_umount
read -r q r d f x <<<"$(task_states)"
check_eq "after a clean unmount: the two resident objects are queued as warm-up" 2 "$q"
check_eq "warm-up tasks are marked as such" 2 \
	"$(sqlite3 "$DB" "SELECT count(*) FROM tasks WHERE state = 0 AND reason = 'warmup'")"
ofs_mount "$GEOM,dram=4M" || ofs_bail "cannot remount"
if wait_metric offloadfs_promotions_done_total 2; then ok "the next mount warms itself up"; else
	not_ok "the next mount warms itself up" "done=$(metric offloadfs_promotions_done_total)"; fi
check_eq "warmed up without a single read" 300000 "$(metric offloadfs_dram_bytes)"
spoil "$MNT/t/d"
drop_caches
check_cmp "the warmed-up object is served from DRAM" "$REF/d" "$MNT/t/d"
ofs_umount
rm -rf "$ROOT"/* "$MNT"/* 2>/dev/null

# ---- tasks survive kill -9 ----
ofs_mount "$GEOM,dram=200M" || ofs_bail "cannot mount"
mkdir "$MNT/t"
for i in $(seq 1 60); do head -c 1048576 /dev/urandom >"$MNT/t/k$i"; done
for i in $(seq 1 60); do setfattr -n user.offload.promote -v 1 "$MNT/t/k$i"; done
ofs_kill9
read -r q r d f x <<<"$(task_states)"
note "at the kill: queued $q running $r done $d"
check_eq "every promotion asked for is in the store after kill -9" 60 $((q + r + d))
if [ $((q + r)) -eq 0 ]; then
	# The worker won the race: put 20 back in the state a kill leaves them
	# in (queued and running), so the restart path is tested every time.
	note "the worker finished all 60 before the kill: 20 marked unfinished again"
	sqlite3 "$DB" "UPDATE tasks SET state = CASE WHEN rowid % 2 = 0 THEN 0 ELSE 1 END
		WHERE rowid IN (SELECT rowid FROM tasks ORDER BY rowid LIMIT 20)"
	read -r q r d f x <<<"$(task_states)"
fi
check_eq "tasks unfinished at the kill" yes "$([ $((q + r)) -gt 0 ] && echo yes || echo no)"
ofs_mount "$GEOM,dram=200M" || ofs_bail "cannot remount after kill"
sleep 0.5
for ((i = 0; i < 100; i++)); do
	[ "$(metric offloadfs_promotions_done_total)" -ge $((q + r)) ] 2>/dev/null && break
	sleep 0.1
done
ofs_umount
sqlite3 "$DB" "DELETE FROM tasks WHERE reason = 'warmup'"
read -r q r d f x <<<"$(task_states)"
check_eq "after remount every task ran: none queued or running" "0 0" "$q $r"
check_eq "and all 60 are done" 60 "$d"

# ---- a deleted or overwritten object's task is dropped, not run on stale pages ----
ofs_mount "$GEOM,dram=200M" || ofs_bail "cannot mount"
mkrand "$REF/s" 70000
cp "$REF/s" "$MNT/t/stale"
ofs_umount
ino=$(sqlite3 "$DB" "SELECT ino FROM inodes WHERE name = CAST('stale' AS BLOB)")
# A task recorded for an older version (another checksum), and one for a deleted inode.
sqlite3 "$DB" "INSERT INTO tasks (ino, key, reason, size, bucket, page, csum, state, created)
	SELECT ino, 't/stale', 'request', size, bucket, page, csum + 1, 0, 0 FROM inodes WHERE ino = $ino;
	INSERT INTO tasks (ino, key, reason, size, bucket, page, csum, state, created)
	VALUES (999999, 't/gone', 'request', 4096, 0, 0, 1, 0, 0)"
ofs_mount "$GEOM,dram=200M" || ofs_bail "cannot remount"
wait_metric offloadfs_promotions_dropped_total 2
check_eq "both stale tasks dropped" 2 "$(metric offloadfs_promotions_dropped_total)"
check_eq "nothing was promoted from stale pages" 0 "$(metric offloadfs_promotions_done_total | sed 's/^$/0/')"
ofs_umount
check_eq "the dropped tasks say why" \
	"t/gone|deleted before the promotion ran;t/stale|overwritten before the promotion ran" \
	"$(sqlite3 "$DB" "SELECT key || '|' || error FROM tasks WHERE state = 4 ORDER BY key" | paste -sd ';')"
rm -rf "$ROOT"/* 2>/dev/null

# ---- LRU eviction at capacity: dram=1M holds two 400 KB objects ----
ofs_mount "$GEOM,dram=1M" || ofs_bail "cannot mount"
mkdir "$MNT/t"
for n in x y z; do mkrand "$REF/$n" 400000; cp "$REF/$n" "$MNT/t/$n"; done
setfattr -n user.offload.promote -v 1 "$MNT/t/x"
wait_metric offloadfs_promotions_done_total 1
setfattr -n user.offload.promote -v 1 "$MNT/t/y"
wait_metric offloadfs_promotions_done_total 2
# Touch x (a DRAM hit), so y is the least recently used when z arrives.
drop_caches
cat "$MNT/t/x" >/dev/null
setfattr -n user.offload.promote -v 1 "$MNT/t/z"
wait_metric offloadfs_promotions_done_total 3
check_eq "one eviction" 1 "$(metric offloadfs_dram_evictions_total)"
check_eq "two objects resident" 800000 "$(metric offloadfs_dram_bytes)"
for n in x y z; do spoil "$MNT/t/$n"; done
drop_caches
check_cmp "x (recently read) is still in DRAM" "$REF/x" "$MNT/t/x"
check_cmp "z (newest) is in DRAM" "$REF/z" "$MNT/t/z"
check_fails "y (least recently used) was evicted: its spoiled pages fail verification" \
	"Input/output error" cat "$MNT/t/y"
mkrand "$REF/big" 2000000
cp "$REF/big" "$MNT/t/big"
setfattr -n user.offload.promote -v 1 "$MNT/t/big"
wait_metric offloadfs_promotions_failed_total 1
check_eq "an object larger than the tier fails to promote" 1 "$(metric offloadfs_promotions_failed_total)"
ofs_umount
check_contains "the failure is recorded with its reason" "larger than the DRAM tier" \
	"$(sqlite3 "$DB" "SELECT error FROM tasks WHERE state = 3")"

# ---- no DRAM tier: a request is refused clearly ----
ofs_mount "$GEOM" || ofs_bail "cannot mount"
run "$OFSCTL" promote "$MNT" "$MNT/t/x"
check_eq "promote without a DRAM tier exits 1" 1 "$RC"
check_contains "and says why" "no DRAM tier" "$ERR"
ofs_umount
run "$OFS" "$ROOT" "$MNT" -f -o promote_after=2
check_contains "promote_after without dram is refused" "promote_after needs a DRAM tier" "$ERR"

ofs_done
