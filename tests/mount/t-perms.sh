#!/usr/bin/env bash
# t-perms.sh: modes and owners are enforced by the kernel (default_permissions)
# for another user (nobody, 65534) on an allow_other mount; without
# allow_other other users cannot enter the mount at all.
set -u
. "$(dirname "$0")/lib.sh"

# nobody CMD...: run CMD as uid/gid 65534 without supplementary groups.
nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# mktemp -d makes TESTDIR 0700: let nobody reach the mount point.
if ! nobody_ready; then
	skip "another user on the mount" "$NOBODY_WHY"
	ofs_done
fi
chmod 0755 "$MNT"

ofs_mount "bucket_count=4,bucket_size=64M,allow_other" || ofs_bail "cannot mount"
check_eq "the top level is root's, 0755" "755 0 0" "$(stat -c '%a %u %g' "$MNT")"

# A private tenant.
mkdir "$MNT/priv"
chmod 0700 "$MNT/priv"
echo secret >"$MNT/priv/f"
chmod 0644 "$MNT/priv/f"
check_fails "nobody: ls of a 0700 root-owned tenant fails" "Permission denied" nobody ls "$MNT/priv"
check_fails "nobody: cat of a file in it fails" "Permission denied" nobody cat "$MNT/priv/f"
check_fails "nobody: stat of a file in it fails" "Permission denied" nobody stat "$MNT/priv/f"
check_fails "nobody: creating a file in it fails" "Permission denied" nobody touch "$MNT/priv/new"
check_eq "root still reads it" secret "$(cat "$MNT/priv/f")"

# A public tenant.
mkdir "$MNT/pub"
chmod 0755 "$MNT/pub"
echo public >"$MNT/pub/f"
chmod 0644 "$MNT/pub/f"
run nobody cat "$MNT/pub/f"
check_eq "nobody: cat of a 0644 file in a 0755 tenant works" "0 public" "$RC $OUT"
run nobody ls "$MNT/pub"
check_eq "nobody: ls of a 0755 tenant works" "0 f" "$RC $OUT"
check_fails "nobody: appending to the 0644 file fails" "Permission denied" \
	nobody sh -c "echo x >> '$MNT/pub/f'"
check_fails "nobody: truncating the 0644 file fails" "Permission denied" nobody truncate -s 0 "$MNT/pub/f"
check_fails "nobody: creating a file in the 0755 tenant fails" "Permission denied" \
	nobody touch "$MNT/pub/new"
check_fails "nobody: unlinking in the 0755 tenant fails" "Permission denied" nobody rm -f "$MNT/pub/f"
check_fails "nobody: chmod of root's file fails" "Operation not permitted" nobody chmod 0666 "$MNT/pub/f"
check_fails "nobody: creating a tenant at the 0755 top level fails" "Permission denied" \
	nobody mkdir "$MNT/mine"
check_eq "the 0644 file is unchanged" public "$(cat "$MNT/pub/f")"
chmod 0600 "$MNT/pub/f"
check_fails "nobody: cat after chmod 0600 fails" "Permission denied" nobody cat "$MNT/pub/f"

# A tenant given to nobody: its files are nobody's.
mkdir "$MNT/nob"
chown 65534:65534 "$MNT/nob"
check "nobody: writing in its own tenant works" nobody sh -c "echo mine > '$MNT/nob/f' && mkdir '$MNT/nob/d'"
check_eq "files nobody creates are owned by 65534:65534" "65534:65534 65534:65534" \
	"$(stat -c %u:%g "$MNT/nob/f") $(stat -c %u:%g "$MNT/nob/d")"
check "nobody: chmod of its own file works" nobody chmod 0600 "$MNT/nob/f"
check_eq "nobody: reads its 0600 file back" mine "$(nobody cat "$MNT/nob/f" 2>&1)"
check_eq "mode 0600 recorded" 600 "$(stat -c %a "$MNT/nob/f")"

# A setgid directory: new entries take its group, subdirectories its setgid bit.
mkdir "$MNT/pub/sg"
chgrp 4242 "$MNT/pub/sg"
chmod 2775 "$MNT/pub/sg"
echo g >"$MNT/pub/sg/f"
mkdir "$MNT/pub/sg/d"
check_eq "setgid dir: the new file's group is the dir's" 4242 "$(stat -c %g "$MNT/pub/sg/f")"
check_eq "setgid dir: the new subdir's group and setgid bit" "4242 2" \
	"$(stat -c %g "$MNT/pub/sg/d") $(( $(stat -c 0%a "$MNT/pub/sg/d") / 01000 % 8 ))"

# A write drops the set-user-ID bit, and a group-executable file's
# set-group-ID bit, whether it goes through the kernel's cache (read-write)
# or around it (a write-only create, bits set after the create), and a
# stat of the mode alone sees it at once; root's write keeps them.
mkdir "$MNT/pub/sid"
chmod 0777 "$MNT/pub/sid"
for how in "O_WRONLY 6755 755" "O_RDWR 6755 755" "O_WRONLY 2745 2745"; do
	set -- $how
	run nobody /usr/bin/python3 - "$MNT/pub/sid/$1-$2" "$1" "$2" <<'EOF'
import os, sys
path, flag, mode = sys.argv[1], getattr(os, sys.argv[2]), int(sys.argv[3], 8)
fd = os.open(path, os.O_CREAT | os.O_EXCL | flag, 0o755)
os.write(fd, b"a" * 100)
os.fchmod(fd, mode)
os.pwrite(fd, b"b" * 100, 0)
os.close(fd)
EOF
	check_eq "nobody's $1 create, chmod $2, write: mode $3" "0 $3" \
		"$RC $(stat -c %a "$MNT/pub/sid/$1-$2")"
done
python3 - "$MNT/pub/sid/root" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o755)
os.fchmod(fd, 0o6755)
os.write(fd, b"r")
os.close(fd)
EOF
check_eq "root's write-only create keeps them" 6755 "$(stat -c %a "$MNT/pub/sid/root")"

# Enforced after a remount too: modes and owners come from the store.
ofs_remount || ofs_bail "cannot remount"
check_fails "after remount: nobody still cannot ls the 0700 tenant" "Permission denied" nobody ls "$MNT/priv"
check_fails "after remount: nobody still cannot read the 0600 file" "Permission denied" nobody cat "$MNT/pub/f"
check_eq "after remount: nobody's file" "65534:65534 600 mine" \
	"$(stat -c '%u:%g %a' "$MNT/nob/f") $(nobody cat "$MNT/nob/f" 2>&1)"

# Without allow_other, other users cannot use the mount at all.
ofs_remount "" || ofs_bail "cannot remount without allow_other"
check_fails "without allow_other: nobody cannot even list the top level" "Permission denied" nobody ls "$MNT"
check_eq "without allow_other: root can" "nob priv pub" "$(ls "$MNT" | tr '\n' ' ' | sed 's/ $//')"

ofs_umount
check_fsck_clean "after the permissions test"
ofs_done
