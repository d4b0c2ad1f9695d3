#!/usr/bin/env bash
# t-namespace.sh: tenants, directories, rename (within, over, across
# tenants), what is refused (top-level files, links, fifos, devices, long
# names), odd names, big directories, attributes across a remount,
# truncate, fallocate, statfs numbers, unlink of an open file.
set -u
. "$(dirname "$0")/lib.sh"

ofs_mount || ofs_bail "cannot mount"
# 4 buckets x 64M of 64K pages.
TOTAL=4096

# ---- statfs on a fresh store ----
check_eq "statfs fresh store: blocks,free,bsize" "$TOTAL,$TOTAL,$PAGE" "$(stat -f -c %b,%f,%S "$MNT")"
check "mkdir tenant" mkdir "$MNT/t1"
mkrand "$REF/4p" $((3 * PAGE + 1))
cp "$REF/4p" "$MNT/t1/4pages"
check_eq "statfs after a 3*page+1 file: 4 pages used" "$TOTAL,$((TOTAL - 4)),$PAGE" \
	"$(stat -f -c %b,%f,%S "$MNT")"
mkrand "$REF/3p" $((3 * PAGE))
cp "$REF/3p" "$MNT/t1/3pages"
check_eq "statfs after a 3*page file: 3 more pages used" $((TOTAL - 7)) "$(ofs_free)"
: >"$MNT/t1/empty"
check_eq "statfs after an empty file: no page used" $((TOTAL - 7)) "$(ofs_free)"
check_eq "st_blocks of a 4-page file (512-byte units)" $((4 * PAGE / 512)) "$(stat -c %b "$MNT/t1/4pages")"
rm "$MNT/t1/4pages" "$MNT/t1/3pages" "$MNT/t1/empty"
check "fsyncdir on the mount (the durability barrier)" ofs_sync
check_eq "statfs after unlinking them and a barrier: all free" "$TOTAL,$TOTAL,$PAGE" \
	"$(stat -f -c %b,%f,%S "$MNT")"

# ---- tenants and directories ----
check_fails "touch at the top level: EPERM" "Operation not permitted" touch "$MNT/topfile"
check_fails "redirect to a file at the top level: EPERM" "Operation not permitted" \
	sh -c "echo x > '$MNT/topfile'"
check_eq "no top-level file was left behind" "t1" "$(ls "$MNT")"
check "nested mkdir -p" mkdir -p "$MNT/t1/a/b/c/d/e"
echo deep >"$MNT/t1/a/b/c/d/e/f"
check_eq "file at depth 6 readable" deep "$(cat "$MNT/t1/a/b/c/d/e/f")"
check_fails "mkdir of an existing dir: EEXIST" "File exists" mkdir "$MNT/t1/a"
check_fails "rmdir of a non-empty dir: ENOTEMPTY" "Directory not empty" rmdir "$MNT/t1/a/b/c/d/e"
check_fails "rmdir of a file: ENOTDIR" "Not a directory" rmdir "$MNT/t1/a/b/c/d/e/f"
check_fails "unlink of a dir: EISDIR" "Is a directory" python3 -c "import os,sys; os.unlink(sys.argv[1])" "$MNT/t1/a"
check "rm the file" rm "$MNT/t1/a/b/c/d/e/f"
check "rmdir of the emptied dir" rmdir "$MNT/t1/a/b/c/d/e"
check_eq "the dir is gone" "" "$(ls "$MNT/t1/a/b/c/d")"
check "mkdir a second tenant" mkdir "$MNT/t2"
check "mkdir and rmdir an empty tenant" sh -c "mkdir '$MNT/t9' && rmdir '$MNT/t9'"
check_eq "top level lists the tenants" "t1 t2" "$(ls "$MNT" | tr '\n' ' ' | sed 's/ $//')"

# ---- rename ----
mkrand "$REF/r1" 100000
cp "$REF/r1" "$MNT/t1/a/r1"
check "rename within a tenant, to another dir" mv "$MNT/t1/a/r1" "$MNT/t1/a/b/moved"
check_cmp "renamed file keeps its content" "$REF/r1" "$MNT/t1/a/b/moved"
check_fails "old name gone after rename" "No such file or directory" stat "$MNT/t1/a/r1"
check "rename a directory" mv "$MNT/t1/a/b" "$MNT/t1/a/b2"
check_cmp "file under a renamed directory" "$REF/r1" "$MNT/t1/a/b2/moved"

# Over an existing file: the target is replaced and its pages come back.
f0=$(ofs_free)
mkrand "$REF/tgt" 300000 # 5 pages
mkrand "$REF/src" 100000 # 2 pages
cp "$REF/tgt" "$MNT/t1/tgt"
cp "$REF/src" "$MNT/t1/src"
check_pages "free after creating target (5 pages) and source (2 pages)" $((f0 - 7)) "$(ofs_free)"
check_eq "rename over an existing file (os.rename)" OK \
	"$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/src" "$MNT/t1/tgt")"
check_cmp "the target now has the source's content" "$REF/src" "$MNT/t1/tgt"
check_fails "the source name is gone" "No such file or directory" stat "$MNT/t1/src"
check_eq "the replaced target's 5 pages are free again" $((f0 - 2)) "$(ofs_free)"
rm "$MNT/t1/tgt"

# Over a file that a process still holds open: it keeps reading the old
# content; the pages come back when it closes.
f0=$(ofs_free)
cp "$REF/tgt" "$MNT/t1/held"
cp "$REF/src" "$MNT/t1/src"
if holder_start "$MNT/t1/held" r; then
	check_eq "rename over an open file" OK "$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/src" "$MNT/t1/held")"
	check_cmp "the new name has the source's content" "$REF/src" "$MNT/t1/held"
	holder_read "$REF/held_read"
	check_cmp "the holder still reads the replaced file's content" "$REF/tgt" "$REF/held_read"
	check_pages "replaced-but-open file keeps its pages" $((f0 - 7)) "$(ofs_free)"
	holder_close
	if wait_free $((f0 - 2)); then
		ok "its pages come back after the holder closes"
	else
		not_ok "its pages come back after the holder closes" "free $(ofs_free), expected $((f0 - 2))"
	fi
else
	not_ok "hold a file open" "$(cat "$HOLDER_DIR/err")"
fi
rm -f "$MNT/t1/held"

# Directories and the replace rules.
mkdir -p "$MNT/t1/d1/sub" "$MNT/t1/d2" "$MNT/t1/d3/x"
echo f >"$MNT/t1/d1/sub/f"
echo plain >"$MNT/t1/plain"
check_eq "rename a dir over an empty dir" OK "$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/d1" "$MNT/t1/d2")"
check_eq "the moved tree is under the new name" f "$(cat "$MNT/t1/d2/sub/f")"
check_eq "rename a dir over a non-empty dir: ENOTEMPTY" ENOTEMPTY \
	"$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/d2" "$MNT/t1/d3")"
check_eq "rename a file over a dir: EISDIR" EISDIR "$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/plain" "$MNT/t1/d3")"
check_eq "rename a dir over a file: ENOTDIR" ENOTDIR "$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/d2" "$MNT/t1/plain")"
RENAMEAT2='
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def renameat2(src, dst, flags):
    if libc.renameat2(-100, os.fsencode(src), -100, os.fsencode(dst), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
'
check_eq "renameat2 RENAME_NOREPLACE onto an existing file: EEXIST" EEXIST \
	"$(pyerr "$RENAMEAT2"'
renameat2(a[1], a[2], 1)' "$MNT/t1/plain" "$MNT/t1/d2/sub/f")"
check_eq "renameat2 RENAME_NOREPLACE to a free name works" OK \
	"$(pyerr "$RENAMEAT2"'
renameat2(a[1], a[2], 1)' "$MNT/t1/plain" "$MNT/t1/plain2")"
check_eq "renamed with NOREPLACE: content" plain "$(cat "$MNT/t1/plain2")"
rm -rf "$MNT/t1/d2" "$MNT/t1/d3" "$MNT/t1/plain2"

# Across tenants: EXDEV (mv would fall back to a copy).
echo cross >"$MNT/t1/cross"
check_eq "rename of a file across tenants: EXDEV" EXDEV \
	"$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/cross" "$MNT/t2/cross")"
check_eq "the file stays in its tenant" cross "$(cat "$MNT/t1/cross")"
mkdir "$MNT/t1/xdir"
check_eq "rename of a directory across tenants: EXDEV" EXDEV \
	"$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/xdir" "$MNT/t2/xdir")"
e=$(pyerr 'os.rename(a[1], a[2])' "$MNT/t1/cross" "$MNT/cross")
if [ "$e" == EPERM ] || [ "$e" == EXDEV ]; then
	ok "rename of a file to the top level fails ($e)"
else
	not_ok "rename of a file to the top level fails" "got $e"
fi
check_eq "the file is still there" cross "$(cat "$MNT/t1/cross")"
mkdir "$MNT/t3"
echo t3 >"$MNT/t3/f"
check "rename of a tenant" mv "$MNT/t3" "$MNT/t4"
check_eq "renamed tenant keeps its files" t3 "$(cat "$MNT/t4/f")"

# ---- refused node types ----
check_fails "ln -s: EPERM" "Operation not permitted" ln -s cross "$MNT/t1/sym"
check_fails "ln (hard link): EPERM" "Operation not permitted" ln "$MNT/t1/cross" "$MNT/t1/hard"
check_fails "mkfifo: EPERM" "Operation not permitted" mkfifo "$MNT/t1/fifo"
check_fails "mknod c: EPERM" "Operation not permitted" mknod "$MNT/t1/null" c 1 3
check_fails "mknod b: EPERM" "Operation not permitted" mknod "$MNT/t1/blk" b 7 0
check_eq "nothing was created by the refused calls" "a cross xdir" "$(ls "$MNT/t1" | tr '\n' ' ' | sed 's/ $//')"

# ---- names ----
n255=$(printf 'n%.0s' $(seq 255))
n256=$(printf 'n%.0s' $(seq 256))
check "a 255-byte name can be created" sh -c "echo long > '$MNT/t1/$n255'"
check_eq "the 255-byte name reads back" long "$(cat "$MNT/t1/$n255")"
check_eq "the 255-byte name is listed" 1 "$(ls "$MNT/t1" | grep -cx "$n255")"
check_fails "a 256-byte name: ENAMETOOLONG (touch)" "File name too long" touch "$MNT/t1/$n256"
check_fails "a 256-byte name: ENAMETOOLONG (mkdir)" "File name too long" mkdir "$MNT/t1/$n256"
check_fails "rename to a 256-byte name: ENAMETOOLONG" "File name too long" \
	mv "$MNT/t1/$n255" "$MNT/t1/$n256"
u255=$(printf '名%.0s' $(seq 85)) # 85 x 3 bytes
check "a 255-byte UTF-8 name" sh -c "echo utf > '$MNT/t1/$u255'"
check_eq "the 255-byte UTF-8 name reads back" utf "$(cat "$MNT/t1/$u255")"
rm -f "$MNT/t1/$n255" "$MNT/t1/$u255"

ODD_NAMES='
import os, sys
d = os.fsencode(sys.argv[2])
names = [b"with space", b" lead and trail ", b"new\nline", "ütf-8 名前 🙂".encode(),
         bytes(range(1, 32)), bytes(range(0x80, 0x100)), b"-dash", b"back\\slash",
         b"*?[glob]", b"quote\x27\x22", b"..."]
def fail(msg):
    print(msg)
    sys.exit(1)
if sys.argv[1] == "create":
    os.mkdir(d)
    for n in names:
        with open(os.path.join(d, n), "wb") as f:
            f.write(b"content:" + n)
if sys.argv[1] in ("create", "verify"):
    got = sorted(os.listdir(d))
    if got != sorted(names):
        fail("listing differs: %r" % got)
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            if f.read() != b"content:" + n:
                fail("content of %r differs" % n)
if sys.argv[1] == "unlink":
    for n in names:
        os.unlink(os.path.join(d, n))
    if os.listdir(d):
        fail("left: %r" % os.listdir(d))
print("OK")
'
check "odd names (spaces, newline, UTF-8, 0x01-0x1f, 0x80-0xff): create, list, read" \
	python3 -c "$ODD_NAMES" create "$MNT/t1/odd"

# ---- a big directory ----
python3 -c '
import os, sys
for i in range(2000):
    open(os.path.join(sys.argv[1], "f%04d" % i), "w").close()
' "$MNT/t1/many" 2>/dev/null || { mkdir "$MNT/t1/many" && python3 -c '
import os, sys
for i in range(2000):
    open(os.path.join(sys.argv[1], "f%04d" % i), "w").close()
' "$MNT/t1/many"; }
seq -f 'f%04g' 0 1999 >"$REF/many_names"
check_eq "ls of a 2000-file dir: 2000 entries" 2000 "$(ls "$MNT/t1/many" | wc -l)"
check_eq "ls -f (unsorted, with . and ..): 2002 entries" 2002 "$(ls -f "$MNT/t1/many" | wc -l)"
ls "$MNT/t1/many" >"$REF/many_ls"
check_cmp "ls of a 2000-file dir: exactly the names created" "$REF/many_names" "$REF/many_ls"

# ---- attributes ----
echo attrs >"$MNT/t1/attrs"
mkdir "$MNT/t1/adir"
chmod 0640 "$MNT/t1/attrs"
chown 1234:5678 "$MNT/t1/attrs"
touch -m -d "2001-02-03 04:05:06.123456789 UTC" "$MNT/t1/attrs"
touch -a -d "1999-12-31 23:59:58.5 UTC" "$MNT/t1/attrs"
chmod 1750 "$MNT/t1/adir"
chown 42:43 "$MNT/t1/adir"
touch -d "2010-10-10 10:10:10 UTC" "$MNT/t1/adir"
FMT='%a %u %g %x %y'
exp_f="640 1234 5678 1999-12-31 23:59:58.500000000 +0000 2001-02-03 04:05:06.123456789 +0000"
exp_d="1750 42 43 2010-10-10 10:10:10.000000000 +0000 2010-10-10 10:10:10.000000000 +0000"
check_eq "chmod/chown/touch -d on a file" "$exp_f" "$(TZ=UTC stat -c "$FMT" "$MNT/t1/attrs")"
check_eq "chmod/chown/touch -d on a dir" "$exp_d" "$(TZ=UTC stat -c "$FMT" "$MNT/t1/adir")"
# An atime set by touch (an open, whose use is queued, then a utimens) is
# kept when the kernel forgets the file before the queue is written.
echo forgot >"$MNT/t1/forgot"
touch -a -d "1999-12-31 23:59:58.5 UTC" "$MNT/t1/forgot"
echo 2 >/proc/sys/vm/drop_caches
sleep 1.5
check_eq "a utimens survives the kernel forgetting the file before the atimes are written" \
	"1999-12-31 23:59:58.500000000 +0000" "$(TZ=UTC stat -c %x "$MNT/t1/forgot")"
echo now >"$MNT/t1/now"
touch -d "2001-01-01 UTC" "$MNT/t1/now"
t0=$(date +%s)
touch "$MNT/t1/now"
t=$(stat -c %Y "$MNT/t1/now")
check_eq "touch without -d sets mtime to now" ok "$([ "$t" -ge $((t0 - 2)) ] && [ "$t" -le $((t0 + 2)) ] && echo ok || echo "$t vs $t0")"

# ---- truncate ----
mkrand "$REF/tr" 200000
cp "$REF/tr" "$MNT/t1/tr"
check "truncate -s 100000 (shrink)" truncate -s 100000 "$MNT/t1/tr"
head -c 100000 "$REF/tr" >"$REF/tr_exp1"
check_cmp "shrunk file is the prefix" "$REF/tr_exp1" "$MNT/t1/tr"
check "truncate -s 300000 (grow)" truncate -s 300000 "$MNT/t1/tr"
{ head -c 100000 "$REF/tr"; head -c 200000 /dev/zero; } >"$REF/tr_exp2"
check_cmp "grown part reads as zeros (also where the old bytes were)" "$REF/tr_exp2" "$MNT/t1/tr"
check_eq "grown size" 300000 "$(stat -c %s "$MNT/t1/tr")"
check "truncate -s 0" truncate -s 0 "$MNT/t1/tr"
check_eq "size 0 after truncate -s 0" 0 "$(stat -c %s "$MNT/t1/tr")"
check "truncate -s 70000 of an empty file" truncate -s 70000 "$MNT/t1/tr"
head -c 70000 /dev/zero >"$REF/tr_exp3"
check_cmp "grown empty file reads as zeros" "$REF/tr_exp3" "$MNT/t1/tr"

# ---- fallocate ----
f0=$(ofs_free)
: >"$MNT/t1/fa"
check "fallocate -l 1M on an empty file" fallocate -l 1M "$MNT/t1/fa"
check_eq "fallocated size" 1048576 "$(stat -c %s "$MNT/t1/fa")"
head -c 1048576 /dev/zero >"$REF/zero1m"
check_cmp "fallocated file reads as zeros" "$REF/zero1m" "$MNT/t1/fa"
check_eq "fallocate reserved 16 pages" $((f0 - 16)) "$(ofs_free)"
printf 'head' >"$MNT/t1/fa2"
check "fallocate -l 200000 on a 4-byte file" fallocate -l 200000 "$MNT/t1/fa2"
{ printf 'head'; head -c 199996 /dev/zero; } >"$REF/fa2_exp"
check_cmp "fallocate keeps the content and zero-fills" "$REF/fa2_exp" "$MNT/t1/fa2"
# util-linux words EOPNOTSUPP for this mode as "keep size mode is unsupported".
check_fails "fallocate --collapse-range is not supported (EOPNOTSUPP)" "not supported" \
	fallocate -c -o 0 -l 65536 "$MNT/t1/fa2"

# ---- unlink of an open file ----
mkrand "$REF/ul" 500000 # 8 pages
f0=$(ofs_free)
cp "$REF/ul" "$MNT/t1/ul"
check_eq "free after an 8-page file" $((f0 - 8)) "$(ofs_free)"
if holder_start "$MNT/t1/ul" r; then
	check "unlink while a process holds it open" rm "$MNT/t1/ul"
	check_fails "the name is gone" "No such file or directory" stat "$MNT/t1/ul"
	check_eq "not listed" 0 "$(ls "$MNT/t1" | grep -cx ul)"
	holder_read "$REF/ul_read"
	check_cmp "the holder still reads the whole file after unlink" "$REF/ul" "$REF/ul_read"
	check_eq "space not returned while it is open" $((f0 - 8)) "$(ofs_free)"
	holder_close
	if wait_free "$f0"; then
		ok "space returned after the holder closes"
	else
		not_ok "space returned after the holder closes" "free $(ofs_free), expected $f0"
	fi
else
	not_ok "hold a file open" "$(cat "$HOLDER_DIR/err")"
fi

# The name of an unlinked-but-open file can be reused at once.
mkrand "$REF/reuse_old" 70000
mkrand "$REF/reuse_new" 130000
cp "$REF/reuse_old" "$MNT/t1/reuse"
if holder_start "$MNT/t1/reuse" r; then
	rm "$MNT/t1/reuse"
	check "a new file under the unlinked name" cp "$REF/reuse_new" "$MNT/t1/reuse"
	check_cmp "the new file has the new content" "$REF/reuse_new" "$MNT/t1/reuse"
	holder_read "$REF/reuse_read"
	check_cmp "the holder still reads the old content" "$REF/reuse_old" "$REF/reuse_read"
	holder_close
	check_cmp "the new file is intact after the old one is closed and freed" "$REF/reuse_new" "$MNT/t1/reuse"
else
	not_ok "hold a file open" "$(cat "$HOLDER_DIR/err")"
fi

# Parallel creators in one directory.
mkdir "$MNT/t1/par"
pids=()
for w in 1 2 3 4; do
	python3 -c '
import os, sys
d, w = sys.argv[1], sys.argv[2]
for i in range(250):
    with open(os.path.join(d, "w%s_%03d" % (w, i)), "wb") as f:
        f.write(b"%s %d" % (w.encode(), i))
' "$MNT/t1/par" "$w" &
	pids+=($!)
done
fails=0
for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
check_eq "4 parallel creators of 250 files each all succeed" 0 "$fails"
check_eq "the directory lists 1000 entries" 1000 "$(ls "$MNT/t1/par" | wc -l)"
check_eq "a sample reads back" "3 117" "$(cat "$MNT/t1/par/w3_117")"

# ---- across a remount ----
ofs_remount || ofs_bail "cannot remount"
check_eq "after remount: file attributes persist" "$exp_f" "$(TZ=UTC stat -c "$FMT" "$MNT/t1/attrs")"
check_eq "after remount: dir attributes persist" "$exp_d" "$(TZ=UTC stat -c "$FMT" "$MNT/t1/adir")"
check "after remount: odd names listed and read" python3 -c "$ODD_NAMES" verify "$MNT/t1/odd"
check "odd names: unlink all" python3 -c "$ODD_NAMES" unlink "$MNT/t1/odd"
ls "$MNT/t1/many" >"$REF/many_ls2"
check_cmp "after remount: 2000-file dir lists exactly" "$REF/many_names" "$REF/many_ls2"
check "rm -rf of the 2000-file dir (readdir while unlinking)" rm -rf "$MNT/t1/many"
check_fails "the big dir is gone" "No such file or directory" stat "$MNT/t1/many"
check_cmp "after remount: grown-by-truncate file" "$REF/tr_exp3" "$MNT/t1/tr"
check_cmp "after remount: fallocated file" "$REF/zero1m" "$MNT/t1/fa"
check_cmp "after remount: renamed file" "$REF/r1" "$MNT/t1/a/b2/moved"
check_eq "after remount: renamed tenant" t3 "$(cat "$MNT/t4/f")"
check_cmp "after remount: the reused name" "$REF/reuse_new" "$MNT/t1/reuse"
check_eq "after remount: the parallel creators' 1000 files" 1000 "$(ls "$MNT/t1/par" | wc -l)"

# statfs: used inodes (f_files - f_ffree) are the regular files.
check_eq "statfs: f_files - f_ffree = number of regular files" "$(find "$MNT" -type f | wc -l)" \
	"$(stat -f -c '%c %d' "$MNT" | awk '{print $1 - $2}')"
ofs_umount

# ---- readdirplus: ls -l takes no LOOKUP per entry, and lists what stat says ----
ofs_mount "" -d || ofs_bail "cannot mount with -d"
mkdir -p "$MNT/t1/many"
python3 -c '
import os, sys
for i in range(1500):
    with open("%s/k%04d" % (sys.argv[1], i), "wb") as f:
        f.write(b"x" * (i * 7))
    os.chmod("%s/k%04d" % (sys.argv[1], i), 0o600 if i % 3 else 0o644)
' "$MNT/t1/many"
sync
echo 3 >/proc/sys/vm/drop_caches
mark=$(wc -l <"$LOG")
ls -ln --time-style=+%s "$MNT/t1/many" | awk 'NR > 1 {print $1, $5, $NF}' >"$TESTDIR/ls.out"
ops=$(tail -n +"$((mark + 1))" "$LOG" | grep -oE 'opcode: [A-Z_]+' | awk '{print $2}')
check_eq "ls -l of 1,500 files: no LOOKUP but the path's two (t1, many)" 2 "$(grep -cx LOOKUP <<<"$ops")"
check "ls -l of 1,500 files: READDIRPLUS, in several replies" \
	test "$(grep -cx READDIRPLUS <<<"$ops")" -gt 2
check_eq "every entry listed once" 1500 "$(awk '{print $3}' "$TESTDIR/ls.out" | sort -u | wc -l)"
for f in "$MNT"/t1/many/k*; do stat -c '%A %s %n' "$f"; done |
	awk '{n = split($3, p, "/"); print $1, $2, p[n]}' >"$TESTDIR/stat.out"
check_cmp "modes and sizes listed are what stat says" "$TESTDIR/stat.out" "$TESTDIR/ls.out"
# The entries' lookups are counted: after the kernel forgets them, they still resolve.
echo 2 >/proc/sys/vm/drop_caches
check_eq "after the kernel forgets them: a file still stats" "$((777 * 7))" \
	"$(stat -c %s "$MNT/t1/many/k0777")"
ofs_umount
check_fsck_clean "after the namespace test"
ofs_done
