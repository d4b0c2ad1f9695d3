#!/usr/bin/env bash
# t-uring.sh: requests over io_uring (fuse/uring.c).  With the fuse
# module's enable_uring on, a mount serves its requests on rings (the log
# says so, offloadfs_uring_requests_total counts them) by default and not
# with -o nouring; with it off, -o uring falls back to /dev/fuse and says
# why.  Over the rings: the largest requests (1 MiB writes and reads),
# fsyncs waiting for their barrier while other requests of the same CPU go
# on, a kill -9 and the recovery after it.  The mount-uring suite runs
# other scripts over the rings too (OFS_TRANSPORT=uring).
set -u
. "$(dirname "$0")/lib.sh"

if ! ofs_uring_param Y; then
	skip "requests over io_uring" "the fuse module has no enable_uring (Linux 6.14 and later)"
	ofs_done
fi

served() {
	getfattr --only-values -n user.offload.metrics "$MNT" 2>/dev/null |
		awk '$1 == "offloadfs_uring_requests_total" {print $2}'
}

# enable_uring on, default options: the rings.
ofs_mount || ofs_bail "cannot mount"
mkdir "$MNT/t"
check "a write and a read back" bash -c "echo hello >'$MNT/t/a' && [ \"\$(cat '$MNT/t/a')\" = hello ]"
check "the rings started" wait_until 5 grep -q "uring: requests over io_uring" "$LOG"
N0=$(served)
for i in $(seq 20); do stat "$MNT/t/a" >/dev/null; cat "$MNT/t/a" >/dev/null; done
N1=$(served)
check "requests come over the rings (offloadfs_uring_requests_total: $N0, then $N1)" \
	test "${N1:-0}" -ge $((${N0:-0} + 20))

# The largest requests: a 1 MiB write and read fill an entry's payload.
head -c $((3 << 20)) /dev/urandom >"$TESTDIR/big"
check "1 MiB writes (O_DIRECT: one request each)" \
	dd if="$TESTDIR/big" of="$MNT/t/big" bs=1M oflag=direct status=none
check "1 MiB reads give the bytes back" \
	bash -c "dd if='$MNT/t/big' bs=1M iflag=direct status=none | cmp - '$TESTDIR/big'"

# Handlers that wait (fsync: its barrier) leave the CPU's other requests go
# on: writers with fsync and readers, all on one CPU.
run timeout 120 python3 - "$MNT/t" <<'EOF'
import os, sys
d = sys.argv[1]
os.sched_setaffinity(0, {0})
pids = []
for w in range(1, 7):
    pid = os.fork()
    if pid == 0:
        try:
            for i in range(40):
                p = "%s/w%d_%d" % (d, w, i)
                data = bytes([w, i % 256]) * 8192
                with open(p, "wb") as f:
                    f.write(data)
                    if i % 2 == 0:
                        os.fsync(f.fileno())
                with open(p, "rb") as f:
                    assert f.read() == data, p
                os.stat(p)
        except BaseException as e:
            print(e, file=sys.stderr)
            os._exit(1)
        os._exit(0)
    pids.append(pid)
sys.exit(max(os.waitpid(p, 0)[1] != 0 for p in pids))
EOF
check_eq "writers with fsync and readers on one CPU: all done, all read back" "0 " "$RC $ERR"
check_eq "their files" 240 "$(find "$MNT/t" -name 'w*' -type f | wc -l)"

# kill -9: the recovery finds what was closed.
sync_out=$(cat "$MNT/t/a")
ofs_kill9
ofs_mount || ofs_bail "cannot mount after kill -9"
check_grep_log "after a kill -9 over the rings: recovery" "$OFS_LOG_REBUILT"
check_eq "the closed file is there" "$sync_out" "$(cat "$MNT/t/a" 2>&1)"
check "the 1 MiB file too" cmp "$MNT/t/big" "$TESTDIR/big"
check "and the fsync'd ones" cmp <(head -c 16384 "$MNT/t/w3_0") <(python3 -c "import sys; sys.stdout.buffer.write(bytes([3, 0]) * 8192)")
ofs_umount
check_eq "a clean unmount over the rings" 0 "$OFS_RC"

# A start that fails half-way (no file descriptor left for the last ring):
# the kernel sends requests over the rings once every CPU queue has an
# entry, so each entry must have its thread serving it; the mount serves
# over the threads that did start.  A store of its own, whose daemon may
# lack descriptors for its snapshot.
ROOT_MAIN=$ROOT
ROOT="$TESTDIR/root-fd"
mkdir "$ROOT"
ofs_mount || ofs_bail "cannot mount the second store"
mkdir "$MNT/t"
ring_fds=$(find /proc/"$OFS_PID"/fd -lname 'anon_inode:\[io_uring\]' -printf '%f\n' | sort -n)
nrings=$(echo "$ring_fds" | grep -c .)
per=$(sed -n 's/.*queues of \([0-9]*\) threads.*/\1/p' "$LOG")
ofs_umount
libgcc=$(ldconfig -p | awk '$1 == "libgcc_s.so.1" {print $NF; exit}')
if [ "${per:-0}" -lt 2 ] || [ -z "$libgcc" ]; then
	skip "a start that fails half-way" "one ring thread per queue, or no libgcc_s"
else
	# pthread_cancel loads libgcc_s at the end, when no descriptor is left.
	printf '#!/bin/sh\nulimit -n %s\nLD_PRELOAD=%s exec "%s" "$@"\n' \
		"$(($(echo "$ring_fds" | head -n 1) + nrings - 1))" "$libgcc" "$OFS" >"$TESTDIR/ofs-fdlimit"
	chmod +x "$TESTDIR/ofs-fdlimit"
	OFS_REAL=$OFS
	OFS="$TESTDIR/ofs-fdlimit"
	ofs_mount || ofs_bail "cannot mount with a file descriptor limit"
	OFS=$OFS_REAL
	rm -f "$TESTDIR/fd-probe"
	(stat "$MNT/t" >/dev/null 2>&1 && echo x >"$MNT/t/f" && cat "$MNT/t/f" >"$TESTDIR/fd-probe") &
	probe=$!
	if wait_until 10 test -s "$TESTDIR/fd-probe"; then
		ok "one ring short of its file descriptors: requests are answered"
		check_grep_log "one ring short: it says so" "ring threads serve"
		note "$(grep -h 'ring threads serve' "$LOG")"
		ofs_umount
	else
		not_ok "one ring short of its file descriptors: requests are answered" \
			"no answer in 10 s; $(grep uring "$LOG" | tr '\n' ' ')"
		ofs_kill9 # ends the requests that wait
	fi
	wait "$probe"
fi
ROOT=$ROOT_MAIN

# -o nouring: /dev/fuse, nothing over a ring.
ofs_mount "$OFS_OPTS_DEFAULT,nouring" || ofs_bail "cannot mount with nouring"
check "nouring: the files read back" cmp "$MNT/t/big" "$TESTDIR/big"
check_eq "nouring: no request over a ring" 0 "$(served)"
check "nouring: no ring" bash -c "! grep -q 'uring:' '$LOG'"
ofs_umount

# enable_uring off: -o uring says why and serves through /dev/fuse.
ofs_uring_param N
ofs_mount "$OFS_OPTS_DEFAULT,uring" || ofs_bail "cannot mount with uring, enable_uring off"
check "uring without enable_uring: the files read back" cmp "$MNT/t/big" "$TESTDIR/big"
check_grep_log "uring without enable_uring: logged" "the kernel does not offer it"
check_eq "uring without enable_uring: no request over a ring" 0 "$(served)"
ofs_umount
check_fsck_clean "after mounts over the rings and without"
ofs_done
