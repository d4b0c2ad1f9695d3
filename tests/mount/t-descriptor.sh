#!/usr/bin/env bash
# t-descriptor.sh: the read-only xattr user.offload.descriptor.  Its format,
# that the bytes it points at in the bucket file are the file's content, that
# the bucket is the key's home bucket XXH64(key, seed 0) % bucket_count
# (computed independently with xxhsum), that it cannot be set or removed,
# and that files unlinked or never closed have none.
set -u
. "$(dirname "$0")/lib.sh"

XATTR=user.offload.descriptor
# 61 buckets: not a power of two, so a masked hash would not pass for a modulo.
NB=61
ofs_mount "bucket_count=$NB,bucket_size=8M" || ofs_bail "cannot mount"
ROOT_REAL=$(realpath "$ROOT")

# desc_parse FILE: check the descriptor's exact format and print
# "PATH OFFSET SIZE"; on a malformed value print "BAD: why".
desc_parse() {
	python3 -c '
import os, sys
try:
    v = os.getxattr(sys.argv[1], "user.offload.descriptor")
except OSError as e:
    print("BAD: getxattr: " + os.strerror(e.errno)); sys.exit()
try:
    s = v.decode()
except UnicodeDecodeError:
    print("BAD: not UTF-8: %r" % v); sys.exit()
lines = s.split("\n")
if len(lines) != 4 or lines[3] != "":
    print("BAD: not three newline-terminated lines: %r" % s); sys.exit()
kv = [l.split("=", 1) for l in lines[:3]]
if [k[0] for k in kv] != ["file_path", "offset", "object_size"] or any(len(k) != 2 for k in kv):
    print("BAD: keys: %r" % s); sys.exit()
if not kv[1][1].isdigit() or not kv[2][1].isdigit():
    print("BAD: numbers: %r" % s); sys.exit()
print(kv[0][1], kv[1][1], kv[2][1])
' "$1"
}

# bucket_pread PATH OFFSET SIZE OUT
bucket_pread() {
	python3 -c '
import os, sys
path, off, size, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_RDONLY)
got = bytearray()
while len(got) < size:
    chunk = os.pread(fd, size - len(got), off + len(got))
    if not chunk:
        break
    got += chunk
os.close(fd)
open(out, "wb").write(got)
' "$@"
}

home_bucket() {
	local h
	h=$(printf %s "$1" | xxhsum -H1 | cut -d' ' -f1)
	python3 -c 'import sys; print(int(sys.argv[1], 16) % int(sys.argv[2]))' "$h" "$2"
}

# check_desc NAME FILE REFERENCE [KEY]: the descriptor of FILE points at
# REFERENCE's bytes; with KEY, in KEY's home bucket.
check_desc() {
	local name=$1 f=$2 refc=$3 key=${4:-} d path off size b exp
	d=$(desc_parse "$f")
	if [[ "$d" == BAD* || -z "$d" ]]; then
		not_ok "$name: descriptor" "${d:-empty}"
		return
	fi
	read -r path off size <<<"$d"
	ok "$name: descriptor parsed ($path $off $size)"
	check_eq "$name: object_size equals the file size" "$(stat -c %s "$refc")" "$size"
	check_eq "$name: offset is page aligned" 0 $((off % PAGE))
	if [[ "$path" =~ ^"$ROOT_REAL"/bucket_([0-9a-f][0-9a-f])\.data$ ]]; then
		ok "$name: file_path is a bucket file of ROOT"
		b=$((16#${BASH_REMATCH[1]}))
		if [ -n "$key" ]; then
			exp=$(home_bucket "$key" "$NB")
			check_eq "$name: bucket is XXH64('$key') % $NB" "$exp" "$b"
		fi
	else
		not_ok "$name: file_path is a bucket file of ROOT" "'$path'"
		return
	fi
	rm -f "$REF/pread"
	bucket_pread "$path" "$off" "$size" "$REF/pread"
	check_cmp "$name: bucket bytes at offset equal the file" "$refc" "$REF/pread"
}

mkdir -p "$MNT/t1" "$MNT/t2"
KEYS=("a" "b0" "dir/b" "Qwen/Qwen3-32B/abc_0_k" "Qwen/Qwen3-32B/abc_0_v"
	"x/y/z/deep_1_v" "name with space" "模型/層_0" "k$((RANDOM))_$$")
i=0
for key in "${KEYS[@]}"; do
	i=$((i + 1))
	mkdir -p "$MNT/t1/$(dirname "$key")"
	mkrand "$REF/k$i" $((i * 37000 + i))
	cp "$REF/k$i" "$MNT/t1/$key"
done
# The same key in another tenant: the same home bucket.
mkdir -p "$MNT/t2/Qwen/Qwen3-32B"
mkrand "$REF/t2k" 70000
cp "$REF/t2k" "$MNT/t2/Qwen/Qwen3-32B/abc_0_k"

run getfattr -n "$XATTR" "$MNT/t1/Qwen/Qwen3-32B/abc_0_k"
check_contains "getfattr shows the descriptor" "$XATTR=\"file_path=$ROOT_REAL/bucket_" "$OUT"
run getfattr --absolute-names -d -m - "$MNT/t1/a"
check_eq "listxattr (getfattr -d -m -) does not list it: copy tools would copy it" "" "$OUT"

i=0
for key in "${KEYS[@]}"; do
	i=$((i + 1))
	check_desc "key '$key'" "$MNT/t1/$key" "$REF/k$i" "$key"
done
check_desc "tenant t2, key 'Qwen/Qwen3-32B/abc_0_k'" "$MNT/t2/Qwen/Qwen3-32B/abc_0_k" "$REF/t2k" \
	"Qwen/Qwen3-32B/abc_0_k"

# The checksum attribute (when the daemon has one): XXH3-64 of the content,
# computed independently with xxhsum -H3.
if getfattr --absolute-names -n user.offload.checksum "$MNT/t1/a" >/dev/null 2>&1; then
	i=0
	bad=""
	for key in "${KEYS[@]}"; do
		i=$((i + 1))
		want=$(xxhsum -H3 <"$REF/k$i" | sed -n 's/.* = \([0-9a-f]*\)$/\1/p;s/^\([0-9a-f]\{16\}\) .*/\1/p' | head -1)
		got=$(getfattr --absolute-names --only-values -n user.offload.checksum "$MNT/t1/$key" 2>&1)
		[ "$got" == "$want" ] || bad="$bad '$key' ($got vs $want)"
	done
	check_eq "user.offload.checksum is the XXH3-64 of the content (xxhsum -H3), every key" "" "$bad"
	check_fails "setfattr on the checksum attribute fails" "Operation not permitted" \
		setfattr -n user.offload.checksum -v 0 "$MNT/t1/a"
else
	skip "user.offload.checksum" "the daemon does not list it"
fi

# An empty file: no pages, object_size 0.
: >"$MNT/t1/empty"
d=$(desc_parse "$MNT/t1/empty")
check_eq "empty file: object_size=0, offset=0" "0 0" "$(echo "$d" | awk '{print $(NF-1), $NF}')"

# Read only.
f="$MNT/t1/a"
before=$(getfattr --absolute-names --only-values -n "$XATTR" "$f" 2>&1)
check_contains "getfattr --only-values gives the value" "file_path=$ROOT_REAL/bucket_" "$before"
check_fails "setfattr on the descriptor fails" "Operation not permitted" \
	setfattr -n "$XATTR" -v "file_path=/etc/passwd" "$f"
check_fails "setfattr -x of the descriptor fails" "Operation not permitted" setfattr -x "$XATTR" "$f"
check_fails "setfattr of another name of ours fails" "Operation not permitted" \
	setfattr -n user.offload.other -v 1 "$f"
check_eq "descriptor unchanged by the failed setfattr" "$before" \
	"$(getfattr --absolute-names --only-values -n "$XATTR" "$f" 2>&1)"

# Directories have no descriptor.
check_fails "a directory has no descriptor" "No such attribute" getfattr -n "$XATTR" "$MNT/t1/dir"

# Overwritten, renamed: the descriptor follows the content.
mkrand "$REF/ow" 150001
cat "$REF/ow" >"$MNT/t1/dir/b"
check_desc "overwritten file" "$MNT/t1/dir/b" "$REF/ow"
mv "$MNT/t1/dir/b" "$MNT/t1/dir/renamed"
check_desc "renamed file" "$MNT/t1/dir/renamed" "$REF/ow"

# A file never closed has no descriptor yet; it gets one at close.
mkrand "$REF/open" 100000
if holder_start "$MNT/t1/being_written" w "$REF/open"; then
	check_fails "a file open for writing, never closed, has no descriptor" "No such attribute" \
		getfattr -n "$XATTR" "$MNT/t1/being_written"
	holder_close
	check_desc "the same file after close" "$MNT/t1/being_written" "$REF/open" "being_written"
else
	not_ok "hold a file open for writing" "$(cat "$HOLDER_DIR/err")"
fi

# While a committed file is being overwritten (O_RDWR, no O_TRUNC), its
# descriptor still points at the committed bytes, intact (copy on write).
mkrand "$REF/cow_new" 120000
if holder_start "$MNT/t1/b0" rw "$REF/cow_new"; then
	check_desc "during an overwrite, the descriptor shows the committed content" "$MNT/t1/b0" "$REF/k2"
	holder_close
	{ cat "$REF/cow_new"; tail -c +120001 "$REF/k2"; } >"$REF/cow_exp"
	check_desc "after the overwriter closes, the new content" "$MNT/t1/b0" "$REF/cow_exp"
else
	not_ok "hold a file open for overwriting" "$(cat "$HOLDER_DIR/err")"
fi

# Unlinked: no descriptor (no path at all).
rm "$MNT/t1/x/y/z/deep_1_v"
check_fails "unlinked file: getfattr fails ENOENT" "No such file or directory" \
	getfattr -n "$XATTR" "$MNT/t1/x/y/z/deep_1_v"

# Descriptors survive a remount and still point at the content.
ofs_remount || ofs_bail "cannot remount"
check_desc "after remount: key 'Qwen/Qwen3-32B/abc_0_k'" "$MNT/t1/Qwen/Qwen3-32B/abc_0_k" "$REF/k4" \
	"Qwen/Qwen3-32B/abc_0_k"
check_desc "after remount: renamed file" "$MNT/t1/dir/renamed" "$REF/ow"

# ---- a flipped byte in a bucket file ----
# Every commit records per-page checksums: with verify (the default) a read
# of a corrupted page is EIO, noverify returns the bytes as stored, and fsck
# reports the mismatch.
VICTIM="$MNT/t1/Qwen/Qwen3-32B/abc_0_v"
read -r vpath voff _ <<<"$(desc_parse "$VICTIM")"
ofs_umount
# flip FILE OFFSET: xor one byte with 0xff (twice restores it).
flip() {
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
off = int(sys.argv[2])
b = os.pread(fd, 1, off)
os.pwrite(fd, bytes([b[0] ^ 0xff]), off)
os.close(fd)
' "$1" "$2"
}
if [ -n "${vpath:-}" ] && [ -f "$vpath" ]; then
	flip "$vpath" $((voff + PAGE + 4464)) # in the object's second page
	cp "$REF/k5" "$REF/k5_bad"
	flip "$REF/k5_bad" $((PAGE + 4464))
	ofs_mount "bucket_count=$NB,bucket_size=8M" || ofs_bail "cannot remount"
	check_fails "verify (default): reading a corrupted object fails with EIO" "Input/output error" \
		cat "$VICTIM"
	check_cmp "verify: other objects still read fine" "$REF/k4" "$MNT/t1/Qwen/Qwen3-32B/abc_0_k"
	if grep -qF "Qwen/Qwen3-32B/abc_0_v" "$LOG"; then
		ok "verify: the mismatch is logged with the key"
	else
		not_ok "verify: the mismatch is logged with the key" "log: $(cat "$LOG")"
	fi
	if "$OFSCTL" --help 2>&1 | grep -q scrub; then
		run "$OFSCTL" scrub "$MNT"
		check_eq "offloadctl scrub of the mounted store exits 1" 1 "$RC"
		check_contains "scrub names the corrupted file" "abc_0_v: checksum mismatch" "$OUT"
	else
		skip "offloadctl scrub" "this offloadctl has no scrub"
	fi
	ofs_umount
	ofs_fsck
	check_eq "fsck of a store with a corrupted object exits non-zero" yes "$([ "$RC" -ne 0 ] && echo yes || echo no)"
	check_contains "fsck reports the checksum mismatch" "checksum mismatch" "$OUT"
	ofs_mount "bucket_count=$NB,bucket_size=8M,noverify" || ofs_bail "cannot mount with noverify"
	check_cmp "noverify: the stored (corrupted) bytes are returned" "$REF/k5_bad" "$VICTIM"
	ofs_umount
	flip "$vpath" $((voff + PAGE + 4464))
	check_fsck_clean "after the byte is restored"
	if "$OFSCTL" --help 2>&1 | grep -q scrub; then
		ofs_mount "bucket_count=$NB,bucket_size=8M" || ofs_bail "cannot remount"
		run "$OFSCTL" scrub "$MNT"
		check_eq "offloadctl scrub after the byte is restored exits 0" 0 "$RC"
		ofs_umount
	fi
else
	not_ok "corruption test: descriptor of the victim" "'${vpath:-}'"
fi
ofs_done
