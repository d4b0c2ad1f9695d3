#!/usr/bin/env bash
# t-pgfault: the PostgreSQL server's faults while a store is mounted on it
# (OFS_META=pg; the test's own server, scripts/pg): restarts (fast and
# immediate), an outage shorter and longer than meta_timeout, backends
# dropped (pg_terminate_backend) while writes run, and a full disk under
# the store's tables.  Every file closed before a fault is there after it,
# unless no barrier covered it when the server crashed, in which case the
# daemon says so and fails every fsync until a remount recovers the
# store; service resumes without a remount; fsck --meta is clean after.
# Also refusals: meta_timeout's values, a wrong password and another
# ROOT on the store's database at mount, another store behind the URI
# when the daemon connects again.
. "$(dirname "$0")/lib.sh"

if [ "$OFS_META" != pg ]; then
	skip "PostgreSQL faults" "needs OFS_META=pg"
	ofs_done
fi
PGBIN=/usr/lib/postgresql/15/bin
# pg_ctl MODE ARGS: the test's server, as its postgres user.
pgctl() { runuser -u postgres -- "$PGBIN/pg_ctl" -D "$OFS_PG_DIR/data" -l "$OFS_PG_DIR/server.log" -w -t 60 "$@" >/dev/null || note "pg_ctl $*: failed: $(tail -n 5 "$OFS_PG_DIR/server.log")"; }
pgsql() { psql -X -q -At -d "$OFS_META_URI" -c "$1"; }
now_ms() { date +%s%3N; }
# put NAME SIZE: a random file in $REF and a copy through the mount (closed).
put() { mkrand "$REF/$1" "$2" && cp "$REF/$1" "$MNT/t/$1"; }
# same NAME: the mount's copy matches the reference.
same() { cmp -s "$REF/$1" "$MNT/t/$1"; }
# fsync_rc PATH: OK, or the errno name of fsync's failure.
fsync_rc() { pyerr 'fd = os.open(a[1], os.O_RDONLY); os.fsync(fd); os.close(fd)' "$1"; }

# ---- meta_timeout's values, refused before anything is touched ----
for v in 0 -1 abc 2x 86401 ""; do
	run timeout -s TERM 10 "$OFS" "$ROOT" "$MNT" -f -o "meta=$OFS_META_URI,meta_timeout=$v"
	check_contains "meta_timeout='$v' is refused" "invalid meta_timeout '$v'" "$ERR"
done
run timeout -s TERM 10 "$OFS" "$ROOT" "$MNT" -f -o "meta=$ROOT/x.db,meta_timeout=5"
check_contains "meta_timeout without a server is refused" "meta_timeout needs meta=postgresql" "$ERR"
check_eq "the refusals made no store" "" "$(ls -A "$ROOT")"

ofs_mount "$OFS_OPTS_DEFAULT,meta_timeout=10" || ofs_bail "mount failed"
mkdir "$MNT/t"
for i in 1 2 3; do put "a$i" $((PAGE * i + 17)); done
put held $((PAGE * 3))
# A file held open and read once: its mapping and page sums are in memory.
holder_start "$MNT/t/held" r || ofs_bail "holder: $(cat "$HOLDER_DIR/err")"
holder_read "$TESTDIR/held.0"
check_cmp "the held file reads back" "$REF/held" "$TESTDIR/held.0"
check_eq "fsync before the faults" OK "$(fsync_rc "$MNT/t/a1")"

# ---- a fast restart: the daemon connects again by itself ----
t0=$(now_ms)
pgctl -m fast restart
put b1 1000
t1=$(now_ms)
check "after a fast restart a create and write work without a remount" same b1
note "first create after the fast restart: $((t1 - t0)) ms after pg_ctl restart began"
check_grep_log "the daemon logs that it connected again" "connected again after"
check_eq "after a fast restart fsync works (nothing was lost)" OK "$(fsync_rc "$MNT/t/b1")"

# ---- an immediate restart with every commit behind a barrier ----
ofs_sync
pgctl -m immediate restart
put b2 2000
check "after an immediate restart a create works" same b2
check_eq "with nothing unsynced before the crash, fsync works after it" OK "$(fsync_rc "$MNT/t/b2")"
for f in a1 a2 a3 held b1; do
	check "$f is there after the restarts" same "$f"
done

# ---- an outage shorter than meta_timeout: a create waits, then succeeds ----
pgctl -m fast stop
echo 3 >/proc/sys/vm/drop_caches
holder_read "$TESTDIR/held.1"
check_cmp "with the server down, a read of a held file works" "$REF/held" "$TESTDIR/held.1"
mkrand "$REF/c1" 5000
t0=$(now_ms)
( cp "$REF/c1" "$MNT/t/c1"; echo $? >"$TESTDIR/c1.rc" ) &
bg_track $!
sleep 2
check_eq "the create waits while the server is down" "" "$(cat "$TESTDIR/c1.rc" 2>/dev/null)"
pgctl start
wait_until 15 test -s "$TESTDIR/c1.rc"
t1=$(now_ms)
check_eq "the waiting create succeeds once the server is back" 0 "$(cat "$TESTDIR/c1.rc" 2>/dev/null)"
check "and its file is right" same c1
note "create during a 2 s outage: done $((t1 - t0)) ms after it began"
check_cmp "the held file reads back after the outage" "$REF/held" "$TESTDIR/held.1"
holder_close

# ---- an outage longer than meta_timeout: EIO, then service resumes ----
ofs_remount "$OFS_OPTS_DEFAULT,meta_timeout=2" || ofs_bail "remount failed"
for f in a1 a2 a3 held b1 b2 c1; do
	check "$f is there after a remount" same "$f"
done
pgctl -m fast stop
t0=$(now_ms)
r=$(pyerr 'fd = os.open(a[1], os.O_CREAT | os.O_WRONLY, 0o644); os.write(fd, b"x"); os.close(fd)' "$MNT/t/d1")
t1=$(now_ms)
check_eq "with the server down past meta_timeout=2 a create fails with EIO" EIO "$r"
el=$((t1 - t0))
note "the create failed after $el ms (meta_timeout=2)"
check "it failed after about meta_timeout (1.9..6 s)" test "$el" -ge 1900 -a "$el" -le 6000
check_grep_log "the log names the URI without a password and the timeout" \
	"${OFS_META_URI}: no connection to the server within meta_timeout (2 s)"
t0=$(now_ms)
r=$(pyerr 'open(a[1], "w").close()' "$MNT/t/d2")
t1=$(now_ms)
check_eq "a second create while it is still down fails too" EIO "$r"
check "and without waiting meta_timeout again" test $((t1 - t0)) -lt 1900
pgctl start
t0=$(now_ms)
wait_until 10 eval "pyerr 'open(a[1], \"w\").close()' '$MNT/t/d3' | grep -q OK"
t1=$(now_ms)
check "once the server is back a create works without a remount" test -e "$MNT/t/d3"
note "first create after the server came back: $((t1 - t0)) ms"
put d4 70000
check "a write after the outage works" same d4
check_eq "and fsync works (the outage lost nothing)" OK "$(fsync_rc "$MNT/t/d4")"

# ---- a server that stops answering (every process stopped): statements are given up ----
pm=$(head -n 1 "$OFS_PG_DIR/data/postmaster.pid")
pgpids=("$pm" $(pgrep -P "$pm"))
kill -STOP "${pgpids[@]}"
t0=$(now_ms)
r=$(pyerr 'open(a[1], "w").close()' "$MNT/t/s1")
t1=$(now_ms)
kill -CONT "${pgpids[@]}"
check_eq "with the server stopped (SIGSTOP), a create fails with EIO" EIO "$r"
note "the create failed after $((t1 - t0)) ms (meta_timeout=2, the server silent)"
# Each call that needs the server first waits out meta_timeout of silence or
# a connect that gets no answer, behind the background's: a few meta_timeouts.
check "after meta_timeout of silence, and not hanging (1.9..20 s)" \
	test $((t1 - t0)) -ge 1900 -a $((t1 - t0)) -le 20000
check_grep_log "the log says the server did not answer" "no answer from the server for 2 s"
wait_until 10 eval "pyerr 'open(a[1], \"w\").close()' '$MNT/t/s2' | grep -q OK"
check "once it runs again a create works" test -e "$MNT/t/s2"
check "and the files before it are there" same d4

# ---- backends dropped while writes run ----
: >"$TESTDIR/w.done"
python3 - "$MNT/t" "$REF" "$TESTDIR/w.done" <<'PY' &
import os, sys
d, ref, done = sys.argv[1:4]
for i in range(300):
    data = os.urandom(1000 + i * 37)
    name = "w%d" % i
    open(os.path.join(ref, name), "wb").write(data)
    try:
        fd = os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.close(fd)
        res = "ok"
    except OSError as e:
        res = "err %d" % e.errno
    with open(done, "a") as f:
        f.write("%s %s\n" % (name, res))
PY
wpid=$!
bg_track "$wpid"
for k in 1 2 3 4 5; do
	sleep 0.3
	pgsql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()" >/dev/null
done
wait "$wpid"
nok=$(grep -c ' ok$' "$TESTDIR/w.done")
nerr=$(grep -vc ' ok$' "$TESTDIR/w.done")
note "writes while backends were dropped: $nok closed, $nerr failed ($(grep -v ' ok$' "$TESTDIR/w.done" | head -3 | tr '\n' ' '))"
check "most writes succeed while backends are dropped" test "$nok" -ge 250
bad=0
while read -r n r; do
	[ "$r" == ok ] || continue
	same "$n" || bad=$((bad + 1))
done <"$TESTDIR/w.done"
check_eq "every closed file is right after the drops" 0 "$bad"
put e1 3000
check "a write after the drops works" same e1
check_grep_log "the log says the connection was lost" "the connection to the server was lost"

# ---- a crash of the server with commits no barrier covered ----
ofs_remount "$OFS_OPTS_DEFAULT,meta_timeout=10,sync_interval=0" || ofs_bail "remount failed"
bad=0
while read -r n r; do
	[ "$r" == ok ] || continue
	same "$n" || bad=$((bad + 1))
done <"$TESTDIR/w.done"
check_eq "every file closed during the drops is there after a remount" 0 "$bad"
put f1 4000
pgctl -m immediate restart
put f2 4000
check "after a crash a create works" same f2
check_eq "fsync after a crash that may have taken unsynced commits fails" EIO "$(fsync_rc "$MNT/t/f2")"
check_grep_log "the log says what may be lost" "metadata commits since the last durable barrier may be lost"
ofs_umount
ofs_mount "$OFS_OPTS_DEFAULT,meta_timeout=10" || ofs_bail "mount after the crash failed"
check_grep_log "the store is recovered as after an unclean stop" "mounted unclean"
for f in a1 a2 a3 held b1 b2 c1 d4 e1; do
	check "$f (synced before the crash) is there" same "$f"
done
check_eq "fsync works after the remount" OK "$(fsync_rc "$MNT/t/e1")"
ofs_umount
check_fsck_clean "offloadctl fsck ROOT --meta URI after the faults"

# ---- the server's disk full: the store's tables on a small filesystem of their own ----
SMALL="$TESTDIR/small"
# The server holds the tablespace's files open: it stops before the filesystem goes.
small_cleanup() {
	local rc=$?
	if mountpoint -q "$SMALL" 2>/dev/null; then
		[ -n "$OFS_PID" ] && kill -9 "$OFS_PID" 2>/dev/null
		pgctl -m immediate stop 2>/dev/null
		umount -l "$SMALL"
	fi
	(exit "$rc")
	ofs_cleanup
}
trap small_cleanup EXIT
mkdir "$SMALL"
truncate -s 48M "$TESTDIR/small.img"
if ! mkfs.ext4 -q -m 0 "$TESTDIR/small.img" || ! mount -o loop "$TESTDIR/small.img" "$SMALL"; then
	skip "the server's disk full" "no loop device for a small ext4 filesystem"
	ofs_done
fi
mkdir "$SMALL/ts" && chown postgres: "$SMALL/ts"
pgsql "CREATE TABLESPACE small LOCATION '$SMALL/ts'"
pgsql "ALTER TABLE ALL IN TABLESPACE pg_default SET TABLESPACE small"
pgsql "ALTER INDEX ALL IN TABLESPACE pg_default SET TABLESPACE small"
check_eq "the store's tables are on the small filesystem" 0 \
	"$(pgsql "SELECT count(*) FROM pg_tables WHERE schemaname = 'offloadfs' AND tablespace IS DISTINCT FROM 'small'")"
ofs_mount "$OFS_OPTS_DEFAULT,meta_timeout=10" || ofs_bail "mount on the small tablespace failed"
mkdir "$MNT/full"
dd if=/dev/zero of="$SMALL/filler" bs=1M 2>/dev/null
sync
# Creates until one fails: the tables grow into the full disk within a few hundred rows.
r=$(python3 - "$MNT/full" <<'PY'
import errno, os, sys
d = sys.argv[1]
for i in range(20000):
    made = 0
    try:
        fd = os.open(os.path.join(d, "n%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644)
        made = 1
        os.write(fd, b"y" * 100)
        os.close(fd)
    except OSError as e:
        # A create that made its file and failed at the close counts as made.
        print(errno.errorcode.get(e.errno, e.errno), i + made)
        break
else:
    print("none", i)
PY
)
note "creates on the server's full disk: the first failure: $r"
check_eq "a create on the server's full disk fails with ENOSPC" ENOSPC "${r% *}"
nmade=${r#* }
# (The next one may fit: the server reuses the room of what it rolled back.)
check "a file made before the disk filled reads back" same a1
# Every row change writes a new row version: a delete or rename may need room too.
rd=$(pyerr 'os.unlink(a[1])' "$MNT/full/n00000")
rr=$(pyerr 'os.rename(a[1], a[2])' "$MNT/full/n00001" "$MNT/full/renamed")
note "on the server's full disk: unlink $rd, rename $rr"
check "a delete on the full disk works or gets ENOSPC" test "$rd" == OK -o "$rd" == ENOSPC
check "a rename on the full disk works or gets ENOSPC" test "$rr" == OK -o "$rr" == ENOSPC
rm -f "$SMALL/filler"
sync
check "once the disk has room the delete works" rm -f "$MNT/full/n00000"
[ "$rr" == OK ] || mv "$MNT/full/n00001" "$MNT/full/renamed"
check "and the rename" test -e "$MNT/full/renamed" -a ! -e "$MNT/full/n00001"
put g1 5000
check "once the disk has room a create and write work without a remount" same g1
r=$(pyerr 'open(a[1], "w").close()' "$MNT/full/another")
check_eq "and another create works" OK "$r"
check_eq "fsync works again" OK "$(fsync_rc "$MNT/t/g1")"
# Less the one deleted and the one renamed.
check_eq "the files made before the disk filled are there" "$((nmade - 2))" \
	"$(find "$MNT/full" -name 'n*' | wc -l)"
ofs_umount
check_fsck_clean "fsck after the full disk"
# The tables back where they were, and the small filesystem gone.
pgsql "ALTER TABLE ALL IN TABLESPACE small SET TABLESPACE pg_default"
pgsql "ALTER INDEX ALL IN TABLESPACE small SET TABLESPACE pg_default"
pgsql "DROP TABLESPACE small"
umount "$SMALL" || note "cannot unmount $SMALL"
trap ofs_cleanup EXIT

# ---- refusals at mount on PostgreSQL ----
pwuri=${OFS_META_URI/user=postgres/user=ofs_pw}
run env PGPASSWORD=wrong timeout -s TERM 10 "$OFS" "$ROOT" "$MNT" -f -o "meta=$pwuri"
check_contains "a wrong password: the mount is refused naming the URI" "cannot connect to $pwuri" "$ERR"
check_contains "and libpq's reason" "password authentication failed" "$ERR"
mkdir "$TESTDIR/root2"
run timeout -s TERM 10 "$OFS" "$TESTDIR/root2" "$MNT" -f -o "meta=$OFS_META_URI"
rc2=$RC err2=$ERR
check "another ROOT on this store's database: the mount is refused" test "$rc2" -ne 0
check_contains "naming the database and its store" "$OFS_META_URI is the database of store" "$err2"
check_eq "and it made nothing in that ROOT" "" "$(ls -A "$TESTDIR/root2")"

# ---- another store behind the URI when the daemon connects again ----
ofs_mount "$OFS_OPTS_DEFAULT,meta_timeout=5" || ofs_bail "mount failed"
check "mounted again after the full disk" same g1
id=$(pgsql "SELECT v FROM offloadfs.store WHERE k = 'store_id'")
pgsql "UPDATE offloadfs.store SET v = '0123456789abcdef0123456789abcdef' WHERE k = 'store_id'"
pgsql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()" >/dev/null
r=$(pyerr 'open(a[1], "w").close()' "$MNT/t/h1")
check_eq "with another store's id behind the URI, a create fails" EIO "$r"
check_grep_log "the log says another store answers" "another store answers there now"
pgsql "UPDATE offloadfs.store SET v = '$id' WHERE k = 'store_id'"
r=$(pyerr 'open(a[1], "w").close()' "$MNT/t/h2")
check_eq "and the daemon stays off it" EIO "$r"
ofs_umount
ofs_mount "$OFS_OPTS_DEFAULT" || ofs_bail "mount after the fence failed"
check "a remount serves the store again" same g1
ofs_umount

ofs_done
