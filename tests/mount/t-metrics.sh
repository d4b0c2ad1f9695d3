#!/usr/bin/env bash
# t-metrics.sh: the Prometheus metrics.  The -o metrics=PATH file and the
# live xattr both parse under a strict parser of the text exposition format
# (every line valid, HELP and TYPE for every family, histograms cumulative),
# counters are monotonic across two reads and count what happened, and
# offloadctl stats prints the summary and valid JSON.
set -u
. "$(dirname "$0")/lib.sh"

PROM="$TESTDIR/metrics.prom"

# parse FILE: strict exposition-format check; prints "name{labels} value" lines.
parse() {
	python3 - "$1" <<'EOF'
import re, sys
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
label_re = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
sample_re = re.compile(r"^(%s)(\{(%s(,%s)*)?\})? (\S+)$" % (name_re, label_re, label_re))
help_re = re.compile(r"^# HELP (%s) (.+)$" % name_re)
type_re = re.compile(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$" % name_re)
types, helps, out, errors = {}, set(), [], []
text = open(sys.argv[1]).read()
if not text.endswith("\n"):
    errors.append("no final newline")
for i, line in enumerate(text.splitlines(), 1):
    if line.startswith("#"):
        m = help_re.match(line) or type_re.match(line)
        if not m:
            errors.append("line %d: bad comment: %r" % (i, line)); continue
        if line.startswith("# HELP"):
            helps.add(m.group(1))
        else:
            if m.group(1) in types:
                errors.append("line %d: second TYPE for %s" % (i, m.group(1)))
            types[m.group(1)] = m.group(2)
        continue
    m = sample_re.match(line)
    if not m:
        errors.append("line %d: bad sample: %r" % (i, line)); continue
    name, value = m.group(1), m.group(5)
    try:
        float(value)
    except ValueError:
        errors.append("line %d: bad value %r" % (i, value)); continue
    fam = re.sub(r"_(bucket|sum|count)$", "", name) if re.sub(r"_(bucket|sum|count)$", "", name) in types else name
    if fam not in types or fam not in helps:
        errors.append("line %d: %s has no TYPE/HELP before it" % (i, name))
    elif types[fam] == "counter" and not name.endswith("_total"):
        errors.append("line %d: counter %s does not end in _total" % (i, name))
    out.append((name, m.group(3) or "", float(value)))
# Histograms: buckets cumulative, +Inf equals _count.
for fam, t in types.items():
    if t != "histogram":
        continue
    b = [(l, v) for n, l, v in out if n == fam + "_bucket"]
    vals = [v for _, v in b]
    if vals != sorted(vals):
        errors.append("%s: buckets not cumulative" % fam)
    inf = [v for l, v in b if l == 'le="+Inf"']
    cnt = [v for n, l, v in out if n == fam + "_count"]
    if not inf or not cnt or inf[0] != cnt[0]:
        errors.append("%s: +Inf bucket != _count" % fam)
for e in errors:
    print("ERROR " + e)
for n, l, v in out:
    print("%s%s %.17g" % (n, "{%s}" % l if l else "", v))
sys.exit(1 if errors else 0)
EOF
}
# value FILE NAME: a sample's value from parse's output
value() { parse "$1" | awk -v n="$2" '$1 == n {print $2}'; }
live() { getfattr --only-values -n user.offload.metrics "$MNT" >"$1" 2>/dev/null; }

ofs_mount "bucket_count=4,bucket_size=64M,dram=8M,metrics=$PROM" || ofs_bail "cannot mount"
mkdir "$MNT/t"
# One open, one write, one close each: exactly one commit and one allocation.
python3 -c '
import os, sys
for i in range(1, 6):
    fd = os.open("%s/t/f%d" % (sys.argv[1], i), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, os.urandom(100000)); os.close(fd)' "$MNT"
cat "$MNT/t/f1" >/dev/null
live "$TESTDIR/m1"
run parse "$TESTDIR/m1"
check_eq "live metrics: every line valid (strict parser)" 0 "$RC"
[ "$RC" -eq 0 ] || note "${OUT//$'\n'/ | }"
check_eq "objects gauge" 5 "$(value "$TESTDIR/m1" offloadfs_objects)"
check_eq "bytes written" 500000 "$(value "$TESTDIR/m1" offloadfs_bytes_written_total)"
check_eq "objects committed" 5 "$(value "$TESTDIR/m1" offloadfs_objects_committed_total)"
check_eq "per-bucket allocated pages add up to the files' pages" 10 \
	"$(parse "$TESTDIR/m1" | awk '$1 ~ /^offloadfs_bucket_pages_allocated/ {s += $2} END {print s}')"
check_eq "page allocations counted" 5 "$(value "$TESTDIR/m1" offloadfs_page_allocations_total)"
check_eq "write latency histogram counts every write request" yes \
	"$([ "$(value "$TESTDIR/m1" offloadfs_write_latency_seconds_count)" -ge 5 ] && echo yes || echo no)"
for fam in offloadfs_bucket_pages_free offloadfs_page_frees_total \
	offloadfs_page_allocation_failures_total offloadfs_bytes_read_total \
	offloadfs_objects_read_total offloadfs_read_latency_seconds_count \
	offloadfs_recovery_dropped_objects offloadfs_checksum_failures_total \
	offloadfs_promotions_queued_total offloadfs_promotions_done_total \
	offloadfs_promotions_failed_total offloadfs_dram_hits_total offloadfs_dram_misses_total \
	offloadfs_dram_bytes offloadfs_dram_evictions_total offloadfs_backend_calls_total \
	offloadfs_backend_errors_total; do
	check_contains "metric $fam is exposed" "$fam" "$(parse "$TESTDIR/m1")"
done

# More work, a second read: every counter is monotonic.
setfattr -n user.offload.promote -v 1 "$MNT/t/f2"
rm "$MNT/t/f3"
sync
echo 3 >/proc/sys/vm/drop_caches
cat "$MNT/t/f1" "$MNT/t/f2" >/dev/null
sleep 0.5
live "$TESTDIR/m2"
run parse "$TESTDIR/m2"
check_eq "second read: every line valid" 0 "$RC"
bad=$(python3 - "$TESTDIR/m1" "$TESTDIR/m2" <<'EOF'
import re, sys
def load(p):
    types, vals = {}, {}
    for line in open(p):
        if line.startswith("# TYPE"):
            _, _, n, t = line.split(); types[n] = t
        elif not line.startswith("#"):
            k, v = line.rsplit(" ", 1); vals[k] = float(v)
    return types, vals
t1, v1 = load(sys.argv[1]); t2, v2 = load(sys.argv[2])
for k, v in v1.items():
    fam = re.sub(r"\{.*", "", k)
    base = re.sub(r"_(bucket|sum|count)$", "", fam)
    if t1.get(fam) == "counter" or t1.get(base) == "histogram":
        if k not in v2 or v2[k] < v:
            print(k, v, v2.get(k))
EOF
)
check_eq "counters and histograms never go down between two reads" "" "$bad"
check_eq "the delete was counted as a free (at the next barrier)" yes \
	"$(ofs_sync; live "$TESTDIR/m3"; [ "$(value "$TESTDIR/m3" offloadfs_page_frees_total)" -ge 1 ] && echo yes || echo no)"

# The textfile: written within a few seconds, atomically (never a partial file).
for ((i = 0; i < 80; i++)); do [ -s "$PROM" ] && break; sleep 0.1; done
run parse "$PROM"
check_eq "metrics=PATH file: every line valid" 0 "$RC"
check_eq "no temporary file is left beside it" "" "$(ls "$TESTDIR" | grep 'metrics.prom.tmp' || true)"

# offloadctl stats: summary and JSON.
run "$OFSCTL" stats "$MNT"
check_eq "offloadctl stats exits 0" 0 "$RC"
check_contains "stats shows capacity" "capacity   256.0 MiB" "$OUT"
check_contains "stats shows objects" "objects    4" "$OUT"
check_contains "stats sums up the buckets" "buckets    4, each " "$OUT"
check_contains "stats shows the DRAM hit rate" "hit rate" "$OUT"
run "$OFSCTL" stats "$MNT" --buckets
check_eq "offloadctl stats --buckets exits 0" 0 "$RC"
check_eq "stats --buckets: a row per bucket" 4 "$(echo "$OUT" | grep -cE '^  0[0-3] ')"
check_contains "stats --buckets shows each bucket's fragmentation" "fragmentation" "$OUT"
run "$OFSCTL" stats "$MNT" --json
check_eq "offloadctl stats --json exits 0" 0 "$RC"
check_eq "the JSON parses and has 4 buckets and 4 objects" "4 4" \
	"$(echo "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["buckets"]), d["objects"])')"
run "$OFSCTL" stats "$TESTDIR"
check_eq "stats of a directory that is not a mount exits 2" 2 "$RC"
ofs_umount
run parse "$PROM"
check_eq "the final metrics file, written at unmount, is valid" 0 "$RC"

# With the default 256 buckets the live text still fits one xattr (64 KiB).
ROOT="$TESTDIR/root256"
mkdir -p "$ROOT"
ofs_mount "bucket_size=16M" || ofs_bail "cannot mount with 256 buckets"
live "$TESTDIR/m256"
run parse "$TESTDIR/m256"
check_eq "256 buckets: the live metrics are complete and valid" 0 "$RC"
check_eq "256 buckets: one line per bucket per family" 256 \
	"$(grep -c '^offloadfs_bucket_pages_free{' "$TESTDIR/m256")"
run "$OFSCTL" stats "$MNT"
check_eq "256 buckets: stats prints the summary, no bucket rows" "0 yes" \
	"$(echo "$OUT" | grep -cE '^  [0-9a-f]{2} ') $([ "$(echo "$OUT" | wc -l)" -le 15 ] && echo yes)"
run "$OFSCTL" stats "$MNT" --buckets
check_eq "256 buckets: stats --buckets prints 256 bucket rows" 256 \
	"$(echo "$OUT" | grep -cE '^  [0-9a-f]{2} ')"
ofs_umount

ofs_done
