#!/usr/bin/env bash
# t-badinput.sh: an operator's mistakes get a clear error and lose nothing:
# a relative meta= with a daemon that went to the background; a damaged
# page of the database (fsck says so, and never writes to it; the
# daemon's log says so when a request meets it); a second
# store mounted over a mounted one; a tenant quota that is not a size; a
# bucket file of another store (past this one's bucket_count); a mount the
# kernel refuses is not called an unmount; a database the user may not
# open says why; offloadctl fsck given the mount point, or --meta without
# a path; a geometry from the environment that the store does not have;
# a database and a ROOT of two different stores (meta= naming another
# store's database, a database copied over, a ROOT whose id was lost):
# mount and fsck refuse them and write nothing, and a store made without
# an id gets one at its next mount.
set -u
. "$(dirname "$0")/lib.sh"

# ofs_find_daemon ROOT: the pid of the background daemon serving ROOT (by its
# unique ROOT argument), added to those the cleanup waits for.
ofs_find_daemon() {
	local p dpid=""
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" == "$(realpath "$OFS")" ] || continue
		tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF "$1" && dpid=${p#/proc/}
	done
	[ -n "$dpid" ] && OFS_PIDS+=("$dpid")
	echo "$dpid"
}

# ---- meta=RELATIVE, the daemon in the background (its working directory /) ----
# The metadata's disk is watched from the daemon, every tick: a relative
# path must still name it once the daemon runs in /, or a full disk never
# gets the reserve back.
if [ "$OFS_BACKEND" != pages ]; then
	skip "meta=RELATIVE with a background daemon" "pages backend only"
else
	FS="$TESTDIR/fs"
	mkdir -p "$FS"
	ofs_track_mnt "$MNT"
	if mount -t tmpfs -o size=64M tmpfs "$FS" && ofs_track_mnt "$FS"; then
		mkdir "$FS/r"
		run sh -c "cd '$FS' && '$OFS' '$FS/r' '$MNT' -o bucket_count=1,bucket_size=4M,meta=m.db"
		check_eq "meta=m.db: the background daemon starts" 0 "$RC"
		if wait_until 10 mountpoint -q "$MNT"; then
			dpid=$(ofs_find_daemon "$FS/r")
			mkdir "$MNT/t" && echo kept >"$MNT/t/f"
			check "meta=m.db: the reserve is held next to the database" \
				test "$(stat -c %b "$FS/m.db-reserve")" -gt 0
			head -c 100M /dev/zero >"$FS/fill" 2>/dev/null
			wait_until 5 test "$(stat -c %b "$FS/m.db-reserve")" -eq 0
			check_eq "meta=m.db: a full disk gets the reserve back from the background daemon" \
				0 "$(stat -c %b "$FS/m.db-reserve")"
			check "meta=m.db: a delete works on the full disk" rm "$MNT/t/f"
			rm -f "$FS/fill"
			fusermount3 -u "$MNT"
			[ -n "$dpid" ] && wait_until 10 sh -c "! kill -0 $dpid 2>/dev/null"
			run "$OFSCTL" fsck "$FS/r" --meta "$FS/m.db"
			check_eq "meta=m.db: fsck after the unmount exits 0" 0 "$RC"
		else
			not_ok "meta=m.db: mounted" "$ERR"
		fi
		umount "$FS"
	else
		not_ok "tmpfs for meta=m.db" "mount failed"
	fi
fi

# ---- a sqlite3 shell on the database of a live mount ----
# sqlite's lock on the database is a POSIX lock, which a fork does not
# carry and any close of the file drops: without it, a second process
# that opens the database takes it, checkpoints and deletes the log the
# daemon goes on writing into, and whatever was committed since is lost
# at the daemon's next crash.  Both ways of running are checked: in the
# foreground, and detached (the default).
for mode in foreground background; do
	ROOT="$TESTDIR/shell-$mode"
	mkdir -p "$ROOT"
	dpid=""
	if [ $mode == foreground ]; then
		ofs_mount "bucket_count=2,bucket_size=4M" || ofs_bail "cannot mount $ROOT"
		dpid=$OFS_PID
	else
		ofs_track_mnt "$MNT"
		run "$OFS" "$ROOT" "$MNT" -o bucket_count=2,bucket_size=4M,evict=off
		wait_until 10 mountpoint -q "$MNT" || ofs_bail "the background daemon did not mount: $ERR"
		dpid=$(ofs_find_daemon "$ROOT")
	fi
	mkdir "$MNT/t"
	echo before >"$MNT/t/a" && sync "$MNT/t/a"
	run sqlite3 "$ROOT/offloadfs.db" "SELECT count(*) FROM inodes"
	check_contains "$mode: a sqlite3 shell on the live database is told it is locked" \
		"database is locked" "$ERR"
	echo after >"$MNT/t/b" && sync "$MNT/t/b"
	if [ $mode == foreground ]; then
		ofs_kill9
	else
		kill -9 "$dpid"
		wait_until 10 sh -c "! kill -0 $dpid 2>/dev/null"
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	ofs_mount "bucket_count=2,bucket_size=4M" || ofs_bail "cannot remount $ROOT"
	check_eq "$mode: after the shell and a kill -9, the fsynced files are there" "before after" \
		"$(cat "$MNT/t/a" "$MNT/t/b" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
	ofs_umount
done

# ---- a damaged index page of the database ----
# The mount's lookups go through the index on (parent, name); fsck's walk
# reads the table.  fsck must not call such a store clean.
ROOT="$TESTDIR/dbpage"
mkdir -p "$ROOT"
ofs_mount "bucket_count=2,bucket_size=4M" || ofs_bail "cannot mount $ROOT"
mkdir "$MNT/t"
for i in 1 2 3; do echo "v$i" >"$MNT/t/k$i"; done
ofs_umount
if [ "$OFS_BACKEND" == pages ]; then
	ps=$(sqlite3 "$ROOT/offloadfs.db" "pragma page_size")
	pg=$(sqlite3 "$ROOT/offloadfs.db" "select rootpage from sqlite_master where name = 'inodes_dentry'")
	head -c "$ps" /dev/urandom | dd of="$ROOT/offloadfs.db" bs="$ps" seek=$((pg - 1)) conv=notrunc 2>/dev/null
	sum=$(md5sum <"$ROOT/offloadfs.db")
	run "$OFSCTL" fsck "$ROOT"
	check_eq "a damaged index page: fsck exits 2" 2 "$RC"
	check_contains "a damaged index page: fsck says the database is damaged" \
		"the database is damaged (sqlite's integrity_check: " "$ERR"
	run "$OFSCTL" fsck "$ROOT" --repair
	check_eq "a damaged index page: fsck --repair exits 2" 2 "$RC"
	check_eq "a damaged index page: fsck --repair leaves the database as it was" \
		"$sum" "$(md5sum <"$ROOT/offloadfs.db")"
	# The daemon mounts it (the check would cost a read of the whole
	# database), but its log says what is wrong when a request meets it.
	if ofs_mount ""; then
		check_fails "a damaged index page: a lookup fails with EUCLEAN" \
			"Structure needs cleaning" stat "$MNT/t/k1"
		check_grep_log "a damaged index page: the daemon's log says so" \
			"the metadata database is damaged (sqlite: "
		check_grep_log "a damaged index page: the log says what to run" "run offloadctl fsck"
		ofs_umount
	else
		not_ok "a damaged index page: mounts" "$(cat "$LOG")"
	fi
else
	skip "a damaged index page" "the pages backend's database"
fi

# ---- a second store mounted over a mounted one ----
# It would hide the first store's files and take its new ones.
ROOT="$TESTDIR/first"
mkdir -p "$ROOT" "$TESTDIR/second"
ofs_mount "bucket_count=1,bucket_size=4M" || ofs_bail "cannot mount $ROOT"
mkdir "$MNT/t" && echo first >"$MNT/t/f"
run timeout -s TERM 5 "$OFS" "$TESTDIR/second" "$MNT" -f -o bucket_count=1,bucket_size=4M
check_eq "a mount over a mounted store is refused" 1 "$RC"
check_contains "and says so" "is already an offloadfs mount (of $ROOT)" "$ERR"
check_eq "the second ROOT is left empty" "" "$(ls -A "$TESTDIR/second")"
check_eq "the first store's file is still there" first "$(cat "$MNT/t/f")"
check_eq "one mount at the mount point" 1 "$(grep -c " $MNT " /proc/mounts)"
run "$OFSCTL" fsck "$MNT"
check_eq "fsck of the mount point: exit 2" 2 "$RC"
check_contains "fsck of the mount point says it takes the ROOT" \
	"is an offloadfs mount point (of $ROOT): fsck takes the ROOT of an unmounted store" "$ERR"
run "$OFSCTL" fsck "$ROOT" --meta
check_eq "fsck --meta without a path: exit 2, and says so" "2 offloadctl: --meta needs a PATH or a postgresql:// URI" \
	"$RC $ERR"

# ---- a geometry from the environment, not the store's ----
# The command line shows no option: the message names the variable.
ofs_umount
run env MOONCAKE_DISTRIBUTED_PAGE_SIZE=4096 timeout -s TERM 5 "$OFS" "$ROOT" "$MNT" -f
check_contains "MOONCAKE_DISTRIBUTED_PAGE_SIZE not the store's: the refusal names it" \
	"page_size=4096 requested (by MOONCAKE_DISTRIBUTED_PAGE_SIZE), store has 65536" "$ERR"
run env MOONCAKE_DISTRIBUTED_BUCKET_COUNT=300 timeout -s TERM 5 "$OFS" "$ROOT" "$MNT" -f
check_contains "MOONCAKE_DISTRIBUTED_BUCKET_COUNT out of range: named" \
	"invalid bucket_count 300 (from MOONCAKE_DISTRIBUTED_BUCKET_COUNT): 1..256" "$ERR"
run env MOONCAKE_DISTRIBUTED_BUCKET_COUNT=3 timeout -s TERM 5 "$OFS" "$ROOT" "$MNT" -f \
	-o bucket_count=2
check_contains "-o wins over the environment: its mismatch names no variable" \
	"bucket_count=2 requested, store has 1" "$ERR"
ofs_mount "" || ofs_bail "cannot mount $ROOT again"

# ---- user.offload.quota: a size, or nothing ----
# A value eviction cannot read would be no quota at all, silently.
for v in 1.5G 10GB- "10 G" -1 junk 0x10; do
	check_fails "quota '$v' is refused" "Invalid argument" \
		setfattr -n user.offload.quota -v "$v" "$MNT/t"
done
check_eq "a refused quota is not kept" "" \
	"$(getfattr --absolute-names --only-values -n user.offload.quota "$MNT/t" 2>/dev/null)"
for v in 10G 1048576 64KiB 0; do
	check "quota '$v' is taken" setfattr -n user.offload.quota -v "$v" "$MNT/t"
done
check_eq "the last quota set is kept" 0 \
	"$(getfattr --absolute-names --only-values -n user.offload.quota "$MNT/t")"
check "an empty quota is taken (none)" python3 -c \
	'import os, sys; os.setxattr(sys.argv[1], "user.offload.quota", b"")' "$MNT/t"
ofs_umount
check_eq "the first store unmounts cleanly" 0 "$OFS_RC"

# ---- a bucket file past the store's bucket_count ----
# Another store's (one of more buckets): nothing would read it or say so.
if [ "$OFS_BACKEND" == pages ]; then
	ROOT="$TESTDIR/stray"
	mkdir -p "$ROOT"
	ofs_mount "bucket_count=2,bucket_size=4M" || ofs_bail "cannot mount $ROOT"
	mkdir "$MNT/t" && echo kept >"$MNT/t/f"
	ofs_umount
	mkrand "$ROOT/bucket_05.data" 65536
	sum=$(md5sum <"$ROOT/bucket_05.data")
	run timeout -s TERM 5 "$OFS" "$ROOT" "$MNT" -f
	check_eq "a bucket file past bucket_count: the mount is refused" 1 "$RC"
	check_contains "and names it" "holds bucket_05.data, past the store's 2 bucket file(s)" "$ERR"
	run "$OFSCTL" fsck "$ROOT"
	check_eq "a bucket file past bucket_count: fsck exits 1" 1 "$RC"
	check_contains "fsck names it" "bucket_05.data: past the store's 2 bucket file(s)" "$OUT"
	run "$OFSCTL" fsck "$ROOT" --repair
	check_eq "fsck --repair leaves it to the operator: exits 1" 1 "$RC"
	check_eq "the stray bucket file is untouched" "$sum" "$(md5sum <"$ROOT/bucket_05.data")"
	mv "$ROOT/bucket_05.data" "$TESTDIR/"
	if ofs_mount ""; then
		check_eq "moved away, the store mounts with its file" kept "$(cat "$MNT/t/f")"
		ofs_umount
	else
		not_ok "moved away, the store mounts" "$(cat "$LOG")"
	fi
else
	skip "a bucket file past bucket_count" "pages backend only"
fi

# ---- the kernel's mount fails after the store was opened ----
# A user who may not open /dev/fuse: libfuse says why, and the daemon's
# last line must not claim a mount that never was.
U="$TESTDIR/user"
mkdir -p "$U/r" "$U/m"
chown 65534:65534 "$U/r" "$U/m"
chmod 0755 "$U"
NOBODY=yes
nobody_ready bins || NOBODY=no
if [ $NOBODY == no ]; then
	skip "a mount the kernel refuses" "$NOBODY_WHY"
elif setpriv --reuid=65534 --regid=65534 --clear-groups test -r /dev/fuse -a -w /dev/fuse; then
	skip "a mount the kernel refuses" "nobody may open /dev/fuse here"
else
	ofs_track_mnt "$U/m"
	run setpriv --reuid=65534 --regid=65534 --clear-groups timeout -s TERM 5 \
		"$OFS_NOBODY" "$U/r" "$U/m" -f -o bucket_count=1,bucket_size=4M
	check_eq "no access to /dev/fuse: exit 1" 1 "$RC"
	check_contains "libfuse says why" "/dev/fuse" "$ERR"
	check_eq "the daemon does not say it unmounted" no \
		"$([[ "$ERR" == *"unmounted"* ]] && echo yes || echo no)"
	check_contains "it says it did not mount" "not mounted at $U/m" "$ERR"
fi

# ---- a database and a ROOT of two stores ----
# Used together, the allocator would take pages the ROOT's objects use for
# free ones and write over them: each store has an id, in its database and
# in ROOT/offloadfs.id, and a mount or fsck of a mismatched pair is refused.
A="$TESTDIR/ida" AM="$TESTDIR/ida.db" BR="$TESTDIR/idb"
mkdir -p "$A" "$BR"
ROOT="$A"
ofs_mount "bucket_count=1,bucket_size=4M,meta=$AM" || ofs_bail "cannot mount $A"
mkdir "$MNT/t"
echo kept >"$MNT/t/k"
ofs_umount
ROOT="$BR"
ofs_mount "bucket_count=1,bucket_size=4M" || ofs_bail "cannot mount $BR"
mkdir "$MNT/t"
echo other >"$MNT/t/x"
ofs_umount
check "a new store gets an id" grep -Eqx '[0-9a-f]{32}' "$A/offloadfs.id"
check_eq "and its database records it" "$(cat "$A/offloadfs.id")" \
	"$(sqlite3 "$AM" "SELECT v FROM store WHERE k = 'store_id'")"
check "two stores have two ids" [ "$(cat "$A/offloadfs.id")" != "$(cat "$BR/offloadfs.id")" ]
sums() { md5sum "$A"/bucket_* "$AM" "$BR/offloadfs.db" | awk '{print $1}' | tr '\n' ' '; }
before=$(sums)
run timeout -s TERM 10 "$OFS" "$A" "$MNT" -f -o "meta=$BR/offloadfs.db"
check_eq "meta= naming another store's database: the mount is refused" 1 "$RC"
check_contains "and says they are two stores" "not one store" "$ERR"
run "$OFSCTL" fsck "$A" --meta "$BR/offloadfs.db" --repair
check_eq "fsck --repair of that pair refuses too" 2 "$RC"
check_contains "and touches nothing" "not touched" "$ERR"
cp "$BR/offloadfs.db" "$TESTDIR/copied.db"
run timeout -s TERM 10 "$OFS" "$A" "$MNT" -f -o "meta=$TESTDIR/copied.db"
check_eq "a copy of another store's database is refused" 1 "$RC"
check_eq "nothing of either store was written" "$before" "$(sums)"
mv "$A/offloadfs.id" "$TESTDIR/ida.id"
run timeout -s TERM 10 "$OFS" "$A" "$MNT" -f -o "meta=$AM"
check_eq "a ROOT whose id was lost is refused" 1 "$RC"
check_contains "and the message says how to put it back" \
	"echo $(cat "$TESTDIR/ida.id") > $A/offloadfs.id" "$ERR"
mv "$TESTDIR/ida.id" "$A/offloadfs.id"
# A ROOT with an id and no database at the path given: refused, its id kept.
mkdir "$TESTDIR/idonly"
cp "$A/offloadfs.id" "$TESTDIR/idonly/"
run timeout -s TERM 10 "$OFS" "$TESTDIR/idonly" "$MNT" -f
check_eq "a ROOT with an id but no database is refused" 1 "$RC"
check_contains "and says so" "there is no database at" "$ERR"
check_eq "its id is kept, nothing made" "offloadfs.id" "$(ls -A "$TESTDIR/idonly")"
# A store made by a build without ids: neither has one; the mount gives both the same.
rm "$A/offloadfs.id"
sqlite3 "$AM" "DELETE FROM store WHERE k = 'store_id'"
ROOT="$A"
if ofs_mount "meta=$AM"; then
	check_eq "a store without an id mounts, its files intact" kept "$(cat "$MNT/t/k")"
	ofs_umount
fi
check "and has an id now" grep -Eqx '[0-9a-f]{32}' "$A/offloadfs.id"
check_eq "the same in its database" "$(cat "$A/offloadfs.id")" \
	"$(sqlite3 "$AM" "SELECT v FROM store WHERE k = 'store_id'")"
run "$OFSCTL" fsck "$A" --meta "$AM"
check_eq "fsck: the store is clean after all that" "0 fsck: clean" "$RC $(tail -n 1 <<<"$OUT")"

# ---- a database the daemon's user may not open ----
if [ $NOBODY == yes ]; then
	ROOT="$U/r"
	ofs_mount "bucket_count=1,bucket_size=4M" || ofs_bail "cannot mount $ROOT"
	ofs_umount
	chown -R 65534:65534 "$ROOT"
	chown 0:0 "$ROOT/offloadfs.db"
	run setpriv --reuid=65534 --regid=65534 --clear-groups timeout -s TERM 5 \
		"$OFS_NOBODY" "$ROOT" "$U/m" -f
	check_eq "a database of another user: the mount is refused" 1 "$RC"
	check_contains "and says why" "offloadfs.db: unable to open database file (Permission denied)" \
		"$ERR"
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$OFSCTL_NOBODY" fsck "$ROOT"
	check_contains "fsck says why too" "offloadfs.db: unable to open database file (Permission denied)" \
		"$ERR"
else
	skip "a database the daemon's user may not open" "$NOBODY_WHY"
fi
chmod 0700 "$TESTDIR"

ofs_done
