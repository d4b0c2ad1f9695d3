#!/usr/bin/env bash
# t-space.sh: space accounting on a tiny store, bucket_count=2 and
# bucket_size=1M (16 pages of 64K per bucket, 32 in all): EFBIG for a file
# past the store's capacity, a file bigger than a bucket in two extents,
# ENOSPC once every page is used, space back after
# unlink, exact statfs numbers throughout and after a remount.
set -u
. "$(dirname "$0")/lib.sh"

ofs_mount "bucket_count=2,bucket_size=1M" || ofs_bail "cannot mount"
check_eq "statfs: 32 blocks of 64K, all free" "32,32,$PAGE" "$(stat -f -c %b,%f,%S "$MNT")"
mkdir "$MNT/t"

# ---- EFBIG: past the store's capacity (a larger file than a bucket is extents) ----
check_fails "a 3 MiB file: EFBIG (head)" "File too large" \
	sh -c "head -c 3M /dev/urandom > '$MNT/t/big'"
rm -f "$MNT/t/big"
check_fails "a 3 MiB file: EFBIG (dd, one 3 MiB write)" "File too large" \
	dd if=/dev/zero of="$MNT/t/big" bs=3M count=1 status=none
rm -f "$MNT/t/big"
check_fails "2 MiB + 1 byte: EFBIG" "File too large" \
	sh -c "head -c $((2 * 1024 * 1024 + 1)) /dev/zero > '$MNT/t/big'"
rm -f "$MNT/t/big"
check_fails "truncate -s 2M+1: EFBIG" "File too large" truncate -s $((2 * 1024 * 1024 + 1)) "$MNT/t/big"
mkrand "$REF/two" $((1024 * 1024 + 1))
check "1 MiB + 1 byte, larger than a bucket: two extents" cp "$REF/two" "$MNT/t/big"
check_cmp "it reads back" "$REF/two" "$MNT/t/big"
rm -f "$MNT/t/big"
rm -f "$MNT/t/big"
check_eq "all 32 pages free after removing the failed files" 32 "$(ofs_free)"
mkrand "$REF/onebucket" $((1024 * 1024))
check "exactly one bucket (1 MiB) fits" cp "$REF/onebucket" "$MNT/t/onebucket"
check_cmp "the 1 MiB file reads back" "$REF/onebucket" "$MNT/t/onebucket"
check_eq "16 pages used" 16 "$(ofs_free)"
rm "$MNT/t/onebucket"
check_eq "all free again" 32 "$(ofs_free)"

# ---- fill with 64K files until ENOSPC ----
n=0
err=""
for i in $(seq 1 40); do
	mkrand "$REF/f$i" "$PAGE"
	if ! err=$(cp "$REF/f$i" "$MNT/t/f$i" 2>&1); then
		break
	fi
	n=$i
done
check_eq "exactly 32 files of 64K fit" 32 "$n"
check_contains "the 33rd fails with ENOSPC" "No space left on device" "$err"
check_eq "statfs: no free block" "32,0" "$(stat -f -c %b,%f "$MNT")"
check_fails "another 64K write: ENOSPC" "No space left on device" \
	sh -c "head -c $PAGE /dev/zero > '$MNT/t/more'"
check "a 0-byte file still fits (no pages)" touch "$MNT/t/zero"
bad=""
for i in $(seq 1 32); do
	cmp -s "$REF/f$i" "$MNT/t/f$i" || bad="$bad f$i"
done
check_eq "all 32 files intact when full" "" "$bad"
rm -f "$MNT/t/f33" "$MNT/t/more"

rm "$MNT/t/f7"
check_eq "one file removed: one block free" 1 "$(ofs_free)"
mkrand "$REF/again" "$PAGE"
check "a new 64K write succeeds" cp "$REF/again" "$MNT/t/again"
check_cmp "the new file reads back" "$REF/again" "$MNT/t/again"
check_eq "full again" 0 "$(ofs_free)"

# ---- a remount keeps the accounting ----
ofs_remount || ofs_bail "cannot remount"
check_eq "after remount: still full" "32,0" "$(stat -f -c %b,%f "$MNT")"
check_fails "after remount: ENOSPC" "No space left on device" \
	sh -c "head -c 1 /dev/zero > '$MNT/t/more'"
rm -f "$MNT/t/more"
check_cmp "after remount: the file written into the freed page" "$REF/again" "$MNT/t/again"

# rm all, with nothing else going on: the space must come back by itself
# (freed pages wait for the next durability barrier, which the daemon runs
# every sync_interval = 1 s by default), not only at a later write, fsync or
# unmount.  The pause first lets any barrier due for earlier commits pass.
sleep 1.5
rm -f "$MNT/t"/*
# (sh -c: the free count must be read again on every try, not once here)
if wait_until 4 sh -c "test \"\$(stat -f -c %f '$MNT')\" -eq 32"; then
	ok "rm all: df shows all 32 blocks free again within 4 s, without fsync"
else
	not_ok "rm all: df shows all 32 blocks free again within 4 s, without fsync" \
		"free stays $(ofs_free_nosync) (freed pages wait for a barrier that does not come)"
fi
check_eq "everything removed, after fsyncdir: all 32 blocks free" "32,32" \
	"$(ofs_sync; stat -f -c %b,%f "$MNT")"
ofs_remount || ofs_bail "cannot remount"
check_eq "after remount: all 32 blocks free" "32,32" "$(stat -f -c %b,%f "$MNT")"
ofs_umount
check_fsck_clean "after filling and emptying the store"

# ---- home bucket full: the next bucket, wrapping around ----
# home KEY: XXH64(KEY, seed 0) % 2, computed with xxhsum.
home() {
	local h
	h=$(printf %s "$1" | xxhsum -H1 | cut -d' ' -f1)
	python3 -c 'import sys; print(int(sys.argv[1], 16) % 2)' "$h"
}
# bucket FILE: the bucket index in FILE's descriptor.
bucket() {
	getfattr --absolute-names --only-values -n user.offload.descriptor "$1" 2>/dev/null |
		sed -n 's/^file_path=.*bucket_\([0-9a-f][0-9a-f]\)\.data$/\1/p'
}
k0=() k1=()
for i in $(seq 1 40); do
	if [ "$(home "h$i")" -eq 0 ]; then k0+=("h$i"); else k1+=("h$i"); fi
done
ROOT="$TESTDIR/root2"
mkdir -p "$ROOT"
ofs_mount "bucket_count=2,bucket_size=1M" || ofs_bail "cannot mount a second store"
mkdir "$MNT/t"
head -c 1M /dev/urandom >"$MNT/t/${k0[0]}"
check_eq "1 MiB file with home bucket 0 ('${k0[0]}') is in bucket 0" 00 "$(bucket "$MNT/t/${k0[0]}")"
mkrand "$REF/spill" "$PAGE"
cp "$REF/spill" "$MNT/t/${k0[1]}"
check_eq "home bucket 0 full: the next file of home 0 ('${k0[1]}') goes to bucket 1" 01 \
	"$(bucket "$MNT/t/${k0[1]}")"
check_cmp "the spilled file reads back" "$REF/spill" "$MNT/t/${k0[1]}"
head -c $((15 * PAGE)) /dev/urandom >"$MNT/t/${k1[0]}"
check_eq "15 pages of home 1 ('${k1[0]}') fill bucket 1" "01 0" "$(bucket "$MNT/t/${k1[0]}") $(ofs_free)"
rm "$MNT/t/${k0[0]}"
cp "$REF/spill" "$MNT/t/${k1[1]}"
check_eq "home bucket 1 full: a file of home 1 ('${k1[1]}') wraps around to bucket 0" 00 \
	"$(bucket "$MNT/t/${k1[1]}")"
check_cmp "the wrapped file reads back" "$REF/spill" "$MNT/t/${k1[1]}"
ofs_umount
check_fsck_clean "after the overflow test"
ofs_done
