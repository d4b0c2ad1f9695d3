#!/usr/bin/env bash
# t-cli.sh: the command line and the store's guard rails: --help/--version,
# bad options, geometry mismatch, foreign ROOT contents (left untouched),
# a MOUNTPOINT that is a file, environment defaults, WAL mode, one daemon
# per store, fsck of a mounted store, meta=PATH, mount -t fuse.offloadfs;
# messages that name the cause (an unreadable, read-only or full ROOT, a
# corrupt geometry value) and a remount right after fusermount3 -u.
set -u
. "$(dirname "$0")/lib.sh"

# refuse NAME ERRTEXT ROOT MNT ARGS...: the daemon must exit non-zero
# without mounting, with ERRTEXT in its stderr.  (-f, under a timeout: a
# daemon that wrongly accepts is stopped after 5 s.)
refuse() {
	local name=$1 text=$2 root=$3 mnt=$4
	shift 4
	ofs_track_mnt "$mnt"
	timeout -s TERM 5 "$OFS" "$root" "$mnt" -f "$@" >"$TESTDIR/.out" 2>"$TESTDIR/.err"
	RC=$?
	ERR=$(tr '\n' ' ' <"$TESTDIR/.err")
	if is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	if [ "$RC" -eq 0 ]; then
		not_ok "$name" "exited 0; stderr: $ERR"
	elif [ "$RC" -eq 124 ]; then
		not_ok "$name" "it mounted and ran until the timeout; stderr: $ERR"
	elif [[ "$ERR" != *"$text"* ]]; then
		not_ok "$name" "exited $RC, stderr '$ERR' lacks '$text'"
	else
		ok "$name"
	fi
}

# newroot NAME: a fresh empty directory under $TESTDIR.
newroot() {
	rm -rf "${TESTDIR:?}/$1"
	mkdir -p "$TESTDIR/$1"
	echo "$TESTDIR/$1"
}

nbuckets() { find "$1" -maxdepth 1 -name 'bucket_??.data' | wc -l; }

# ---- help and version ----
run "$OFS" --help
check_eq "--help exits 0" 0 "$RC"
check_contains "--help prints a usage" "usage:" "$OUT"
check_contains "--help documents bucket_count" "bucket_count" "$OUT"
# README's usage line (Options), every flag in it: -f, -d, -s, -o.
USAGE=$(sed -n 's/^`offloadfs \(ROOT MOUNTPOINT [^`]*\)`$/\1/p' "$OFS_TESTS_DIR/../../README.md")
check_eq "--help's usage line is README's" "usage: $OFS ${USAGE:-(none in README)}" \
	"$(sed -n 1p <<<"$OUT")"
run "$OFS" --version
check_eq "--version exits 0" 0 "$RC"
check_contains "--version names offloadfs" "offloadfs" "$OUT"
run "$OFS" -V
check_eq "-V exits 0" 0 "$RC"
run "$OFSCTL" --version
check_eq "offloadctl --version exits 0" 0 "$RC"
run "$OFS" "$ROOT"
check_eq "no MOUNTPOINT: exits non-zero" 1 "$([ "$RC" -ne 0 ] && echo 1 || echo 0)"
check_eq "no MOUNTPOINT: ROOT untouched" "" "$(ls -A "$ROOT")"
check_eq "no MOUNTPOINT: the same usage line" "usage: $OFS $USAGE (see --help)" "$ERR"

# ---- bad options: refused by name, nothing created ----
refuse "unknown option -o bogus=1: refused, named" "bogus" "$ROOT" "$MNT" -o bogus=1
check_eq "unknown option: nothing created in ROOT" "" "$(ls -A "$ROOT")"
for bad in page_size=abc page_size=1000 page_size=0 bucket_count=0 bucket_count=300 \
	bucket_count=-1 bucket_size=100 bucket_size=12Q bucket_size=100000 cache_timeout=abc \
	cache_timeout=nan cache_timeout=inf cache_timeout=-inf metrics="$TESTDIR/no-such-dir/m.prom" \
	metrics="$TESTDIR" sync_interval=abc sync_interval=-5; do
	opt=${bad%%=*}
	refuse "-o $bad: refused, names $opt" "$opt" "$ROOT" "$MNT" -o "$bad"
	check_eq "-o $bad: nothing created in ROOT" "" "$(ls -A "$ROOT")"
done
: >"$TESTDIR/afile"
refuse "a MOUNTPOINT that is a file: refused" "MOUNTPOINT $TESTDIR/afile: not a directory" \
	"$ROOT" "$TESTDIR/afile"
check_eq "a MOUNTPOINT that is a file: nothing created in ROOT" "" "$(ls -A "$ROOT")"
MOONCAKE_DISTRIBUTED_BUCKET_COUNT=abc refuse "env BUCKET_COUNT=abc: refused, named" \
	"MOONCAKE_DISTRIBUTED_BUCKET_COUNT" "$ROOT" "$MNT"
check_eq "bad env: nothing created in ROOT" "" "$(ls -A "$ROOT")"

# ---- geometry is fixed at creation ----
ofs_mount "bucket_count=4,bucket_size=64M" || ofs_bail "cannot mount"
mkdir "$MNT/t"
echo geom >"$MNT/t/f"
ofs_umount
refuse "remount with bucket_count=8: mismatch named" \
	"geometry mismatch: bucket_count=8 requested, store has 4" "$ROOT" "$MNT" -o bucket_count=8,bucket_size=64M
refuse "remount with bucket_size=32M: mismatch named" \
	"geometry mismatch: bucket_size=33554432 requested, store has 67108864" "$ROOT" "$MNT" -o bucket_size=32M
refuse "remount with page_size=131072: mismatch named" \
	"geometry mismatch: page_size=131072 requested, store has 65536" "$ROOT" "$MNT" -o page_size=131072
check_eq "the refused remounts created no bucket file" 4 "$(nbuckets "$ROOT")"
ofs_mount "" || ofs_bail "cannot remount without options"
check_eq "remount without options uses the store's geometry" "4096,$PAGE" "$(stat -f -c %b,%S "$MNT")"
check_eq "remount without options: content there" geom "$(cat "$MNT/t/f")"

# ---- one daemon per store; fsck refuses a mounted store ----
MNT2="$TESTDIR/mnt2"
mkdir -p "$MNT2"
refuse "a second daemon on a mounted ROOT is refused" "in use" "$ROOT" "$MNT2"
check "the first mount still works after the refused second one" \
	sh -c "echo still > '$MNT/t/g' && test \"\$(cat '$MNT/t/g')\" = still"
ofs_fsck
check_eq "fsck of a mounted store exits non-zero" 1 "$([ "$RC" -ne 0 ] && echo 1 || echo 0)"
check_contains "fsck of a mounted store says it is in use" "in use" "$ERR"
EMPTY=$(newroot empty)
run "$OFSCTL" fsck "$EMPTY" --repair
check_eq "fsck of a directory with no store: exit 2, one plain message" \
	"2 offloadctl: $EMPTY/offloadfs.db does not exist: no store to check; not touched" "$RC $ERR"
check_eq "and nothing made there" "" "$(ls -A "$EMPTY")"
ofs_umount
check_eq "clean unmount: exit 0" 0 "$OFS_RC"
run sqlite3 "$ROOT/offloadfs.db" "pragma journal_mode"
check_eq "the database is in WAL mode" wal "$OUT"
ofs_fsck
check_eq "fsck of the unmounted store exits 0" 0 "$RC"

# ---- a damaged store is refused, untouched ----
# (the store of the tests above: 4 buckets of 64M, one file t/f)
sum=$(md5sum <"$ROOT/bucket_01.data")
truncate -s 1M "$ROOT/bucket_01.data"
refuse "a truncated bucket file stops the mount" "truncated" "$ROOT" "$MNT"
check_eq "the truncated bucket file was not extended" 1048576 "$(stat -c %s "$ROOT/bucket_01.data")"
ofs_fsck
check_eq "fsck of a store with a truncated bucket exits non-zero" yes "$([ "$RC" -ne 0 ] && echo yes || echo no)"
check_contains "fsck names the truncated bucket" "bucket_01.data" "$OUT"
truncate -s 64M "$ROOT/bucket_01.data"
mv "$ROOT/bucket_02.data" "$TESTDIR/bucket_02.saved"
refuse "a missing bucket file stops the mount" "bucket_02.data" "$ROOT" "$MNT"
check_eq "the missing bucket file was not recreated" no "$([ -e "$ROOT/bucket_02.data" ] && echo yes || echo no)"
mv "$TESTDIR/bucket_02.saved" "$ROOT/bucket_02.data"
cp "$ROOT/offloadfs.db" "$TESTDIR/db.saved"
sqlite3 "$ROOT/offloadfs.db" 'pragma user_version = 7'
sum=$(md5sum <"$ROOT/offloadfs.db")
refuse "a database of another schema version is refused" \
	"unsupported schema version: found 7, expected 4" "$ROOT" "$MNT"
check_eq "that database is unchanged" "$sum" "$(md5sum <"$ROOT/offloadfs.db")"
cp "$TESTDIR/db.saved" "$ROOT/offloadfs.db"
rm -f "$ROOT/offloadfs.db-wal" "$ROOT/offloadfs.db-shm"
if ofs_mount ""; then
	check_eq "the repaired store mounts, content intact" geom "$(cat "$MNT/t/f")"
	ofs_umount
else
	not_ok "the repaired store mounts" "$(cat "$LOG")"
fi

# ---- foreign ROOT contents: refused, untouched ----
R=$(newroot foreign)
echo x >"$R/notes.txt"
sum=$(md5sum <"$R/notes.txt")
refuse "ROOT with a foreign file is refused" "did not create" "$R" "$MNT"
check_eq "the foreign file is unchanged" "$sum" "$(md5sum <"$R/notes.txt")"
check_eq "nothing was created in that ROOT" "notes.txt" "$(ls -A "$R")"

R=$(newroot foreigndir)
mkdir "$R/data"
refuse "ROOT with a foreign directory is refused" "did not create" "$R" "$MNT"
check_eq "nothing was created in that ROOT" "data" "$(ls -A "$R")"

R=$(newroot nodb)
mkrand "$R/bucket_00.data" 1048576
sum=$(md5sum <"$R/bucket_00.data")
refuse "ROOT with bucket files but no database is refused" "bucket file" "$R" "$MNT"
check_eq "the bucket file is unchanged" "$sum" "$(md5sum <"$R/bucket_00.data")"
check_eq "no database was created" "bucket_00.data" "$(ls -A "$R")"

# ---- a store mounted with metadata other than its own: refused, untouched ----
R=$(newroot sqlitestore)
saved_root=$ROOT
ROOT=$R
if ofs_mount "bucket_count=2,bucket_size=4M"; then
	mkdir "$MNT/t" && echo kept >"$MNT/t/f"
	ofs_umount
	sum=$(md5sum <"$R/offloadfs.db")
	refuse "a sqlite store's ROOT with another sqlite file is refused, naming its own" \
		"metadata is the sqlite file $R/offloadfs.db" "$R" "$MNT" -o meta="$TESTDIR/other.db"
	check_eq "no other database was made" "no" "$([ -e "$TESTDIR/other.db" ] && echo yes || echo no)"
	if ! command -v psql >/dev/null; then
		skip "a sqlite store's ROOT mounted with PostgreSQL metadata" "no psql (scripts/deps.sh installs it)"
	elif chmod 0711 "$TESTDIR" && OFS_PG_DIR="$TESTDIR/pg" &&
		uri=$("$OFS_TESTS_DIR/../../scripts/pg" start "$OFS_PG_DIR" 2>"$TESTDIR/.pgerr"); then
		refuse "a sqlite store's ROOT mounted with PostgreSQL metadata is refused" \
			"metadata is the sqlite file $R/offloadfs.db, not a database on a server" \
			"$R" "$MNT" -o meta="$uri"
		check_eq "the server holds no store" "0" \
			"$(psql -X -q -At -d "$uri" -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'offloadfs'")"
		# Stopped here: the checks below close $TESTDIR to the postgres user.
		"$OFS_TESTS_DIR/../../scripts/pg" stop "$OFS_PG_DIR" && OFS_PG_DIR=""
		check_eq "the server is stopped" "" "$OFS_PG_DIR"
	else
		not_ok "a PostgreSQL server for the metadata refusals" "$(cat "$TESTDIR/.pgerr")"
	fi
	check_eq "its database is unchanged" "$sum" "$(md5sum <"$R/offloadfs.db")"
	if ofs_mount ""; then
		check_eq "and it mounts with its own" kept "$(cat "$MNT/t/f")"
		ofs_umount
	else
		not_ok "and it mounts with its own" "see the daemon's log"
	fi
else
	not_ok "a sqlite store for the metadata refusals" "see the daemon's log"
fi
ROOT=$saved_root

refuse "a non-existent ROOT is refused" "$TESTDIR/does-not-exist" "$TESTDIR/does-not-exist" "$MNT"
check_eq "the non-existent ROOT was not created" no "$([ -e "$TESTDIR/does-not-exist" ] && echo yes || echo no)"

R=$(newroot sqlite)
sqlite3 "$R/offloadfs.db" 'create table x(a)'
sum=$(md5sum <"$R/offloadfs.db")
refuse "a foreign sqlite database as offloadfs.db is refused" "not an offloadfs database" "$R" "$MNT"
check_eq "the foreign database is unchanged" "$sum" "$(md5sum <"$R/offloadfs.db")"
check_eq "nothing else was created in that ROOT" "offloadfs.db" "$(ls -A "$R")"

R=$(newroot emptydb)
: >"$R/offloadfs.db"
refuse "an empty offloadfs.db is refused" "offloadfs.db" "$R" "$MNT"
check_eq "the empty database stays empty" 0 "$(stat -c %s "$R/offloadfs.db")"

R=$(newroot lostfound)
mkdir "$R/lost+found"
ROOT_SAVE=$ROOT
ROOT=$R
if ofs_mount; then
	ok "a ROOT holding only lost+found is accepted"
	ofs_umount
else
	not_ok "a ROOT holding only lost+found is accepted" "$(cat "$LOG")"
fi

# ---- environment defaults ----
ROOT=$(newroot env2)
export MOONCAKE_DISTRIBUTED_BUCKET_COUNT=2
if ofs_mount "bucket_size=64M"; then
	check_eq "env BUCKET_COUNT=2: 2 bucket files" 2 "$(nbuckets "$ROOT")"
	check_eq "env BUCKET_COUNT=2: statfs blocks" 2048 "$(ofs_blocks)"
	ofs_umount
else
	not_ok "mount with env BUCKET_COUNT=2" "$(cat "$LOG")"
fi
ROOT=$(newroot env3)
if ofs_mount "bucket_count=3,bucket_size=64M"; then
	check_eq "-o bucket_count=3 wins over env BUCKET_COUNT=2: 3 bucket files" 3 "$(nbuckets "$ROOT")"
	ofs_umount
else
	not_ok "mount with env BUCKET_COUNT=2 and -o bucket_count=3" "$(cat "$LOG")"
fi
unset MOONCAKE_DISTRIBUTED_BUCKET_COUNT
ROOT=$(newroot envall)
export MOONCAKE_DISTRIBUTED_PAGE_SIZE=131072 MOONCAKE_DISTRIBUTED_BUCKET_SIZE=8M \
	MOONCAKE_DISTRIBUTED_BUCKET_COUNT=2
if ofs_mount ""; then
	check_eq "env PAGE_SIZE=131072 BUCKET_SIZE=8M BUCKET_COUNT=2: statfs blocks,bsize" \
		"128,131072" "$(stat -f -c %b,%S "$MNT")"
	check_eq "env BUCKET_SIZE=8M: bucket file size" 8388608 "$(stat -c %s "$ROOT/bucket_01.data")"
	ofs_umount
else
	not_ok "mount with all three env defaults" "$(cat "$LOG")"
fi
unset MOONCAKE_DISTRIBUTED_PAGE_SIZE MOONCAKE_DISTRIBUTED_BUCKET_SIZE MOONCAKE_DISTRIBUTED_BUCKET_COUNT

# ---- the default geometry, and a small page size ----
ROOT=$(newroot defaults)
if ofs_mount ""; then
	check_eq "defaults: 256 bucket files" 256 "$(nbuckets "$ROOT")"
	check_eq "defaults: bucket_ff.data is 4G (sparse)" 4294967296 "$(stat -c %s "$ROOT/bucket_ff.data")"
	# 256 x 4 GiB, or what the disk under ROOT can hold when that is less.
	# The disk measured first: other writers on it only take from it meanwhile.
	disk=$(($(stat -f -c '%a * %S' "$ROOT") / 65536))
	read -r blocks free bsize <<<"$(stat -f -c '%b %f %S' "$MNT")"
	check_eq "defaults: statfs bsize is the page size" 65536 "$bsize"
	check_eq "defaults: statfs all free" "$blocks" "$free"
	check "defaults: statfs blocks: 16777216 pages, or no more than the disk has ($blocks, disk $disk)" \
		test "$blocks" -eq 16777216 -o "$blocks" -le "$disk"
	run "$OFSCTL" stats "$MNT"
	pages=$(sed -n 's/^  capacity .*(\([0-9]*\) pages of 64 KiB)$/\1/p' <<<"$OUT")
	check "defaults: offloadctl stats's capacity is statfs's, not the buckets' nominal size ($pages)" \
		test -n "$pages" -a "$pages" -le 16777216 -a \( "$pages" -le "$disk" -o "$disk" -ge 16777216 \)
	ofs_umount
else
	not_ok "mount with the default geometry" "$(cat "$LOG")"
fi
ROOT=$(newroot page4k)
if ofs_mount "page_size=4096,bucket_size=1M,bucket_count=1"; then
	mkdir "$MNT/t"
	mkrand "$REF/p4k" 10000
	cp "$REF/p4k" "$MNT/t/f"
	check_eq "page_size=4096: a 10000-byte file uses 3 pages" "256,253,4096" "$(stat -f -c %b,%f,%S "$MNT")"
	ofs_remount || ofs_bail "cannot remount"
	check_cmp "page_size=4096: content after remount" "$REF/p4k" "$MNT/t/f"
	ofs_umount
else
	not_ok "mount with page_size=4096" "$(cat "$LOG")"
fi

# ---- sync_interval, verify, noverify are accepted ----
ROOT=$(newroot syncopts)
for o in sync_interval=0 sync_interval=50 verify noverify; do
	if ofs_mount "bucket_count=1,bucket_size=4M,$o"; then
		mkdir -p "$MNT/t"
		echo "$o" >"$MNT/t/f"
		check_eq "-o $o: mounts and works" "$o" "$(cat "$MNT/t/f")"
		ofs_umount
	else
		not_ok "-o $o: mounts" "$(cat "$LOG")"
	fi
done

# ---- ROOT spellings: relative, with a space, with a comma; from the env ----
ROOT=$(newroot relroot)
ROOT_ABS=$ROOT
cd "$TESTDIR" || ofs_bail "cd $TESTDIR"
ROOT=relroot
if ofs_mount "bucket_count=1,bucket_size=4M"; then
	mkdir "$MNT/t"
	echo rel >"$MNT/t/f"
	check_contains "relative ROOT: the descriptor names the absolute bucket path" \
		"file_path=$ROOT_ABS/bucket_00.data" \
		"$(getfattr --absolute-names --only-values -n user.offload.descriptor "$MNT/t/f" 2>&1)"
	ofs_umount
else
	not_ok "mount with a relative ROOT" "$(cat "$LOG")"
fi
cd / || true
for name in "root with space" "root,with,comma"; do
	ROOT=$(newroot "$name")
	if ofs_mount "bucket_count=1,bucket_size=4M"; then
		mkdir "$MNT/t"
		echo x >"$MNT/t/f"
		check_eq "ROOT '$name': mounts, and a file reads back" x "$(cat "$MNT/t/f")"
		ofs_umount
	else
		not_ok "ROOT '$name': mounts" "$(tr '\n' ' ' <"$LOG")"
	fi
done
ROOT=$(newroot envroot)
OFS_NMOUNT=$((OFS_NMOUNT + 1))
LOG="$TESTDIR/daemon.$OFS_NMOUNT.log"
MOONCAKE_DISTRIBUTED_ROOT_DIR="$ROOT" "$OFS" "$MNT" -f -o bucket_count=1,bucket_size=4M 2>"$LOG" &
OFS_PID=$!
OFS_PIDS+=("$OFS_PID")
echo "$OFS_PID" >>"$TESTDIR/.daemons"
if wait_until 10 mountpoint -q "$MNT"; then
	ok "MOONCAKE_DISTRIBUTED_ROOT_DIR with only MOUNTPOINT given: mounted"
	check_eq "MOONCAKE_DISTRIBUTED_ROOT_DIR: the store is created there" 1 "$(nbuckets "$ROOT")"
	ofs_umount
else
	not_ok "MOONCAKE_DISTRIBUTED_ROOT_DIR with only MOUNTPOINT given: mounted" "$(cat "$LOG")"
	kill -9 "$OFS_PID" 2>/dev/null
	ofs_reap "$OFS_PID"
	OFS_PID=""
fi

# ---- meta=PATH ----
ROOT=$(newroot metaroot)
META="$TESTDIR/elsewhere.db"
if ofs_mount "bucket_count=2,bucket_size=64M,meta=$META"; then
	mkdir "$MNT/t"
	echo m >"$MNT/t/f"
	ofs_umount
	check_eq "meta=PATH: the database is at PATH" yes "$([ -s "$META" ] && echo yes || echo no)"
	check_eq "meta=PATH: ROOT holds only bucket files, the batch epoch table and the store's id" \
		"batch-epochs bucket_00.data bucket_01.data offloadfs.id" \
		"$(ls -A "$ROOT" | tr '\n' ' ' | sed 's/ $//')"
	if ofs_mount "meta=$META"; then
		check_eq "meta=PATH: remount reads the content" m "$(cat "$MNT/t/f")"
		ofs_umount
	else
		not_ok "meta=PATH: remount" "$(cat "$LOG")"
	fi
	refuse "the same ROOT without meta=PATH is refused (bucket files, no database)" \
		"bucket file" "$ROOT" "$MNT"
else
	not_ok "mount with meta=PATH" "$(cat "$LOG")"
fi
ROOT=$ROOT_SAVE

# ---- mount -t fuse.offloadfs ----
if [ ! -x /sbin/mount.fuse3 ] && [ ! -x /usr/sbin/mount.fuse3 ] && ! command -v mount.fuse3 >/dev/null; then
	skip "mount -t fuse.offloadfs" "mount.fuse3 is not installed"
else
	ofs_track_mnt "$MNT"
	how="PATH=\$OFS_BUILD:\$PATH mount -t fuse.offloadfs"
	run env PATH="$OFS_BUILD:$PATH" mount -t fuse.offloadfs "$ROOT" "$MNT" -o bucket_count=4,bucket_size=64M
	if [ "$RC" -ne 0 ] && [[ "$ERR" == *"offloadfs: not found"* ]]; then
		# util-linux mount(8) runs its helpers with a fixed standard PATH, so
		# mount.fuse3 cannot find a program that is only in $OFS_BUILD.  The
		# fuse "PROGRAM#SOURCE" form names it by absolute path instead.
		note "mount(8) reset PATH for mount.fuse3 ($ERR); using mount -t fuse '$OFS#ROOT'"
		how="mount -t fuse PROGRAM#ROOT"
		run mount -t fuse "$OFS#$ROOT" "$MNT" -o bucket_count=4,bucket_size=64M
	fi
	check_eq "$how exits 0" 0 "$RC"
	[ "$RC" -eq 0 ] || note "mount: $ERR"
	if [ "$RC" -eq 0 ] && wait_until 10 mountpoint -q "$MNT"; then
		ok "mount -t: mounted"
		# The daemon went to the background: find it by its unique ROOT argument.
		dpid=""
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/exe" 2>/dev/null)" == "$(realpath "$OFS")" ] || continue
			tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF "$ROOT" && dpid=${p#/proc/}
		done
		[ -n "$dpid" ] && OFS_PIDS+=("$dpid")
		check_eq "mount -t: type and source in /proc/mounts" "fuse.offloadfs $ROOT" \
			"$(findmnt -n -o FSTYPE,SOURCE "$MNT")"
		check_eq "mount -t: the content is there" geom "$(cat "$MNT/t/f")"
		check "umount of a mount -t mount" umount "$MNT"
		if [ -n "$dpid" ]; then
			for ((i = 0; i < 200; i++)); do
				kill -0 "$dpid" 2>/dev/null || break
				sleep 0.05
			done
			check_eq "the background daemon exits after umount" gone \
				"$(kill -0 "$dpid" 2>/dev/null && echo running || echo gone)"
		else
			not_ok "found the background daemon" "no offloadfs process with ROOT $ROOT"
		fi
		ofs_fsck
		check_eq "fsck after the mount -t mount exits 0" 0 "$RC"
	else
		not_ok "mount -t: mounted" "no mount at $MNT"
	fi
fi

# ---- messages that say what is wrong ----
GEOM_MSGS="bucket_count=2,bucket_size=4M"
SAVED_ROOT=$ROOT
R=$(newroot msgs)
ROOT=$R
ofs_mount "$GEOM_MSGS" || ofs_bail "cannot mount $R"
ofs_umount
# An unreadable ROOT is not "in use".
chmod 0700 "$R"
if nobody_ready bins; then
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$OFS_NOBODY" "$R" "$MNT" -f
	check_contains "an unreadable ROOT: the daemon says it cannot open it" "cannot open ROOT" "$ERR"
	check_eq "an unreadable ROOT: not called in use" no \
		"$([[ "$ERR" == *"in use"* ]] && echo yes || echo no)"
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$OFSCTL_NOBODY" fsck "$R"
	check_contains "an unreadable ROOT: fsck says it cannot open it" "cannot open ROOT" "$ERR"
else
	skip "an unreadable ROOT" "$NOBODY_WHY"
fi
chmod 0700 "$TESTDIR"
# A read-only ROOT is not a damaged database.
RO="$TESTDIR/ro"
mkdir -p "$RO"
if mount --bind "$R" "$RO" && ofs_track_mnt "$RO" && mount -o remount,ro,bind "$RO"; then
	refuse "a read-only ROOT: named as such" "not writable: Read-only file system" "$RO" "$MNT"
	check_eq "a read-only ROOT: not called a bad database" no \
		"$([[ "$ERR" == *"sqlite"* ]] && echo yes || echo no)"
	umount "$RO"
else
	not_ok "read-only bind mount of ROOT" "mount failed"
fi
# A full disk is not a damaged database either.
FULL="$TESTDIR/full"
mkdir -p "$FULL"
if mount -t tmpfs -o size=2M tmpfs "$FULL" && ofs_track_mnt "$FULL"; then
	ROOT="$FULL/r"
	mkdir "$ROOT"
	ofs_mount "bucket_count=1,bucket_size=1M" || ofs_bail "cannot mount on the tmpfs"
	ofs_umount
	head -c 3M /dev/zero >"$FULL/fill" 2>/dev/null
	# The metadata's reserve gives a full disk's store the room to mount
	# (and to delete); without it, the message says what is wrong.
	check "a full disk: the store still mounts, on its reserve" \
		ofs_mount "bucket_count=1,bucket_size=1M"
	ofs_umount
	rm -f "$ROOT/offloadfs.db-reserve"
	head -c 3M /dev/zero >"$FULL/fill2" 2>/dev/null
	refuse "a full disk without the reserve: named as such" "No space left on device" "$ROOT" "$MNT"
	check_eq "a full disk: not called a bad database" no \
		"$([[ "$ERR" == *"not a readable"* ]] && echo yes || echo no)"
	umount "$FULL"
else
	not_ok "tmpfs for the full-disk case" "mount failed"
fi
ROOT=$R
# A corrupt geometry value is not "never formatted".
sqlite3 "$ROOT/offloadfs.db" "UPDATE store SET v = 0 WHERE k = 'bucket_count'"
run "$OFSCTL" fsck "$ROOT"
check_eq "a corrupt bucket_count: fsck exits 2" 2 "$RC"
check_eq "a corrupt bucket_count: not called never formatted" no \
	"$([[ "$ERR" == *"never formatted"* ]] && echo yes || echo no)"
sqlite3 "$ROOT/offloadfs.db" "UPDATE store SET v = 2 WHERE k = 'bucket_count'"
# Remounting at once after fusermount3 -u waits for the old daemon.
ofs_mount "$GEOM_MSGS" || ofs_bail "cannot mount"
fails=0
for i in 1 2 3 4 5; do
	mkdir -p "$MNT/t" && echo "$i" >"$MNT/t/f$i"
	old=$OFS_PID
	fusermount3 -u "$MNT"
	OFS_PID=""
	if ! ofs_mount "$GEOM_MSGS"; then
		fails=$((fails + 1))
		ofs_reap "$old"
		break
	fi
	ofs_reap "$old"
done
check_eq "five remounts right after fusermount3 -u all mount" 0 "$fails"
ofs_umount
ROOT=$SAVED_ROOT

ofs_done
