#!/usr/bin/env bash
# t-security: what other local users can reach in ROOT (modes, data_group),
# descriptors no name or path can add a line to, symbolic links in ROOT,
# the ubsio library recorded as an absolute path, and a ROOT inside the
# mount point.  Runs on the pages backend; the ubsio parts use the stand-in
# library directly.
set -u
. "$(dirname "$0")/lib.sh"

LIB="$OFS_BUILD/tests/libubsio_kvc.so"
export UBSIO_STUB_DIR="$TESTDIR/kv"
mkdir -p "$UBSIO_STUB_DIR"
desc() { getfattr --absolute-names --only-values -n user.offload.descriptor "$1"; }
# nobody CMD...: run CMD as uid/gid 65534, with the supplementary groups in $GROUPS_OF_NOBODY.
nobody() {
	if [ -n "$GROUPS_OF_NOBODY" ]; then
		setpriv --reuid=65534 --regid=65534 --groups="$GROUPS_OF_NOBODY" "$@"
	else
		setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	fi
}
refuse_mount() { # NAME TEXT OPTS: the daemon exits non-zero, its stderr has TEXT
	run timeout 20 "$OFS" "$ROOT" "$MNT" -f -o "$3"
	if [ "$RC" -ne 0 ] && [[ "$ERR" == *"$2"* ]] && ! is_mounted "$MNT"; then
		ok "$1"
	else
		not_ok "$1" "exit $RC, stderr '${ERR:0:400}'"
		is_mounted "$MNT" && fusermount3 -u "$MNT"
	fi
}
modes() { (cd "$ROOT" && stat -c '%n %a' "$@" | tr '\n' ' ' | sed 's/ $//'); }
GROUPS_OF_NOBODY=""
# Let nobody reach ROOT's parent: only ROOT's own mode may stop it.
chmod 0755 "$TESTDIR"

# ---- modes: ROOT 0700, its files 0600 ----
ofs_mount || ofs_bail "cannot mount"
mkdir "$MNT/t"
echo secret >"$MNT/t/f"
check_eq "ROOT is 0700 while mounted" 700 "$(stat -c %a "$ROOT")"
check_eq "bucket files and the database are 0600" \
	"bucket_00.data 600 bucket_03.data 600 offloadfs.db 600 offloadfs.db-wal 600" \
	"$(modes bucket_00.data bucket_03.data offloadfs.db offloadfs.db-wal)"
check_fails "nobody cannot copy the database" "Permission denied" nobody cat "$ROOT/offloadfs.db"
check_fails "nobody cannot read a bucket file" "Permission denied" \
	nobody dd if="$ROOT/bucket_00.data" of=/dev/null count=1
ofs_umount

# A store made with wide modes gets them narrowed at its next mount.
chmod 0755 "$ROOT"
chmod 0644 "$ROOT"/bucket_0*.data "$ROOT/offloadfs.db"
ofs_mount || ofs_bail "cannot remount"
check_eq "a 0755 ROOT and 0644 files become 0700 and 0600" \
	"700 bucket_01.data 600 offloadfs.db 600" \
	"$(stat -c %a "$ROOT") $(modes bucket_01.data offloadfs.db)"
ofs_umount

# ---- data_group: the group reads the bucket files, never the database ----
GRP=adm
GID=$(getent group "$GRP" | cut -d: -f3)
ofs_mount "data_group=$GRP" || ofs_bail "cannot mount with data_group"
check_eq "data_group: ROOT 0750 in the group" "750 $GID" "$(stat -c '%a %g' "$ROOT")"
check_eq "data_group: bucket files 0640 in the group" "640 $GID 640 $GID" \
	"$(stat -c '%a %g' "$ROOT/bucket_00.data" "$ROOT/bucket_02.data" | tr '\n' ' ' | sed 's/ $//')"
check_eq "data_group: the database stays 0600" 600 "$(stat -c %a "$ROOT/offloadfs.db")"
check_eq "data_group: the batch epoch table 0640 in the group, as the buckets" "640 $GID" \
	"$(stat -c '%a %g' "$ROOT/batch-epochs")"
GROUPS_OF_NOBODY=$GID
d=$(desc "$MNT/t/f")
bf=$(sed -n 's/^file_path=//p' <<<"$d")
off=$(sed -n 's/^offset=//p' <<<"$d")
run nobody /usr/bin/python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); print(os.pread(fd, 6, int(sys.argv[2])).decode())' "$bf" "$off"
check_eq "data_group: a member reads the object from its bucket file" "0 secret" "$RC $OUT"
check_fails "data_group: a member still cannot read the database" "Permission denied" \
	nobody cat "$ROOT/offloadfs.db"
GROUPS_OF_NOBODY=""
check_fails "data_group: others cannot read a bucket file" "Permission denied" \
	nobody cat "$ROOT/bucket_00.data"
ofs_umount
ofs_mount || ofs_bail "cannot remount without data_group"
check_eq "without data_group again: 0700 and 0600" "700 bucket_00.data 600 batch-epochs 600" \
	"$(stat -c %a "$ROOT") $(modes bucket_00.data batch-epochs)"
ofs_umount
refuse_mount "data_group of an unknown group is refused" "invalid data_group" \
	"data_group=no-such-group-ofs"

# ---- symbolic links in ROOT ----
echo target >"$TESTDIR/target"
truncate -s 64M "$TESTDIR/target"
sum=$(md5sum <"$TESTDIR/target")
mv "$ROOT/bucket_01.data" "$TESTDIR/bucket_01.saved"
ln -s "$TESTDIR/target" "$ROOT/bucket_01.data"
refuse_mount "a bucket file replaced by a symlink: the mount is refused" "symbolic link" \
	"bucket_count=4,bucket_size=64M"
check_eq "its target is untouched" "$sum" "$(md5sum <"$TESTDIR/target")"
ofs_fsck
check_eq "fsck: the symlinked bucket is a problem" "yes" "$([ "$RC" -ne 0 ] && echo yes || echo no)"
check_eq "its target is still untouched after fsck" "$sum" "$(md5sum <"$TESTDIR/target")"
rm "$ROOT/bucket_01.data"
mv "$TESTDIR/bucket_01.saved" "$ROOT/bucket_01.data"

ROOT="$TESTDIR/root2"
mkdir "$ROOT"
ln -s "$TESTDIR/elsewhere.db" "$ROOT/offloadfs.db"
refuse_mount "a dangling offloadfs.db symlink: the mount is refused" "symbolic link" \
	"bucket_count=4,bucket_size=64M"
check_eq "no database created at its target" no "$([ -e "$TESTDIR/elsewhere.db" ] && echo yes || echo no)"
check_eq "nothing else created in ROOT" "offloadfs.db" "$(ls -A "$ROOT")"
rm "$ROOT/offloadfs.db"
run "$OFSCTL" fsck "$ROOT" --meta "$ROOT/offloadfs.db"
ln -s "$TESTDIR/elsewhere.db" "$TESTDIR/meta-link.db"
refuse_mount "meta= naming a symlink is refused" "symbolic link" \
	"bucket_count=4,bucket_size=64M,meta=$TESTDIR/meta-link.db"
check_eq "no database created at the meta= link's target" no \
	"$([ -e "$TESTDIR/elsewhere.db" ] && echo yes || echo no)"

# ---- descriptors: no name or path adds a line ----
ROOT="$TESTDIR/root"$'\n'"offset=0"
mkdir "$ROOT"
ofs_mount || ofs_bail "cannot mount a ROOT holding a newline"
mkdir "$MNT/t"
printf 'newline root\n' >"$MNT/t/f"
d=$(desc "$MNT/t/f")
check_eq "a ROOT with a newline: the descriptor still has 3 lines" 3 "$(grep -c . <<<"$d")"
check_eq "file_path has the newline as %0A" \
	"file_path=$TESTDIR/root%0Aoffset=0/bucket_" \
	"$(head -1 <<<"$d" | sed 's/bucket_...data$/bucket_/')"
run "$OFSCTL" scrub "$MNT"
check_eq "scrub decodes the path and finds the object clean" "0 yes" \
	"$RC $(grep -q '^scrub .*: 1 files' <<<"$OUT" && echo yes || echo no)"
ofs_umount

ROOT="$TESTDIR/kvroot"
mkdir "$ROOT"
U="bucket_count=4,bucket_size=64M,backend=ubsio,ubsio_lib=$LIB,ubsio_ssd_size=0"
ofs_mount "$U" || ofs_bail "cannot mount a ubsio store"
check_eq "ubsio: ROOT 0700, the database and the journal 0600" \
	"700 offloadfs.db 600 ubsio.journal 600" "$(stat -c %a "$ROOT") $(modes offloadfs.db ubsio.journal)"
mkdir "$MNT/t" "$MNT/victim"
printf 'victim data\n' >"$MNT/victim/v"
evil="evil"$'\n'"key=victim%"
printf 'evil data\n' >"$MNT/t/$evil"
d=$(desc "$MNT/t/$evil")
check_eq "ubsio: a key with a newline: 3 lines, one key=" "3 1" \
	"$(grep -c . <<<"$d") $(grep -c '^key=' <<<"$d")"
check_contains "ubsio: the newline and the % are escaped" "key=t/evil%0Akey=victim%25#" "$d"
run "$OFSCTL" scrub "$MNT"
check_eq "ubsio: scrub reads the right value for each (clean, 2 files)" "0 yes" \
	"$RC $(grep -q '^scrub .*: 2 files' <<<"$OUT" && echo yes || echo no)"
[ "$RC" -eq 0 ] || note "scrub: ${OUT//$'\n'/ | }"
ofs_umount

# ---- ubsio_lib: recorded as an absolute path ----
ROOT="$TESTDIR/kvroot2"
mkdir "$ROOT"
run sh -c "cd '$OFS_BUILD' && exec '$OFS' '$ROOT' '$MNT' -o bucket_count=4,bucket_size=64M,backend=ubsio,ubsio_lib=./tests/libubsio_kvc.so,ubsio_ssd_size=0"
wait_until 5 mountpoint -q "$MNT"
check_eq "a relative ubsio_lib mounts" 0 "$RC"
fusermount3 -u "$MNT"
wait_until 10 sh -c "! pgrep -f -- '$ROOT' >/dev/null"
check_eq "and is recorded as an absolute path" "$(realpath "$LIB")" \
	"$(sqlite3 "$ROOT/offloadfs.db" "SELECT v FROM store WHERE k='ubsio_lib'")"
(cd "$TESTDIR" && "$OFSCTL" fsck "$ROOT" >/dev/null 2>&1)
check_eq "fsck from another directory loads the recorded library" 0 "$?"

# ---- ROOT at or inside the mount point ----
ROOT="$TESTDIR/root"
run timeout 20 "$OFS" "$MNT" "$MNT" -f
check_eq "ROOT equal to the mount point is refused" "yes" \
	"$([ "$RC" -ne 0 ] && [[ "$ERR" == *"the mount point"* ]] && ! is_mounted "$MNT" && echo yes || echo no)"
mkdir -p "$MNT/inner"
run timeout 20 "$OFS" "$MNT/inner" "$MNT" -f
check_eq "ROOT inside the mount point is refused" "yes" \
	"$([ "$RC" -ne 0 ] && [[ "$ERR" == *"inside the mount point"* ]] && ! is_mounted "$MNT" && echo yes || echo no)"
check_eq "nothing created in it" "" "$(ls -A "$MNT/inner")"
rmdir "$MNT/inner"

ofs_done
