#!/usr/bin/env bash
# t-fsck.sh: offloadctl fsck on stores damaged on purpose: a flipped byte
# in a bucket file, a leaked page, an overlapping mapping, a truncated
# bucket file, a database from a newer schema version, a foreign database;
# --repair moves corrupted objects to <tenant>/lost+found and frees leaked
# pages, never deletes; an unclean store (kill -9) checks clean.
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
rm -rf "$ROOT"/* 2>/dev/null

# ---- a database from a newer schema version, and a foreign one: never touched ----
make_store
sqlite3 "$DB" "PRAGMA user_version = 9"
sum=$(md5sum <"$DB")
ofs_fsck
check_eq "newer schema: fsck exits 2" 2 "$RC"
check_contains "newer schema: found X, expected Y" "found 9, expected 3" "$ERR"
check_eq "newer schema: the database is untouched" "$sum" "$(md5sum <"$DB")"
rm -rf "$ROOT"/* 2>/dev/null

# ---- an older schema (1): fsck leaves it as it is; --repair or a mount upgrades it ----
make_store
sqlite3 "$DB" "DROP TRIGGER inodes_nlink_insert; DROP TRIGGER inodes_nlink_delete;
	DROP TRIGGER inodes_nlink_move; DROP TRIGGER inodes_xattrs; DROP TABLE xattrs;
	ALTER TABLE inodes DROP COLUMN nlink;
	ALTER TABLE inodes DROP COLUMN skey; ALTER TABLE inodes DROP COLUMN prev_skey;
	PRAGMA user_version = 1"
sum=$(md5sum <"$DB")
ofs_fsck
check_eq "older schema: fsck without --repair exits 2" 2 "$RC"
check_contains "older schema: says how it gets upgraded" "schema version 1, older than this build's 3" "$ERR"
check_eq "older schema: the database is untouched" "$sum" "$(md5sum <"$DB")"
run "$OFSCTL" fsck "$ROOT" --repair
check_eq "older schema: fsck --repair upgrades it and checks it" 0 "$RC"
check_eq "older schema: now schema 3" 3 "$(sqlite3 "$DB" 'PRAGMA user_version')"
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
run "$OFSCTL" fsck "$TESTDIR/no-such-root"
check_eq "missing ROOT: fsck exits 2" 2 "$RC"
check_contains "missing ROOT: says so" "No such file or directory" "$ERR"

ofs_done
