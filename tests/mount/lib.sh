# lib.sh: shared helpers for the offloadfs mount tests.  Sourced (never run)
# by every tests/mount/t-*.sh script:
#
#     . "$(dirname "$0")/lib.sh"
#     ofs_mount || ofs_bail "mount failed"
#     ...
#     ofs_done
#
# Sourcing it makes a fresh temporary directory for the test:
#     $TESTDIR        mktemp -d under ${TMPDIR:-/tmp}, removed on exit
#     $ROOT           the store directory (empty)
#     $MNT            the mount point
#     $REF            scratch space for reference copies
#     $LOG            the current daemon's stderr (one file per mount)
# and installs an EXIT trap that kills helper processes, unmounts every mount
# point the test used (fusermount3 -u, then umount -l), kills a leftover
# daemon and removes $TESTDIR (never through a mount that is still there).
#
# Output is TAP-like: "ok - NAME", "not ok - NAME: details", "skip - NAME:
# why", "# comment"; ofs_done prints "N passed, N failed" and exits 1 when
# anything failed.
#
# Environment: OFS_BUILD (default: the build dir of this checkout), holding
# offloadfs and offloadctl; TMPDIR; OFS_BACKEND=ubsio runs the test on the
# ubsio backend over the stand-in library (tests/ubsio), its store in
# $UBSIO_STUB_DIR=$TESTDIR/kv: every ofs_mount adds the backend's options.
# OFS_META=pg keeps the metadata in PostgreSQL: a throwaway server
# (scripts/pg) in $TESTDIR/pg, its URI in $OFS_META_URI, passed as meta= to
# every ofs_mount and as --meta to ofs_fsck, stopped by the EXIT trap;
# ofs_sql runs a query on the store's database whichever it is.

set -u

OFS_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OFS_BUILD=${OFS_BUILD:-"$OFS_TESTS_DIR/../../build"}
OFS_BUILD=$(cd "$OFS_BUILD" 2>/dev/null && pwd) || {
	echo "not ok - setup: OFS_BUILD ${OFS_BUILD} is not a directory"
	echo "0 passed, 1 failed"
	exit 1
}
OFS="$OFS_BUILD/offloadfs"
OFSCTL="$OFS_BUILD/offloadctl"
for _b in "$OFS" "$OFSCTL"; do
	if [ ! -x "$_b" ]; then
		echo "not ok - setup: $_b missing (build first: ninja -C build offloadfs offloadctl)"
		echo "0 passed, 1 failed"
		exit 1
	fi
done
unset _b

PAGE=65536
# Small sparse geometry: 4 buckets of 1024 pages.
OFS_OPTS_DEFAULT="bucket_count=4,bucket_size=64M"
OFS_MOUNT_TIMEOUT=10   # seconds to wait for the mount to appear
OFS_TEST_TIMEOUT=${OFS_TEST_TIMEOUT:-150} # the watchdog's limit for one script
OFS_EXIT_TIMEOUT=20    # seconds to wait for the daemon to exit after unmount

T_PASS=0
T_FAIL=0
T_SKIP=0
OFS_PID=""        # the daemon of the current mount ("" when none)
OFS_RC=""         # exit status of the last daemon that ended
OFS_PIDS=()       # every daemon started (for the cleanup)
OFS_BG=()         # helper processes started by the test (for the cleanup)
OFS_MNTS=()       # every mount point used (for the cleanup)
OFS_NMOUNT=0
OFS_LAST_OPTS=$OFS_OPTS_DEFAULT

OFS_TEST_NAME=$(basename "$0" .sh)
TESTDIR=$(mktemp -d "${TMPDIR:-/tmp}/ofs-$OFS_TEST_NAME.XXXXXX") || {
	echo "not ok - setup: mktemp failed"
	echo "0 passed, 1 failed"
	exit 1
}
TESTDIR=$(cd "$TESTDIR" && pwd -P) # as /proc/mounts spells it
ROOT="$TESTDIR/root"
MNT="$TESTDIR/mnt"
REF="$TESTDIR/ref"
LOG="$TESTDIR/daemon.0.log"
mkdir -p "$ROOT" "$MNT" "$REF"
OFS_BACKEND=${OFS_BACKEND:-pages}
OFS_BACKEND_OPTS=""
# What the daemon logs at start after a clean unmount and after an unclean stop.
OFS_LOG_CLEAN="bitmaps loaded from the clean-unmount snapshot"
OFS_LOG_REBUILT="bitmaps rebuilt from"
# The stand-in writes values through at once unless a test asks for the
# library's write-back (UBSIO_STUB_FLUSH_MS): as a release whose cache lives
# in a separate storage service does, so a daemon killed by a test keeps
# what it put.  t-ubsio.sh tests the in-process cache's losses.
export UBSIO_STUB_FLUSH_MS=${UBSIO_STUB_FLUSH_MS:-0}
if [ "$OFS_BACKEND" == ubsio ]; then
	export UBSIO_STUB_DIR="$TESTDIR/kv"
	mkdir -p "$UBSIO_STUB_DIR"
	OFS_BACKEND_OPTS="backend=ubsio,ubsio_lib=$OFS_BUILD/tests/libubsio_kvc.so,ubsio_ssd_size=0"
	OFS_LOG_CLEAN="from a clean unmount"
	OFS_LOG_REBUILT="rebuilt after an unclean stop"
fi
: >"$LOG"
: >"$TESTDIR/.daemons"
OFS_META=${OFS_META:-sqlite}
OFS_META_URI=""
OFS_PG_DIR=""

# ---- assertions ----

ok() {
	T_PASS=$((T_PASS + 1))
	echo "ok - $1"
}

# not_ok NAME DETAILS
not_ok() {
	local d=${2//$'\n'/\\n}
	[ ${#d} -le 1000 ] || d="${d:0:1000}..."
	T_FAIL=$((T_FAIL + 1))
	echo "not ok - $1: $d"
}

# skip NAME WHY
skip() {
	T_SKIP=$((T_SKIP + 1))
	echo "skip - $1: $2"
}

note() {
	echo "# $*"
}

# check NAME CMD...: passes when CMD exits 0.
check() {
	local name=$1 cmd
	shift
	run "$@"
	cmd="$*"
	[ ${#cmd} -le 160 ] || cmd="${cmd:0:160}..."
	if [ "$RC" -eq 0 ]; then
		ok "$name"
	else
		not_ok "$name" "'$cmd' exited $RC${OUT:+, stdout: ${OUT:0:600}}${ERR:+, stderr: ${ERR:0:600}}"
	fi
}

# check_eq NAME EXPECTED ACTUAL
check_eq() {
	if [ "$2" == "$3" ]; then
		ok "$1"
	else
		not_ok "$1" "expected '$2', got '$3'"
	fi
}

# check_cmp NAME EXPECTED_FILE ACTUAL_FILE: byte for byte.
check_cmp() {
	local out
	if out=$(cmp -- "$2" "$3" 2>&1); then
		ok "$1"
	else
		not_ok "$1" "${out:-cmp failed}"
	fi
}

# check_contains NAME NEEDLE HAYSTACK
check_contains() {
	if [[ "$3" == *"$2"* ]]; then
		ok "$1"
	else
		not_ok "$1" "'$2' not found in '$3'"
	fi
}

# check_pages NAME EXPECTED ACTUAL: check_eq on the pages backend, which
# counts statfs blocks per object; the ubsio backend counts the values'
# bytes (tested in t-ubsio), so a per-object page count is skipped there.
check_pages() {
	if [ "$OFS_BACKEND" == pages ]; then
		check_eq "$@"
	else
		skip "$1" "statfs counts bytes, not pages per object, on $OFS_BACKEND"
	fi
}

# check_grep_log NAME TEXT: the current daemon's log has TEXT.
check_grep_log() {
	if grep -qF -- "$2" "$LOG"; then
		ok "$1"
	else
		not_ok "$1" "'$2' not in the log: $(tr '\n' ' ' <"$LOG")"
	fi
}

# check_fails NAME ERRTEXT CMD...: CMD must exit non-zero and its stderr
# must contain ERRTEXT (e.g. "Operation not permitted").
check_fails() {
	local name=$1 text=$2 cmd
	shift 2
	run "$@"
	cmd="$*"
	[ ${#cmd} -le 160 ] || cmd="${cmd:0:160}..."
	if [ "$RC" -eq 0 ]; then
		not_ok "$name" "'$cmd' succeeded, expected a failure with '$text'"
	elif [[ "$ERR" != *"$text"* ]]; then
		not_ok "$name" "'$cmd' exited $RC, stderr '${ERR:0:600}' lacks '$text'"
	else
		ok "$name"
	fi
}

# run CMD...: sets RC, OUT (stdout) and ERR (stderr).
run() {
	"$@" >"$TESTDIR/.out" 2>"$TESTDIR/.err"
	RC=$?
	OUT=$(tr -d '\0' <"$TESTDIR/.out")
	ERR=$(tr -d '\0' <"$TESTDIR/.err")
}

# pyerr CODE ARGS...: run python statement(s) CODE with a = [CODE, ARGS...],
# and print OK, or the errno name of the OSError it raised (e.g. EXDEV).
pyerr() {
	python3 -c '
import errno, os, sys
a = sys.argv[1:]
try:
    exec(a[0])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
' "$@"
}

# wait_until SECONDS CMD...: poll CMD every 50 ms until it succeeds.
wait_until() {
	local n=$(($1 * 20)) i
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	"$@"
}

# mkrand FILE SIZE: SIZE random bytes.
mkrand() {
	head -c "$2" /dev/urandom >"$1"
}

# ---- the daemon ----

# ofs_mount [OPTS [EXTRA ARGS...]]: start the daemon in the foreground on
# $ROOT and $MNT with -o OPTS (default $OFS_OPTS_DEFAULT; "" for none) and
# wait for the mount.  Returns 1 (daemon reaped, status in OFS_RC) when it
# does not come up.
ofs_mount() {
	local opts=${1-$OFS_OPTS_DEFAULT} i
	local args=("$ROOT" "$MNT" -f)
	[ $# -gt 0 ] && shift
	if [ -n "$OFS_BACKEND_OPTS" ]; then
		# The capacity the pages store would have, so statfs checks hold on both.
		local bc=256 bs=4G o
		for o in ${opts//,/ }; do
			case $o in
			bucket_count=*) bc=${o#*=} ;;
			bucket_size=*) bs=${o#*=} ;;
			esac
		done
		bs=$(numfmt --from=iec "$bs")
		args+=(-o "$OFS_BACKEND_OPTS,kv_max_bytes=$((bc * bs))")
	fi
	[ -n "$opts" ] && args+=(-o "$opts")
	[ -n "$OFS_META_URI" ] && args+=(-o "meta=$OFS_META_URI")
	# OFS_TRANSPORT=uring: requests over io_uring (ofs_uring_param turned it on).
	[ "${OFS_TRANSPORT:-}" = uring ] && args+=(-o uring)
	# Tests of a full store expect ENOSPC: eviction only where a test asks for it.
	case ",$opts,$*," in *,evict=*) ;; *) args+=(-o evict=off) ;; esac
	if [ -n "$OFS_PID" ]; then
		echo "# ofs_mount: a daemon (pid $OFS_PID) is already running"
		return 1
	fi
	OFS_LAST_OPTS=$opts
	OFS_NMOUNT=$((OFS_NMOUNT + 1))
	LOG="$TESTDIR/daemon.$OFS_NMOUNT.log"
	ofs_track_mnt "$MNT"
	"$OFS" "${args[@]}" "$@" 2>"$LOG" &
	OFS_PID=$!
	OFS_PIDS+=("$OFS_PID")
	echo "$OFS_PID" >>"$TESTDIR/.daemons"
	for ((i = 0; i < OFS_MOUNT_TIMEOUT * 20; i++)); do
		if mountpoint -q "$MNT"; then
			return 0
		fi
		if ! kill -0 "$OFS_PID" 2>/dev/null; then
			break
		fi
		sleep 0.05
	done
	if mountpoint -q "$MNT"; then
		return 0
	fi
	echo "# ofs_mount: no mount at $MNT; daemon log:"
	sed 's/^/#   /' "$LOG"
	if kill -0 "$OFS_PID" 2>/dev/null; then
		kill -9 "$OFS_PID" 2>/dev/null
	fi
	ofs_reap "$OFS_PID"
	OFS_PID=""
	return 1
}

# is_mounted PATH: PATH is a mount point in /proc/mounts.  Unlike
# mountpoint(1), this also sees a dead FUSE mount (whose stat fails).
is_mounted() {
	local _d mp _r
	while read -r _d mp _r; do
		[ "$(printf '%b' "$mp")" == "$1" ] && return 0
	done </proc/mounts
	return 1
}

# The fuse module's enable_uring, which makes the kernel offer io_uring to
# new mounts: ofs_uring_param Y|N sets it (1 when the module has none) and
# the EXIT trap puts it back as it was.
OFS_URING_PARAM=/sys/module/fuse/parameters/enable_uring
OFS_URING_WAS=""
ofs_uring_param() {
	[ -w "$OFS_URING_PARAM" ] || return 1
	[ -n "$OFS_URING_WAS" ] || OFS_URING_WAS=$(cat "$OFS_URING_PARAM")
	echo "$1" >"$OFS_URING_PARAM"
}

ofs_track_mnt() {
	local m
	for m in "${OFS_MNTS[@]}"; do
		[ "$m" == "$1" ] && return 0
	done
	OFS_MNTS+=("$1")
}

# ofs_reap PID: wait for a daemon we started; its status goes to OFS_RC.
ofs_reap() {
	{ wait "$1"; } 2>/dev/null
	OFS_RC=$?
}

# ofs_umount: fusermount3 -u $MNT (retrying while busy), then wait for the
# daemon to save its snapshot and exit.  Returns the daemon's exit status
# (also in OFS_RC); 1 if it could not be unmounted.
ofs_umount() {
	local i
	if [ -z "$OFS_PID" ]; then
		return 0
	fi
	for ((i = 0; i < 100; i++)); do
		fusermount3 -u "$MNT" 2>/dev/null && break
		is_mounted "$MNT" || break
		sleep 0.1
	done
	if is_mounted "$MNT"; then
		echo "# ofs_umount: $MNT still mounted: $(fusermount3 -u "$MNT" 2>&1)"
		return 1
	fi
	for ((i = 0; i < OFS_EXIT_TIMEOUT * 20; i++)); do
		kill -0 "$OFS_PID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$OFS_PID" 2>/dev/null; then
		echo "# ofs_umount: daemon $OFS_PID still running ${OFS_EXIT_TIMEOUT}s after unmount; killing it"
		kill -9 "$OFS_PID" 2>/dev/null
	fi
	ofs_reap "$OFS_PID"
	if [ "$OFS_RC" -gt 128 ]; then
		not_ok "daemon $OFS_PID" "died of signal $((OFS_RC - 128)) (exit status $OFS_RC)"
	fi
	# The suite over io_uring must have run over it.
	if [ "${OFS_TRANSPORT:-}" = uring ] && ! grep -q "uring: requests over io_uring" "$LOG"; then
		not_ok "daemon $OFS_PID served over io_uring" "$(grep uring "$LOG" | tail -n 2)"
	fi
	OFS_PID=""
	return "$OFS_RC"
}

# ofs_kill9: kill -9 the daemon and detach its dead mount.
ofs_kill9() {
	if [ -z "$OFS_PID" ]; then
		return 1
	fi
	kill -9 "$OFS_PID" 2>/dev/null
	ofs_reap "$OFS_PID"
	OFS_PID=""
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	! is_mounted "$MNT"
}

# ofs_remount [OPTS]: clean unmount then mount again (by default with the
# options of the last mount).
ofs_remount() {
	ofs_umount || return 1
	if [ $# -gt 0 ]; then
		ofs_mount "$@"
	else
		ofs_mount "$OFS_LAST_OPTS"
	fi
}

# ofs_sync: fsync the mount's top directory (FUSE fsyncdir), which runs the
# daemon's durability barrier at once; pages freed by unlink, rename or an
# overwrite are only reusable (and counted free) after a barrier.
ofs_sync() {
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
os.close(fd)
' "$MNT"
}

# ofs_free: free pages as statfs reports them, after a barrier (ofs_sync).
ofs_free() {
	ofs_sync >/dev/null 2>&1
	stat -f -c %f "$MNT"
}
# ofs_free_nosync: the same without the barrier.
ofs_free_nosync() { stat -f -c %f "$MNT"; }

# wait_free N [SECONDS]: poll ofs_free (a barrier each time) until it is N;
# a release is asynchronous to close(2), so its pages come back a little later.
wait_free() {
	local want=$1 tries=$(( ${2:-5} * 10 ))
	while [ "$tries" -gt 0 ]; do
		[ "$(ofs_free)" -eq "$want" ] && return 0
		sleep 0.1
		tries=$((tries - 1))
	done
	return 1
}
ofs_blocks() { stat -f -c %b "$MNT"; }

# ofs_fsck [ROOT]: run offloadctl fsck; RC/OUT/ERR as run sets them.
ofs_fsck() {
	local meta=()
	[ -n "$OFS_META_URI" ] && meta=(--meta "$OFS_META_URI")
	if [ "$OFS_BACKEND" == ubsio ]; then
		run "$OFSCTL" fsck "${1:-$ROOT}" "${meta[@]}" \
			--ubsio-lib "$OFS_BUILD/tests/libubsio_kvc.so" --ubsio-ssd-size 0
		return
	fi
	run "$OFSCTL" fsck "${1:-$ROOT}" "${meta[@]}"
}

# ofs_new_store: an empty ROOT, and no database (on PostgreSQL, no schema):
# the next mount makes a new store.
ofs_new_store() {
	rm -rf "$ROOT" && mkdir "$ROOT" || return 1
	[ -z "$OFS_META_URI" ] ||
		psql -X -q -d "$OFS_META_URI" -c "DROP SCHEMA IF EXISTS offloadfs CASCADE" >/dev/null
}

# ofs_sql QUERY: the rows of QUERY (plain SQL both engines take) on the
# store's database, fields separated by '|'.
ofs_sql() {
	if [ -n "$OFS_META_URI" ]; then
		PGOPTIONS="-c search_path=offloadfs" psql -X -q -At -d "$OFS_META_URI" -c "$1"
	else
		sqlite3 "$ROOT/offloadfs.db" "$1"
	fi
}

# check_fsck_clean NAME: offloadctl fsck of the (unmounted) store exits 0,
# says "fsck: clean" and finds the clean-unmount bitmap snapshot identical to
# the bitmaps rebuilt from the mappings (no leaked or doubly used page).
check_fsck_clean() {
	ofs_fsck
	check_eq "$1: fsck exits 0" 0 "$RC"
	if [ "$OFS_BACKEND" == ubsio ]; then
		# No orphans: the KV store holds the recorded values and nothing else.
		check_eq "$1: the KV store holds exactly the recorded values" \
			"$(ofs_sql 'SELECT (SELECT count(*) FROM inodes WHERE skey IS NOT NULL) + (SELECT count(*) FROM extents WHERE skey IS NOT NULL)')" \
			"$(find "$UBSIO_STUB_DIR" -type f ! -name '.tmp-*' | wc -l)"
	else
		check_contains "$1: fsck says the snapshot is identical" \
			"bitmap snapshot: identical to the bitmaps rebuilt from the mappings" "$OUT"
	fi
	check_contains "$1: fsck: clean" "fsck: clean" "$OUT"
	[ "$RC" -eq 0 ] || note "fsck output: ${OUT//$'\n'/ | } ${ERR//$'\n'/ | }"
}

# bg_track PID: a helper process the cleanup must kill.
bg_track() {
	OFS_BG+=("$1")
}

# bg_kill PID: end a helper we started.
bg_kill() {
	kill -9 "$1" 2>/dev/null
	{ wait "$1"; } 2>/dev/null
	return 0
}

# ---- commands run as another user ----

# nobody_ready [bins]: let user nobody (65534) reach $TESTDIR (made 0755);
# with bins, also copies of offloadfs and offloadctl it can run, as
# $OFS_NOBODY and $OFSCTL_NOBODY in $TESTDIR/bin: the build may be where
# nobody cannot enter (a checkout under /root, 0700).  1 when nobody still
# cannot reach them (a $TMPDIR out of its reach), the reason in
# $NOBODY_WHY for the caller's skip.
nobody_ready() {
	local _t="$TESTDIR"
	chmod 0755 "$TESTDIR"
	if [ "${1:-}" == bins ]; then
		mkdir -p "$TESTDIR/bin" && cp "$OFS" "$OFSCTL" "$TESTDIR/bin/" &&
			chmod 0755 "$TESTDIR/bin" "$TESTDIR/bin/offloadfs" "$TESTDIR/bin/offloadctl" || {
			NOBODY_WHY="cannot copy the binaries into $TESTDIR/bin"
			return 1
		}
		OFS_NOBODY="$TESTDIR/bin/offloadfs" OFSCTL_NOBODY="$TESTDIR/bin/offloadctl"
		_t="$OFSCTL_NOBODY"
	fi
	if ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$_t"; then
		NOBODY_WHY="user nobody cannot reach $_t (a directory above it is closed to others)"
		return 1
	fi
}

# ---- a process holding a file open ----

# holder_start PATH MODE [DATAFILE]: start a python3 process that opens PATH
# (MODE r: O_RDONLY; w: O_RDWR|O_CREAT|O_TRUNC; rw: O_RDWR), writes the bytes
# of DATAFILE when given, and then holds the descriptor until told
# otherwise: holder_read OUT (pread the whole file through the held
# descriptor into OUT), holder_close (close it and exit), holder_kill.
# Sets HOLDER_PID; returns 0 once the file is open (and written), 1 if the
# open or the write failed (the error is in $HOLDER_DIR/err).
HOLDER_N=0
holder_start() {
	HOLDER_N=$((HOLDER_N + 1))
	HOLDER_DIR="$TESTDIR/holder.$HOLDER_N"
	mkdir -p "$HOLDER_DIR"
	mkfifo "$HOLDER_DIR/fifo"
	# Read-write: never blocks, whatever the python side does.
	exec {HOLDER_FD}<>"$HOLDER_DIR/fifo"
	python3 -c '
import os, sys
path, mode, data, d = sys.argv[1:5]
flags = {"r": os.O_RDONLY, "w": os.O_RDWR | os.O_CREAT | os.O_TRUNC, "rw": os.O_RDWR}[mode]
fd = os.open(path, flags, 0o644)
if data:
    buf = open(data, "rb").read()
    off = 0
    while off < len(buf):
        off += os.write(fd, buf[off:])
open(d + "/ready", "w").close()
with open(d + "/fifo") as f:
    for line in f:
        cmd = line.split(" ", 1)
        if cmd[0] == "read":
            out = cmd[1].rstrip("\n")
            size = os.fstat(fd).st_size
            got = bytearray()
            while len(got) < size:
                chunk = os.pread(fd, size - len(got), len(got))
                if not chunk:
                    break
                got += chunk
            open(out, "wb").write(got)
            open(out + ".done", "w").close()
        elif cmd[0].strip() == "close":
            os.close(fd)
            open(d + "/closed", "w").close()
            break
' "$1" "$2" "${3:-}" "$HOLDER_DIR" 2>"$HOLDER_DIR/err" &
	HOLDER_PID=$!
	bg_track "$HOLDER_PID"
	local i
	for ((i = 0; i < 200; i++)); do
		[ -e "$HOLDER_DIR/ready" ] && return 0
		kill -0 "$HOLDER_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ -e "$HOLDER_DIR/ready" ]
}

# holder_read OUT: have the holder copy the file it holds into OUT.
holder_read() {
	rm -f "$1" "$1.done"
	echo "read $1" >&"$HOLDER_FD"
	wait_until 10 test -e "$1.done"
}

# holder_close: have the holder close its descriptor and exit.
holder_close() {
	echo close >&"$HOLDER_FD"
	wait_until 10 test -e "$HOLDER_DIR/closed"
	local r=$?
	{ wait "$HOLDER_PID"; } 2>/dev/null
	exec {HOLDER_FD}>&-
	return $r
}

# holder_kill: kill -9 the holder (its descriptor is closed by the kernel).
holder_kill() {
	bg_kill "$HOLDER_PID"
	exec {HOLDER_FD}>&- 2>/dev/null
	return 0
}

# ---- the end ----

# ofs_bail WHY: a failure the rest of the script cannot go on from.
ofs_bail() {
	not_ok "bail out" "$*"
	ofs_done
}

ofs_done() {
	# A meta= the daemon took for a file path would pass every other check on sqlite.
	if [ -n "$OFS_META_URI" ] && [ "$OFS_NMOUNT" -gt 0 ]; then
		if [ -e "$ROOT/offloadfs.db" ] || [ "$(ofs_sql 'SELECT count(*) > 0 FROM inodes')" != t ]; then
			not_ok "the metadata is in PostgreSQL" \
				"ROOT: $(ls "$ROOT" | tr '\n' ' '); the schema: $(ofs_sql 'SELECT count(*) FROM inodes' 2>&1)"
		else
			ok "the metadata is in PostgreSQL"
		fi
	fi
	if [ "$T_FAIL" -gt 0 ]; then
		# The daemon logs' unusual lines (not the mount/unmount notices).
		local f
		for f in "$TESTDIR"/daemon.*.log; do
			[ -s "$f" ] || continue
			grep -qvE '^offloadfs: (created|mounted|unmounted)[: ]' "$f" || continue
			echo "# ${f##*/}:"
			grep -vE '^offloadfs: (created|mounted|unmounted)[: ]' "$f" | tail -n 20 | sed 's/^/#   /'
		done
	fi
	[ "$T_SKIP" -gt 0 ] && echo "# $T_SKIP skipped"
	echo "$T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
	exit $?
}

ofs_cleanup() {
	local rc=$? p m i left=0
	trap - EXIT INT TERM
	cd / || true
	kill -9 "$OFS_WATCHDOG" 2>/dev/null
	{ wait "$OFS_WATCHDOG"; } 2>/dev/null
	for p in "${OFS_BG[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			kill -9 "$p" 2>/dev/null
		fi
		{ wait "$p"; } 2>/dev/null
	done
	for m in "${OFS_MNTS[@]}"; do
		for ((i = 0; i < 20; i++)); do
			is_mounted "$m" || break
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || sleep 0.1
		done
	done
	for p in "${OFS_PIDS[@]}"; do
		for ((i = 0; i < 100; i++)); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.05
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "# cleanup: killing leftover daemon $p"
			kill -9 "$p" 2>/dev/null
		fi
		{ wait "$p"; } 2>/dev/null
	done
	[ -n "$OFS_URING_WAS" ] && echo "$OFS_URING_WAS" >"$OFS_URING_PARAM"
	# After every daemon is gone: nothing holds a connection to it then.
	if [ -n "$OFS_PG_DIR" ] && ! "$OFS_TESTS_DIR/../../scripts/pg" stop "$OFS_PG_DIR" >/dev/null; then
		echo "# cleanup: cannot stop the PostgreSQL server in $OFS_PG_DIR"
		[ "$rc" -eq 0 ] && rc=1
	fi
	# Never recurse into a mount that is still there.
	while read -r _ m _; do
		case "$m" in
		"$TESTDIR"/*) left=1 ;;
		esac
	done </proc/mounts
	if [ "$left" -eq 0 ]; then
		rm -rf --one-file-system "$TESTDIR"
	else
		echo "# cleanup: something is still mounted under $TESTDIR; left in place"
		[ "$rc" -eq 0 ] && rc=1
	fi
	exit "$rc"
}

trap ofs_cleanup EXIT
trap 'not_ok "interrupted" "SIGINT"; ofs_done' INT
trap 'not_ok "interrupted" "SIGTERM"; ofs_done' TERM
# OFS_TRANSPORT=uring: the suite over io_uring; the kernel offers it from here on.
if [ "${OFS_TRANSPORT:-}" = uring ] && ! ofs_uring_param Y; then
	skip "the io_uring transport" "the fuse module has no enable_uring"
	ofs_done
fi

# The watchdog: a hung daemon would hang the script in a system call that no
# signal to the script can interrupt.  After OFS_TEST_TIMEOUT seconds it
# kills -9 the daemons this script started (which aborts their FUSE
# connections, so the hung call fails with ENOTCONN) and then stops the
# script, whose EXIT trap cleans up.  It sleeps with the read builtin, so
# killing it leaves nothing behind.
mkfifo "$TESTDIR/.watchdog"
(
	exec {_wd}<>"$TESTDIR/.watchdog"
	read -r -t "$OFS_TEST_TIMEOUT" -u "$_wd" _
	echo "not ok - watchdog: $OFS_TEST_NAME still running after ${OFS_TEST_TIMEOUT}s; killing its daemons" >&2
	while read -r _p; do
		kill -9 "$_p" 2>/dev/null
	done <"$TESTDIR/.daemons"
	kill -TERM $$
) &
OFS_WATCHDOG=$!

if [ "$OFS_META" == pg ]; then
	# The server runs as the postgres user, which must reach its directory.
	chmod 0711 "$TESTDIR"
	OFS_PG_DIR="$TESTDIR/pg"
	OFS_META_URI=$("$OFS_TESTS_DIR/../../scripts/pg" start "$OFS_PG_DIR" 2>"$TESTDIR/.pgerr") || {
		OFS_META_URI=""
		ofs_bail "scripts/pg start: $(cat "$TESTDIR/.pgerr")"
	}
	note "metadata in PostgreSQL: $OFS_META_URI"
elif [ "$OFS_META" != sqlite ]; then
	ofs_bail "OFS_META=$OFS_META: sqlite or pg"
fi
