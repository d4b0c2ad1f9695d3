#!/usr/bin/env bash
# t-readback.sh: a block read back after its put.  The release of a
# write-only create's handle stores the put's bytes in the kernel's page
# cache, so the get after the put reads them with no READ reaching the
# daemon; overwrites and unlinks racing that store never leave old bytes
# in the cache; a stat after a get is answered by the kernel (an open's
# recency does not drop its cached attributes).
set -u
. "$(dirname "$0")/lib.sh"

GEOM="bucket_count=2,bucket_size=64M"

metric() { # metric NAME: its value from the live metrics of the mount
	getfattr --only-values -n user.offload.metrics "$MNT" 2>/dev/null |
		awk -v n="$1" '$1 == n {print $2}'
}
# count_op OPCODE LINE: requests of that opcode in the -d log after line LINE
count_op() { tail -n +"$(($2 + 1))" "$LOG" | grep -oE 'opcode: [A-Z_]+' | awk '{print $2}' | grep -cx "$1"; }
# put PATH REF: a write-only create, as KV clients put a block
put() { python3 -c 'import sys; open(sys.argv[1], "wb").write(open(sys.argv[2], "rb").read())' "$1" "$2"; }

ofs_mount "$GEOM" -d || ofs_bail "cannot mount"
mkdir "$MNT/t"

# ---- the get after a put: the bytes are in the kernel's cache already ----
mkrand "$REF/a" 200000
p0=$(metric offloadfs_prefills_total)
check "a put" put "$MNT/t/a" "$REF/a"
# The release is asynchronous: give it the time to run.
stored() { [ "$(metric offloadfs_prefills_total)" -gt "$1" ]; }
check "its release stores its bytes in the kernel's cache, before any get" wait_until 5 stored "$p0"
mark=$(wc -l <"$LOG")
check_cmp "the get after the put reads the put's bytes" "$REF/a" "$MNT/t/a"
sleep 0.2
check_eq "no READ reached the daemon" 0 "$(count_op READ "$mark")"
check_eq "the get's open stored nothing more" $((p0 + 1)) "$(metric offloadfs_prefills_total)"

# ---- a stat after a get is answered by the kernel ----
mkrand "$REF/s" 100000
put "$MNT/t/s" "$REF/s"
stat "$MNT/t/s" >/dev/null # the put's WRITE made the kernel's attributes stale: one GETATTR
sleep 0.3
mark=$(wc -l <"$LOG")
check_cmp "a get" "$REF/s" "$MNT/t/s"
sleep 1.5 # a group-commit tick, which sends the invalidations queued
stat "$MNT/t/s" >/dev/null
stat "$MNT/t/s" >/dev/null
check_eq "the stats after the get sent no GETATTR" 0 "$(count_op GETATTR "$mark")"
check_eq "nor a READ" 0 "$(count_op READ "$mark")"
ofs_umount

# ---- overwrites and unlinks racing the store: never old bytes ----
# Each round puts a block and, at once, while its release may be storing
# it, overwrites it (O_TRUNC, or a new file renamed over it), or unlinks it
# and puts another under the name; readers race both.  Then every read
# must show the last put.
ofs_mount "$GEOM" || ofs_bail "cannot mount"
run python3 - "$MNT/t" <<'EOF'
import os, sys, threading
d = sys.argv[1]
def put(path, data):
    with open(path, "wb") as f:
        f.write(data)
def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
bad = []
for rnd in range(150):
    path = os.path.join(d, "k%d" % (rnd % 5))
    old = os.urandom(100000 + rnd * 512)
    new = os.urandom(90000 + rnd * 256)
    how = rnd % 3
    put(path, old)
    go = threading.Event()
    def change():
        go.wait()
        if how == 0:
            put(path, new)          # an overwrite: open(O_WRONLY|O_TRUNC)
        elif how == 1:
            put(path + ".tmp", new)  # a new file renamed over it
            os.rename(path + ".tmp", path)
        else:
            os.unlink(path)         # an unlink, and a new file of the name
            put(path, new)
    def reader():
        go.wait()
        read(path)
    ts = [threading.Thread(target=change)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join()
    for i in range(2):
        got = read(path)
        if got != new:
            bad.append("round %d (%s), read %d: %s bytes" % (rnd, ("overwrite", "rename", "unlink")[how], i,
                       "old" if got == old else "no" if got is None else "other"))
print(len(bad))
if bad:
    sys.exit("; ".join(bad[:5]))
EOF
check_eq "150 rounds of overwrites, renames and unlinks racing the store: the last put, always" \
	"0 0" "$RC $OUT"
[ "$RC" -eq 0 ] || echo "# $ERR"
ofs_umount
ofs_done
