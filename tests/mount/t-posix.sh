#!/usr/bin/env bash
# t-posix.sh: the POSIX rules pjdfstest, fsx, rsync and cp check, without
# them: directory times and link counts (kept across a remount; none for
# a removed directory still open), O_TRUNC
# times, the key length limit in every operation that makes a path (and a
# failed create leaves no name), user xattrs (kept, ours read-only), and
# fallocate's KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE.
set -u
. "$(dirname "$0")/lib.sh"

ofs_mount || ofs_bail "cannot mount"
T="$MNT/t"
mkdir "$T"

# py CODE ARGS...: run python with os, errno, sys imported, a = ARGS; print what it prints.
py() {
	python3 -c "import os, errno, sys, time
a = sys.argv[1:]
$1" "${@:2}"
}

# times PATH: "mtime_ns ctime_ns" of PATH.
times() {
	py 'st = os.stat(a[0]); print(st.st_mtime_ns, st.st_ctime_ns)' "$1"
}

# changed NAME PATH BEFORE: PATH's mtime and ctime both differ from BEFORE.
changed() {
	local now
	now=$(times "$2")
	if [ "${now% *}" != "${3% *}" ] && [ "${now#* }" != "${3#* }" ]; then
		ok "$1"
	else
		not_ok "$1" "times before '$3', after '$now'"
	fi
}

# ---- a directory's mtime and ctime follow its entries ----
mkdir "$T/d"
b=$(times "$T/d"); sleep 0.01; : >"$T/d/f"
changed "create changes the directory's mtime and ctime" "$T/d" "$b"
b=$(times "$T/d"); sleep 0.01; mkdir "$T/d/sub"
changed "mkdir changes the directory's mtime and ctime" "$T/d" "$b"
b=$(times "$T/d"); sleep 0.01; mv "$T/d/f" "$T/d/g"
changed "rename within it changes them" "$T/d" "$b"
mkdir "$T/e"
b=$(times "$T/d"); b2=$(times "$T/e"); sleep 0.01; mv "$T/d/g" "$T/e/g"
changed "rename out changes the old directory's" "$T/d" "$b"
changed "rename in changes the new directory's" "$T/e" "$b2"
b=$(times "$T/e"); sleep 0.01; rm "$T/e/g"
changed "unlink changes them" "$T/e" "$b"
b=$(times "$T/d"); sleep 0.01; rmdir "$T/d/sub"
changed "rmdir changes them" "$T/d" "$b"
b=$(times "$T"); sleep 0.01; : >"$T/h"
changed "create in a tenant changes the tenant's" "$T" "$b"
b=$(times "$MNT"); sleep 0.01; mkdir "$MNT/t2"
changed "mkdir of a tenant changes the root's" "$MNT" "$b"

# ---- a directory's link count: 2 + its subdirectories ----
mkdir -p "$T/n/a" "$T/n/b" "$T/n/c"
: >"$T/n/file"
check_eq "nlink of a directory with 3 subdirectories and a file" 5 "$(stat -c %h "$T/n")"
check_eq "nlink of an empty directory" 2 "$(stat -c %h "$T/n/a")"
rmdir "$T/n/c"
check_eq "rmdir lowers it" 4 "$(stat -c %h "$T/n")"
mv "$T/n/b" "$T/n/a/b"
check_eq "moving a subdirectory out lowers it" 3 "$(stat -c %h "$T/n")"
check_eq "and raises the new parent's" 3 "$(stat -c %h "$T/n/a")"
check_eq "the root counts its tenants" 4 "$(stat -c %h "$MNT")"
# A removed directory still open counts no link (xfstests generic/035).
mkdir -p "$T/rm/gone" "$T/rm/over" "$T/rm/src"
r=$(py 'fd = os.open(a[0], os.O_RDONLY); os.rmdir(a[0])
fd2 = os.open(a[1], os.O_RDONLY); os.rename(a[2], a[1])
print(os.fstat(fd).st_nlink, os.fstat(fd2).st_nlink)' "$T/rm/gone" "$T/rm/over" "$T/rm/src")
check_eq "fstat of a directory removed while open: rmdir, rename over it" "0 0" "$r"

# ---- O_TRUNC of a non-empty file changes mtime and ctime ----
echo content >"$T/tr"
b=$(times "$T/tr"); sleep 0.01
py 'os.close(os.open(a[0], os.O_WRONLY | os.O_TRUNC))' "$T/tr"
changed "open(O_TRUNC) changes mtime and ctime" "$T/tr" "$b"
check_eq "and empties it" 0 "$(stat -c %s "$T/tr")"

# Kept across a remount: times and link counts.
want_n=$(times "$T/n") want_d=$(times "$T/d") want_tr=$(times "$T/tr")
ofs_remount || ofs_bail "cannot remount"
check_eq "directory times survive a remount" "$want_n $want_d" "$(times "$T/n") $(times "$T/d")"
check_eq "O_TRUNC times survive a remount" "$want_tr" "$(times "$T/tr")"
check_eq "link counts survive a remount" "3 3 2 4" \
	"$(stat -c %h "$T/n" "$T/n/a" "$T/n/a/b" "$MNT" | tr '\n' ' ' | sed 's/ $//')"

# ---- keys: at most 4,095 bytes below the tenant, in every operation ----
# D: 15 directories of 255 bytes, key 3,839 bytes; a name of 255 in it: 4,095.
py '
os.chdir(a[0])
p = "/".join(["d" * 255] * 15)
os.makedirs(p)
print(len(p))
' "$T" >"$TESTDIR/dlen"
check_eq "15 levels of 255-byte names" 3839 "$(cat "$TESTDIR/dlen")"
r=$(py '
os.chdir(a[0])
p = "/".join(["d" * 255] * 15) + "/" + "f" * 255
fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"deep")
os.close(fd)
fd = os.open(p, os.O_RDWR)
os.write(fd, b"DEEP")
os.close(fd)
print(len(p), open(p, "rb").read().decode())
' "$T" 2>&1)
check_eq "a file with a 4,095-byte key is made, rewritten and read" "4095 DEEP" "$r"
# In a directory whose key is 4,094 bytes, any name makes 4,096.
r=$(py '
os.chdir(a[0])
os.chdir("/".join(["d" * 255] * 15))
os.mkdir("e" * 254)
os.chdir("e" * 254)
out = []
for what, f in (("create", lambda: os.close(os.open("x", os.O_CREAT | os.O_WRONLY, 0o644))),
                ("mkdir", lambda: os.mkdir("y"))):
    try:
        f()
        out.append(what + " OK")
    except OSError as e:
        out.append(what + " " + errno.errorcode[e.errno])
out.append("left: " + ",".join(sorted(os.listdir("."))))
print("; ".join(out))
' "$T" 2>&1)
check_eq "create and mkdir past 4,095 bytes: ENAMETOOLONG, nothing left" \
	"create ENAMETOOLONG; mkdir ENAMETOOLONG; left: " "$r"
: >"$T/short"
mkdir -p "$T/m"
py 'open(a[0] + "/" + "c" * 255, "w").close()' "$T/m"
r=$(py '
os.chdir(a[0])
d = "/".join(["d" * 255] * 15)
out = []
for src, dst in (("short", d + "/" + "e" * 254 + "/x"), ("m", d + "/z"), ("short", d + "/z")):
    try:
        os.rename(src, dst)
        out.append("OK")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(" ".join(out))
' "$T" 2>&1)
check_eq "rename of a file past 4,095, of a directory whose child would pass it, and one that fits" \
	"ENAMETOOLONG ENAMETOOLONG OK" "$r"
# A directory renamed to a longer name lengthens the keys below it.
r=$(py '
os.chdir(a[0])
s = "k/" + "/".join(["d" * 255] * 15) + "/s"
os.makedirs(s)
open(s + "/" + "w" * 100, "w").close()
os.rename("k", "k" * 60)
s = "k" * 60 + s[1:]
try:
    open(s + "/" + "v" * 200, "w").close()
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno], os.listdir(s))
' "$T" 2>&1)
check_eq "after a rename lengthened its parent's key, a name past the limit fails" \
	"ENAMETOOLONG ['$(printf 'w%.0s' {1..100})']" "$r"
ofs_remount || ofs_bail "cannot remount"
r=$(py '
os.chdir(a[0])
d = "/".join(["d" * 255] * 15)
print(sorted(os.listdir(d + "/" + "e" * 254)), os.path.exists("m/" + "c" * 255), open(d + "/z").read() == "")
' "$T" 2>&1)
check_eq "after a remount: nothing past the limit, the refused rename left all as it was" \
	"[] True True" "$r"

# ---- user xattrs: kept, listed, removed; ours read-only ----
echo x >"$T/x"
mkdir "$T/xd"
check "setfattr user.a on a file" setfattr -n user.a -v hello "$T/x"
check "setfattr user.b on a directory" setfattr -n user.b -v dir "$T/xd"
check_eq "getfattr reads it back" hello "$(getfattr --absolute-names --only-values -n user.a "$T/x" 2>&1)"
r=$(py '
import os
p = a[0]
out = []
for f in (lambda: os.setxattr(p, "user.a", b"x", os.XATTR_CREATE),
          lambda: os.setxattr(p, "user.new", b"x", os.XATTR_REPLACE),
          lambda: os.setxattr(p, "user.offload.descriptor", b"x"),
          lambda: os.setxattr(p, "user.offload.checksum", b"x"),
          lambda: os.removexattr(p, "user.offload.checksum"),
          lambda: os.setxattr(p, "trusted.x", b"x"),
          lambda: os.setxattr(p, "user.v", b"v" * 65536),
          lambda: os.setxattr(p, "user.w", b"w" * 65536)):
    try:
        f()
        out.append("OK")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(" ".join(out))
' "$T/x" 2>&1)
check_eq "XATTR_CREATE/REPLACE, ours read-only, other namespaces, a 64 KiB value, the total" \
	"EEXIST ENODATA EPERM EPERM EPERM ENOTSUP ENOSPC ENOSPC" "$r"
check "a 60 KiB value" py 'os.setxattr(a[0], "user.big", b"b" * 61440)' "$T/x"
check_eq "listxattr lists the user's (ours are read by name)" \
	"user.a user.big" \
	"$(py 'print(" ".join(sorted(os.listxattr(a[0]))))' "$T/x")"
b=$(times "$T/x"); sleep 0.01
check "removexattr" setfattr -x user.big "$T/x"
check_eq "setting and removing an xattr changes ctime only" \
	"${b% *} yes" "$(t=$(times "$T/x"); echo "${t% *} $([ "${t#* }" != "${b#* }" ] && echo yes)")"
echo copied-src >"$REF/src"
setfattr -n user.k -v v1 "$REF/src" 2>/dev/null
if [ "$(getfattr --absolute-names --only-values -n user.k "$REF/src" 2>/dev/null)" == v1 ]; then
	check "cp --preserve=xattr onto the mount" cp --preserve=xattr "$REF/src" "$T/copied"
	check_eq "the copy has the xattr" v1 "$(getfattr --absolute-names --only-values -n user.k "$T/copied" 2>&1)"
	check "cp --preserve=xattr off the mount" cp --preserve=xattr "$T/copied" "$REF/back"
	check_eq "the copy back has the user's xattr and no descriptor of ours" "user.k" \
		"$(py 'print(" ".join(sorted(os.listxattr(a[0]))))' "$REF/back")"
else
	skip "cp --preserve=xattr onto the mount" "$TESTDIR's filesystem keeps no user xattrs"
fi
if command -v rsync >/dev/null; then
	check "rsync -X onto the mount" rsync -X "$REF/src" "$T/rsynced"
else
	skip "rsync -X onto the mount" "no rsync here"
fi
ofs_remount || ofs_bail "cannot remount"
check_eq "xattrs survive a remount" "hello dir" \
	"$(getfattr --absolute-names --only-values -n user.a "$T/x") $(getfattr --absolute-names --only-values -n user.b "$T/xd")"
rm "$T/x"

# ---- fallocate: KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE ----
mkrand "$REF/fa" $((3 * PAGE))
cp "$REF/fa" "$T/fa"
check "fallocate --keep-size past the end" fallocate -n -o $((3 * PAGE)) -l $((4 * PAGE)) "$T/fa"
check_eq "the size is kept" $((3 * PAGE)) "$(stat -c %s "$T/fa")"
check "fallocate --punch-hole" fallocate -p -o 1000 -l 70000 "$T/fa"
check "fallocate --zero-range --keep-size" fallocate -z -n -o $((2 * PAGE)) -l 100 "$T/fa"
check "fallocate --zero-range past the end grows the file" \
	fallocate -z -o $((3 * PAGE - 10)) -l 30 "$T/fa"
py '
b = bytearray(open(a[0], "rb").read())
b[1000:71000] = bytes(70000)
b[2 * 65536:2 * 65536 + 100] = bytes(100)
b[3 * 65536 - 10:] = bytes(10)
b += bytes(20)
open(a[1], "wb").write(b)
' "$REF/fa" "$REF/fa.want"
check_cmp "the punched and zeroed ranges read as zeros, the rest as written" "$REF/fa.want" "$T/fa"
r=$(py '
fd = os.open(a[0], os.O_RDWR)
try:
    os.posix_fallocate(fd, 0, 10)
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
' "$T/fa")
check_eq "posix_fallocate inside the file" OK "$r"
ofs_remount || ofs_bail "cannot remount"
check_cmp "after a remount too" "$REF/fa.want" "$T/fa"

ofs_umount
check_eq "an unlinked file's xattrs are gone with it" 0 \
	"$(ofs_sql 'SELECT count(*) FROM xattrs WHERE ino NOT IN (SELECT ino FROM inodes)')"
check_fsck_clean "after it all"
ofs_done
