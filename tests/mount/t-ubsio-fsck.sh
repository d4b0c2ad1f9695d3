#!/usr/bin/env bash
# t-ubsio-fsck.sh: offloadctl fsck on a ubsio store (each file one value in
# the KV store of the stand-in library, tests/ubsio): a clean store checks
# clean; a value deleted from the KV store, one truncated and one with a
# flipped byte are reported with their path and key; --repair moves them to
# <tenant>/lost+found (never deletes) and fsck is clean again; without the
# library fsck fails naming it.
set -u
. "$(dirname "$0")/lib.sh"

LIB="$OFS_BUILD/tests/libubsio_kvc.so"
[ -e "$LIB" ] || ofs_bail "$LIB missing (build the tests: ninja -C build)"
export UBSIO_STUB_DIR="$TESTDIR/kv"
mkdir -p "$UBSIO_STUB_DIR"
# lib.sh adds the backend's options itself when OFS_BACKEND=ubsio.
if [ -n "$OFS_BACKEND_OPTS" ]; then
	GEOM="bucket_count=4,bucket_size=64M"
else
	GEOM="bucket_count=4,bucket_size=64M,backend=ubsio,ubsio_lib=$LIB,ubsio_ssd_size=0"
fi
FSCK_OPTS=(--ubsio-lib "$LIB" --ubsio-ssd-size 0)

# fsck_ubsio [ARGS...]: offloadctl fsck of $ROOT with the library; RC/OUT/ERR.
fsck_ubsio() {
	run "$OFSCTL" fsck "$ROOT" "${FSCK_OPTS[@]}" "$@"
}

# vkey FILE: the store key of FILE's value, from its descriptor on the mount.
vkey() {
	getfattr -n user.offload.descriptor --only-values "$1" 2>/dev/null | sed -n 's/^key=//p'
}

# vfile KEY: the stub's file holding the value of KEY (keys here are short).
vfile() {
	printf '%s/%s' "$UBSIO_STUB_DIR" "$(printf %s "$1" | od -An -v -tx1 | tr -d ' \n')"
}

# ---- a clean store: two tenants, a few files, an empty one ----
ofs_mount "$GEOM" || ofs_bail "cannot mount a ubsio store"
mkdir -p "$MNT/t1/d" "$MNT/t2"
mkrand "$REF/a" $((PAGE * 2 + 100))
mkrand "$REF/b" $((PAGE + 1))
mkrand "$REF/c" 5000
mkrand "$REF/e" 70000
mkrand "$REF/f" 123
cp "$REF/a" "$MNT/t1/d/a"
cp "$REF/b" "$MNT/t1/b"
cp "$REF/c" "$MNT/t2/c"
cp "$REF/e" "$MNT/t2/e"
cp "$REF/f" "$MNT/t2/f"
: >"$MNT/t1/empty"
key_a=$(vkey "$MNT/t1/d/a")
key_b=$(vkey "$MNT/t1/b")
key_c=$(vkey "$MNT/t2/c")
check_contains "descriptor names the value's key" "t1/d/a#" "$key_a"
[ -n "$key_b" ] && [ -n "$key_c" ] || ofs_bail "no keys in the descriptors"
check "the value of t1/d/a is a file of the stub" test -f "$(vfile "$key_a")"
ofs_umount || ofs_bail "unmount failed"
check_eq "ROOT holds only the database, its space reserve, the store's id and the journal" \
	"offloadfs.db offloadfs.db-reserve offloadfs.id ubsio.journal" "$(ls "$ROOT" | tr '\n' ' ' | sed 's/ $//')"

fsck_ubsio
check_eq "clean store: fsck exits 0" 0 "$RC"
check_contains "clean store: fsck says it is a ubsio store" "backend ubsio" "$OUT"
check_contains "clean store: fsck counts the objects with a value" "objects 5, missing values 0" "$OUT"
check_contains "clean store: fsck: clean" "fsck: clean" "$OUT"
[ "$RC" -eq 0 ] || note "fsck output: ${OUT//$'\n'/ | } ${ERR//$'\n'/ | }"

# The options reach Init: the newer Init with the size, the older one without.
# A device id needs Ascend's ACL library: the stand-in has one on request.
export UBSIO_STUB_LOG="$TESTDIR/init.log" UBSIO_STUB_ACL=1
run "$OFSCTL" fsck "$ROOT" --ubsio-lib "$LIB" --ubsio-ssd-size 1G --ubsio-device 2
check_eq "newer Init, ssd size 1G, device 2: fsck exits 0" 0 "$RC"
check_eq "newer Init got the device and the size" "Init 2 1073741824 0" "$(head -n 1 "$TESTDIR/init.log")"
: >"$TESTDIR/init.log"
run "$OFSCTL" fsck "$ROOT" --ubsio-lib "$OFS_BUILD/tests/libubsio_kvc_oldinit.so" --ubsio-old-init \
	--ubsio-device 3
check_eq "older Init (--ubsio-old-init), device 3: fsck exits 0" 0 "$RC"
check_contains "older Init got the device" "Init 3 " "$(head -n 1 "$TESTDIR/init.log")"
unset UBSIO_STUB_LOG UBSIO_STUB_ACL
run "$OFSCTL" fsck "$ROOT" --ubsio-lib "$LIB" --ubsio-ssd-size 12Q
check_eq "malformed --ubsio-ssd-size: fsck exits 2" 2 "$RC"
check_contains "malformed --ubsio-ssd-size: says so" "invalid --ubsio-ssd-size '12Q'" "$ERR"

# fsck writes nothing without --repair: the database and the values stay as they were.
sum_db=$(md5sum <"$ROOT/offloadfs.db")
sum_kv=$(cd "$UBSIO_STUB_DIR" && find . -type f | sort | xargs md5sum | md5sum)
fsck_ubsio
check_eq "fsck leaves the database untouched" "$sum_db" "$(md5sum <"$ROOT/offloadfs.db")"
check_eq "fsck leaves the KV store untouched" "$sum_kv" \
	"$(cd "$UBSIO_STUB_DIR" && find . -type f | sort | xargs md5sum | md5sum)"

# ---- without options: the library and Init the last mount used ----
export UBSIO_STUB_LOG="$TESTDIR/init2.log"
run env -u LD_LIBRARY_PATH "$OFSCTL" fsck "$ROOT"
check_eq "no options: fsck uses the recorded library and exits 0" 0 "$RC"
check_eq "no options: the recorded Init (the newer one, size 0, device -1: none)" "Init -1 0 0" \
	"$(head -n 1 "$TESTDIR/init2.log")"
unset UBSIO_STUB_LOG
# A recorded library that is no longer there (nor on the search path): a clear error.
sqlite3 "$ROOT/offloadfs.db" "UPDATE store SET v = '' WHERE k = 'ubsio_lib'"
run env -u LD_LIBRARY_PATH "$OFSCTL" fsck "$ROOT"
check_eq "no library: fsck exits 2" 2 "$RC"
check_contains "no library: the error names it" "cannot load the ubsio library libubsio_kvc.so" "$ERR"
check_contains "no library: the error says how to give it" "--ubsio-lib" "$ERR"
run "$OFSCTL" fsck "$ROOT" --ubsio-lib "$TESTDIR/no-such-lib.so"
check_eq "a missing --ubsio-lib: fsck exits 2" 2 "$RC"
check_contains "a missing --ubsio-lib: the error names it" "$TESTDIR/no-such-lib.so" "$ERR"

# ---- damage: a value deleted, one truncated, one with a flipped byte ----
rm -f "$(vfile "$key_a")"
truncate -s 100 "$(vfile "$key_b")"
python3 - "$(vfile "$key_c")" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(7); b = f.read(1); f.seek(7)
    f.write(bytes([b[0] ^ 0x40]))
EOF
fsck_ubsio
check_eq "damaged values: fsck exits 1" 1 "$RC"
check_contains "missing value: fsck names path and key" \
	"'t1/d/a': value missing from the KV store (key '$key_a'" "$OUT"
check_contains "truncated value: fsck names path and key" \
	"'t1/b': value has the wrong length (key '$key_b'" "$OUT"
check_contains "flipped byte: fsck names path and key" \
	"'t2/c': checksum mismatch (key '$key_c'" "$OUT"
check_contains "damaged values: the summary counts them" \
	"missing values 1, wrong length 1, checksum mismatches 1" "$OUT"
check_contains "damaged values: fsck says PROBLEMS FOUND" "fsck: PROBLEMS FOUND" "$OUT"

# The library's log: the probe went out in batches, not one call per key.
export UBSIO_STUB_LOG="$TESTDIR/stub.log"
fsck_ubsio
unset UBSIO_STUB_LOG
check_eq "the probe is one BatchExist and one BatchGetLength" "1 1" \
	"$(grep -c '^BatchExist 5 ' "$TESTDIR/stub.log") $(grep -c '^BatchGetLength 5 ' "$TESTDIR/stub.log")"
check_eq "no value is deleted or put by fsck" 0 "$(grep -cE '^(Batch)?(Put|Delete) ' "$TESTDIR/stub.log")"

run "$OFSCTL" fsck "$ROOT" --repair "${FSCK_OPTS[@]}"
check_eq "fsck --repair exits 0" 0 "$RC"
check_contains "repair: a moved to lost+found" "repair: 'd/a' moved to lost+found/" "$OUT"
check_contains "repair: b moved to lost+found" "repair: 'b' moved to lost+found/" "$OUT"
check_contains "repair: c moved to lost+found" "repair: 'c' moved to lost+found/" "$OUT"
[ "$RC" -eq 0 ] || note "fsck output: ${OUT//$'\n'/ | } ${ERR//$'\n'/ | }"
fsck_ubsio
check_eq "after repair: fsck exits 0" 0 "$RC"
check_contains "after repair: fsck counts three quarantined objects" "quarantined 3" "$OUT"
check_contains "after repair: fsck: clean" "fsck: clean" "$OUT"

ofs_mount "$GEOM" || ofs_bail "cannot mount after the repair"
check_eq "after repair: t1/lost+found holds a and b" 2 "$(ls "$MNT/t1/lost+found" | wc -l)"
check_eq "after repair: t2/lost+found holds c" 1 "$(ls "$MNT/t2/lost+found" | wc -l)"
check_eq "after repair: a and b are gone from their places" "no no" \
	"$([ -e "$MNT/t1/d/a" ] && echo yes || echo no) $([ -e "$MNT/t1/b" ] && echo yes || echo no)"
check_eq "after repair: c is gone from its place" "no" "$([ -e "$MNT/t2/c" ] && echo yes || echo no)"
sizes=$(stat -c %s "$MNT"/t1/lost+found/* | sort -n | tr '\n' ' ')
check_eq "after repair: the quarantined files keep their sizes" "$((PAGE + 1)) $((PAGE * 2 + 100)) " "$sizes"
check_eq "after repair: the quarantined c keeps its size" 5000 "$(stat -c %s "$MNT"/t2/lost+found/*)"
check_cmp "after repair: e is intact" "$REF/e" "$MNT/t2/e"
check_cmp "after repair: f is intact" "$REF/f" "$MNT/t2/f"
check_eq "after repair: the empty file is still there" 0 "$(stat -c %s "$MNT/t1/empty")"
check_fails "the quarantined c reads as EIO, never wrong bytes" "Input/output error" \
	cat "$MNT"/t2/lost+found/*
ofs_umount
fsck_ubsio
check_eq "after the remount: fsck exits 0" 0 "$RC"

ofs_done
