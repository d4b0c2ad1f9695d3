#!/usr/bin/env bash
# t-fsck.sh: offloadctl fsck on stores damaged on purpose: a flipped byte
# in a bucket file, a leaked page, an overlapping mapping, a truncated or
# missing bucket file (restored by --repair, the rest still checked), a
# user's file named lost+found, an object nothing can reach, a damaged
# geometry record, a database from a newer schema version, a foreign
# database; --repair moves corrupted objects to <tenant>/lost+found and
# frees leaked pages, deleting only what no tenant holds; an unclean store
# (kill -9) checks clean.
set -u
. "$(dirname "$0")/lib.sh"

GEOM="bucket_count=2,bucket_size=4M"
DB="$ROOT/offloadfs.db"

# A fresh store with three files in tenant t, cleanly unmounted.
make_store() {
	ofs_mount "$GEOM" || ofs_bail "cannot mount"
	mkdir -p "$MNT/t/d"
	mkrand "$REF/a" $((PAGE * 2 + 100))
	mkrand "$REF/b" $((PAGE + 1))
	mkrand "$REF/c" 5000
	cp "$REF/a" "$MNT/t/d/a"
	cp "$REF/b" "$MNT/t/b"
	cp "$REF/c" "$MNT/t/c"
	ofs_umount
}

# field NAME COLUMN: a column of the row of file NAME (names are unique here).
field() {
	sqlite3 "$DB" "SELECT $2 FROM inodes WHERE name = CAST('$1' AS BLOB)"
}

# ---- an unclean store (kill -9 while a file is open for writing) checks clean ----
make_store
ofs_mount "$GEOM" || ofs_bail "cannot mount"
holder_start "$MNT/t/open_writer" w
ofs_kill9
holder_kill
ofs_fsck
check_eq "unclean store: fsck exits 0" 0 "$RC"
check_contains "unclean store: fsck says it was not cleanly unmounted" "not cleanly unmounted" "$OUT"
check_eq "unclean store: fsck's progress ends at its total (the open writer has no pages)" \
	"fsck: 3/3" "$(tail -n 1 <<<"$ERR")"
ofs_mount "$GEOM" || ofs_bail "cannot remount after kill"
check_cmp "after kill -9 and fsck: a reads back" "$REF/a" "$MNT/t/d/a"
ofs_umount
check_fsck_clean "after the unclean store was remounted"

# ---- a flipped byte in a bucket file ----
bucket=$(field b bucket)
off=$(( $(field b page) * PAGE + 7 ))
bfile=$(printf '%s/bucket_%02x.data' "$ROOT" "$bucket")
python3 - "$bfile" "$off" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x40]))
EOF
ofs_fsck
check_eq "flipped byte: fsck exits 1" 1 "$RC"
check_contains "flipped byte: fsck names the file" "'b': checksum mismatch" "$OUT"
check_contains "flipped byte: fsck says PROBLEMS FOUND" "fsck: PROBLEMS FOUND" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "flipped byte: fsck --repair exits 0" 0 "$RC"
check_contains "repair: b moved to lost+found" "repair: 'b' moved to lost+found/" "$OUT"
ofs_fsck
check_eq "after repair: fsck exits 0" 0 "$RC"
check_contains "after repair: fsck counts one quarantined object" "quarantined 1" "$OUT"
ofs_mount "$GEOM,noverify" || ofs_bail "cannot mount after repair"
check_eq "after repair: b is gone from its place" "no" "$([ -e "$MNT/t/b" ] && echo yes || echo no)"
ino_b=$(ls "$MNT/t/lost+found")
check_eq "after repair: lost+found holds one entry" 1 "$(echo "$ino_b" | wc -w)"
check_eq "after repair: the quarantined file keeps its size (never deleted)" $((PAGE + 1)) \
	"$(stat -c %s "$MNT/t/lost+found/$ino_b")"
check_cmp "after repair: the other files are intact" "$REF/a" "$MNT/t/d/a"
ofs_umount
ofs_mount "$GEOM" || ofs_bail "cannot mount with verify"
check_fails "verify: reading the quarantined file is EIO" "Input/output error" \
	cat "$MNT/t/lost+found/$ino_b"
ofs_umount
rm -rf "$ROOT"/* "$ROOT"/.[!.]* 2>/dev/null

# ---- a leaked page: a bit set in the clean snapshot that no mapping owns ----
make_store
python3 - "$DB" <<'EOF'
import sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
n, words = db.execute("SELECT npages, words FROM bitmaps WHERE bucket = 0").fetchone()
w = list(struct.unpack("<%dQ" % (len(words) // 8), words))
w[-1] |= 1 << 63 if n % 64 == 0 else 1 << (n % 64 - 1)   # the last page of bucket 0
db.execute("UPDATE bitmaps SET words = ? WHERE bucket = 0", (struct.pack("<%dQ" % len(w), *w),))
db.commit()
EOF
ofs_fsck
check_eq "leaked page: fsck exits 1" 1 "$RC"
check_contains "leaked page: fsck counts it" "1 leaked page(s)" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "leaked page: --repair exits 0" 0 "$RC"
check_contains "leaked page: --repair frees it" "repair: freed 1 leaked page(s)" "$OUT"
check_fsck_clean "after freeing the leaked page"
used=$(sqlite3 "$DB" "SELECT sum(npages) FROM inodes")
ofs_mount "$GEOM" || ofs_bail "cannot mount"
check_eq "after repair: statfs counts only the files' pages as used" $((128 - used)) "$(ofs_free)"
ofs_umount
rm -rf "$ROOT"/* 2>/dev/null

# ---- an overlapping mapping: c's row points into a's pages ----
make_store
sqlite3 "$DB" "UPDATE inodes SET bucket = $(field a bucket), page = $(field a page) WHERE name = CAST('c' AS BLOB)"
ofs_fsck
check_eq "overlap: fsck exits 1" 1 "$RC"
check_contains "overlap: fsck reports it" "overlap another object" "$OUT"
# A store whose clean snapshot hides the overlap is still refused at a mount
# that rebuilds (clean flag cleared, as after a crash).
sqlite3 "$DB" "UPDATE store SET v = 0 WHERE k = 'clean'"
ofs_mount "$GEOM"
check_eq "overlap: the mount is refused" "no" "$(is_mounted "$MNT" && echo yes || echo no)"
check_contains "overlap: the refusal says why" "overlap another object" "$(cat "$LOG")"
run "$OFSCTL" fsck "$ROOT" --repair
check_contains "overlap: --repair quarantines the object that fails its checksum" \
	"repair: 'c' moved to lost+found/" "$OUT"
ofs_mount "$GEOM" || ofs_bail "cannot mount after the overlap repair"
check_cmp "overlap: the intact owner reads back" "$REF/a" "$MNT/t/d/a"
ofs_umount
ofs_fsck
check_eq "after the overlap repair: fsck exits 0" 0 "$RC"
rm -rf "$ROOT"/* 2>/dev/null

# ---- a truncated bucket file ----
make_store
victim=$(printf '%s/bucket_%02x.data' "$ROOT" "$(field a bucket)")
truncate -s $PAGE "$victim"
ofs_fsck
check_eq "truncated bucket: fsck exits 1" 1 "$RC"
check_contains "truncated bucket: fsck names it" "(truncated)" "$OUT"
check_contains "truncated bucket: fsck names the object past its end" "'d/a': ends past the end" "$OUT"
ofs_mount "$GEOM"
check_eq "truncated bucket: the mount is refused" "no" "$(is_mounted "$MNT" && echo yes || echo no)"
check_eq "truncated bucket: never extended by fsck or the refused mount" "$PAGE" "$(stat -c %s "$victim")"
# Other corruption is still found meanwhile: a flipped byte in an intact region.
for other in b c; do
	if [ "$(field $other bucket)" != "$(field a bucket)" ] ||
		[ $(( ($(field $other page) + $(field $other npages)) * PAGE )) -le $PAGE ]; then
		break
	fi
done
ooff=$(( $(field $other page) * PAGE + 3 ))
python3 - "$(printf '%s/bucket_%02x.data' "$ROOT" "$(field $other bucket)")" "$ooff" <<'EOF2'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x40]))
EOF2
ofs_fsck
check_contains "truncated bucket: fsck still checks the other objects' checksums" \
	"'$other': checksum mismatch" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "truncated bucket: fsck --repair exits 0" 0 "$RC"
check_contains "truncated bucket: --repair restores its size" "restored to 4194304 bytes" "$OUT"
check_eq "truncated bucket: restored to bucket_size" 4194304 "$(stat -c %s "$victim")"
ofs_fsck
check_eq "truncated bucket: fsck after the repair exits 0" 0 "$RC"
ofs_mount "$GEOM" || ofs_bail "the repaired store does not mount"
check_eq "truncated bucket: what it lost and the corrupt one are in lost+found" 2 \
	"$(ls "$MNT/t/lost+found" | wc -l)"
for f in b c; do
	[ "$f" == "$other" ] || check_cmp "truncated bucket: intact '$f' reads back" "$REF/$f" "$MNT/t/$f"
done
ofs_umount
# A missing bucket file: the same.
rm "$victim"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "missing bucket: fsck --repair exits 0" 0 "$RC"
check_eq "missing bucket: recreated at bucket_size, 0600" "4194304 600" "$(stat -c '%s %a' "$victim")"
ofs_mount "$GEOM" || ofs_bail "the repaired store does not mount after a missing bucket"
ofs_umount
check_fsck_clean "missing bucket repaired"
rm -rf "$ROOT"/* 2>/dev/null

# ---- a user's file named lost+found, and objects nothing can reach ----
make_store
ofs_mount "$GEOM" || ofs_bail "cannot mount"
echo mine >"$MNT/t/lost+found"
ofs_umount
python3 - "$(printf '%s/bucket_%02x.data' "$ROOT" "$(field b bucket)")" \
	"$(( $(field b page) * PAGE + 5 ))" <<'EOF2'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x40]))
EOF2
bino=$(field b ino)
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "lost+found is a file: --repair exits 0" 0 "$RC"
check_eq "lost+found is a file: the corrupt object went to a directory beside it" \
	"lost+found.1 dir" \
	"$(sqlite3 -separator " " "$DB" "SELECT p.name, CASE WHEN p.mode & 61440 = 16384 THEN 'dir' ELSE 'file' END
		FROM inodes o JOIN inodes p ON p.ino = o.parent WHERE o.ino = $bino")"
ofs_mount "$GEOM" || ofs_bail "cannot mount after the repair"
check_eq "lost+found is a file: the user's file is untouched" mine "$(cat "$MNT/t/lost+found")"
rm -rf "$MNT/t"
ofs_umount
check_eq "after the tenant is deleted no object holds pages" 0 \
	"$(sqlite3 "$DB" 'SELECT count(*) FROM inodes WHERE npages > 0')"
# An object whose parent is gone (a damaged database): found, deleted on --repair.
ofs_mount "$GEOM" || ofs_bail "cannot mount"
mkdir -p "$MNT/u/d"
cp "$REF/a" "$MNT/u/d/x"
ofs_umount
sqlite3 "$DB" "DELETE FROM inodes WHERE name = CAST('d' AS BLOB)"
ofs_fsck
check_eq "unreachable object: fsck exits 1" 1 "$RC"
check_contains "unreachable object: fsck says so" "unreachable" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "unreachable object: --repair exits 0" 0 "$RC"
check_eq "unreachable object: its row is deleted" 0 \
	"$(sqlite3 "$DB" 'SELECT count(*) FROM inodes WHERE npages > 0')"
check_fsck_clean "after deleting the unreachable object"
ofs_mount "$GEOM" || ofs_bail "cannot mount"
check_eq "unreachable object: its pages are free again" "$(ofs_blocks)" "$(ofs_free)"
ofs_umount
rm -rf "$ROOT"/* 2>/dev/null

# ---- a damaged geometry record: fsck and the daemon agree ----
make_store
sqlite3 "$DB" "UPDATE store SET v = 3 WHERE k = 'page_size'"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "page_size=3 recorded: fsck --repair exits 2" 2 "$RC"
check_contains "page_size=3 recorded: fsck names it" "invalid page_size 3" "$ERR"
ofs_mount "" 
check_eq "page_size=3 recorded: the mount is refused" no "$(is_mounted "$MNT" && echo yes || echo no)"
check_grep_log "page_size=3 recorded: the daemon names it the same way" "invalid page_size 3"
sqlite3 "$DB" "UPDATE store SET v = -5 WHERE k = 'page_size'"
ofs_fsck
check_eq "negative page_size: fsck exits 2" 2 "$RC"
check_contains "negative page_size: a damaged record, not a new store" "damaged geometry" "$ERR"
rm -rf "$ROOT"/* 2>/dev/null

# ---- a database from a newer schema version, and a foreign one: never touched ----
make_store
sqlite3 "$DB" "PRAGMA user_version = 9"
sum=$(md5sum <"$DB")
ofs_fsck
check_eq "newer schema: fsck exits 2" 2 "$RC"
check_contains "newer schema: found X, expected Y" "found 9, expected 4" "$ERR"
check_eq "newer schema: the database is untouched" "$sum" "$(md5sum <"$DB")"
rm -rf "$ROOT"/* 2>/dev/null

# ---- an older schema (1): fsck leaves it as it is; --repair or a mount upgrades it ----
make_store
sqlite3 "$DB" "DROP TRIGGER inodes_extents; DROP TABLE extents;
	DROP TRIGGER inodes_nlink_insert; DROP TRIGGER inodes_nlink_delete;
	DROP TRIGGER inodes_nlink_move; DROP TRIGGER inodes_xattrs; DROP TABLE xattrs;
	ALTER TABLE inodes DROP COLUMN nlink;
	ALTER TABLE inodes DROP COLUMN skey; ALTER TABLE inodes DROP COLUMN prev_skey;
	PRAGMA user_version = 1"
sum=$(md5sum <"$DB")
ofs_fsck
check_eq "older schema: fsck without --repair exits 2" 2 "$RC"
check_contains "older schema: says how it gets upgraded" "schema version 1, older than this build's 4" "$ERR"
check_eq "older schema: the database is untouched" "$sum" "$(md5sum <"$DB")"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "older schema: fsck --repair upgrades it and checks it" 0 "$RC"
check_eq "older schema: now schema 4" 4 "$(sqlite3 "$DB" 'PRAGMA user_version')"
ofs_mount "$GEOM" || ofs_bail "cannot mount the upgraded store"
check_cmp "older schema: the upgraded store mounts and reads" "$REF/a" "$MNT/t/d/a"
ofs_umount
rm -rf "$ROOT"/* 2>/dev/null
sqlite3 "$DB" "CREATE TABLE kv (k TEXT, v BLOB); INSERT INTO kv VALUES ('x', 'y')"
sum=$(md5sum <"$DB")
ofs_fsck
check_eq "foreign database: fsck exits 2" 2 "$RC"
check_contains "foreign database: says so" "not an offloadfs database" "$ERR"
check_eq "foreign database: untouched" "$sum" "$(md5sum <"$DB")"
printf 'garbage, not sqlite at all\n%.0s' {1..200} >"$DB"
sum=$(md5sum <"$DB")
ofs_fsck
check_eq "corrupt database: fsck exits 2" 2 "$RC"
check_eq "corrupt database: untouched" "$sum" "$(md5sum <"$DB")"
# ---- scrub checks every object, a path longer than PATH_MAX too ----
rm -rf "$ROOT"/* 2>/dev/null
make_store
ofs_mount "$GEOM" || ofs_bail "cannot mount"
python3 - "$MNT/t" <<'EOF2'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
for i in range(16):  # 16 levels of 250-byte names: a key of 4,076 bytes, under $MNT/t
    name = ("%02d" % i) * 125
    os.mkdir(name, dir_fd=fd)
    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
f = os.open("d" * 60, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.write(f, b"deep object\n" * 100)
os.close(f)
EOF2
# Committed at its release, which close(2) does not wait for.
ofs_remount || ofs_bail "cannot remount"
run "$OFSCTL" scrub "$MNT"
check_eq "scrub: exits 0 when every object, the one past PATH_MAX too, checks" 0 "$RC"
check_contains "scrub: counts all 4 objects, none left out" "4 files" "$OUT"
check_eq "scrub's progress: the files checked of those the mount holds" "scrub: 4/4" \
	"$(tail -n 1 <<<"$ERR")"
ofs_umount

# ---- a file of extents: a flipped byte in one extent, a leaked extent ----
rm -rf "$ROOT"/* 2>/dev/null
XGEOM="bucket_count=4,bucket_size=4M,extent_size=1M"
ofs_mount "$XGEOM" || ofs_bail "cannot mount with extent_size=1M"
mkdir -p "$MNT/t"
mkrand "$REF/x" $((3 * 1048576 + 5000)) # 4 extents, the last partly filled
mkrand "$REF/y" 5000
cp "$REF/x" "$MNT/t/x"
cp "$REF/y" "$MNT/t/y"
ofs_umount
xino=$(field x ino)
check_eq "file of extents: 4 extent rows" 4 "$(sqlite3 "$DB" "SELECT count(*) FROM extents WHERE ino = $xino")"
ofs_fsck
check_eq "file of extents: a clean store checks clean" 0 "$RC"
# Flip one byte in extent 2, 1000 bytes into its run.
read -r xb xp <<<"$(sqlite3 -separator ' ' "$DB" "SELECT bucket, page FROM extents WHERE ino = $xino AND idx = 2")"
python3 - "$(printf '%s/bucket_%02x.data' "$ROOT" "$xb")" $((xp * PAGE + 1000)) <<'EOF2'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x01]))
EOF2
ofs_fsck
check_eq "file of extents, flipped byte: fsck exits 1" 1 "$RC"
check_contains "file of extents, flipped byte: fsck names the file" "'x'" "$OUT"
check_contains "file of extents, flipped byte: and its checksum mismatch" "checksum mismatch" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "file of extents: fsck --repair exits 0" 0 "$RC"
check_contains "file of extents: --repair moves x to lost+found" "repair: 'x' moved to lost+found/" "$OUT"
ofs_fsck
check_eq "file of extents: fsck after the repair exits 0" 0 "$RC"
check_eq "file of extents: its 4 extents kept (quarantined, never deleted)" 4 \
	"$(sqlite3 "$DB" "SELECT count(*) FROM extents WHERE ino = $xino")"
ofs_mount "$XGEOM,noverify" || ofs_bail "cannot mount after the repair"
qx=$(ls "$MNT/t/lost+found")
check_eq "file of extents: the quarantined file keeps its size" $((3 * 1048576 + 5000)) \
	"$(stat -c %s "$MNT/t/lost+found/$qx")"
check_eq "file of extents: only the flipped byte differs" 1 \
	"$(cmp -l "$REF/x" "$MNT/t/lost+found/$qx" | wc -l)"
check_cmp "file of extents: the other file is intact" "$REF/y" "$MNT/t/y"
ofs_umount
ofs_mount "$XGEOM" || ofs_bail "cannot mount with verify"
check_fails "file of extents: reading the damaged extent is EIO" "Input/output error" \
	cat "$MNT/t/lost+found/$qx"
check_eq "file of extents: reading an intact extent works" \
	"$(dd if="$REF/x" bs=1M count=1 2>/dev/null | md5sum)" \
	"$(dd if="$MNT/t/lost+found/$qx" bs=1M count=1 2>/dev/null | md5sum)"
rm -f "$MNT/t/lost+found/$qx"
ofs_umount
check_eq "file of extents: its extent rows go with it" 0 \
	"$(sqlite3 "$DB" "SELECT count(*) FROM extents WHERE ino = $xino")"
check_fsck_clean "after the quarantined file of extents was deleted"
ofs_mount "$XGEOM" || ofs_bail "cannot mount"
cp "$REF/x" "$MNT/t/x2"
ofs_umount
# An extent row whose file is gone (a damaged database): its pages leak.
x2=$(field x2 ino)
sqlite3 "$DB" "DROP TRIGGER inodes_extents; DELETE FROM inodes WHERE ino = $x2"
ofs_fsck
check_eq "orphan extents: fsck exits 1" 1 "$RC"
check_contains "orphan extents: fsck counts their records" "4 extent record(s) of no file" "$OUT"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "orphan extents: --repair exits 0" 0 "$RC"
check_contains "orphan extents: --repair deletes their records" \
	"repair: deleted 4 extent record(s) of no file" "$OUT"
check_eq "orphan extents: no record left" 0 "$(sqlite3 "$DB" "SELECT count(*) FROM extents")"
check_fsck_clean "after the orphan extents' repair"
ofs_mount "$XGEOM" || ofs_bail "cannot mount after the orphan extents' repair"
check_eq "orphan extents: their pages are free again (only y's page used)" \
	"$(( $(ofs_blocks) - 1 ))" "$(ofs_free)"
ofs_umount

run "$OFSCTL" fsck "$TESTDIR/no-such-root"
check_eq "missing ROOT: fsck exits 2" 2 "$RC"
check_contains "missing ROOT: says so" "No such file or directory" "$ERR"

ofs_done
