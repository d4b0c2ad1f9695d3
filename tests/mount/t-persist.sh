#!/usr/bin/env bash
# t-persist.sh: everything survives a clean unmount (fsck clean, snapshot
# identical to the rebuild) and a kill -9 (bitmaps rebuilt from the
# mappings, closed files intact, fsck clean again); files still open for
# writing at the kill are dropped and their pages freed (new files absent,
# existing ones at their last closed content, also when reopened with
# O_TRUNC); a temp file renamed over a final name keeps its object (no
# copy), stats right after, frees the replaced file's pages and survives
# the kill; a file unlinked while open at the kill is gone and its pages
# freed; SIGTERM with files open is a clean shutdown that drops the writers;
# msync loops (a mapping kept, and map-write-msync-unmap rounds, which
# reuse the previous version's pages) keep every msynced byte through a
# kill -9 taken while the file is still mapped.
set -u
. "$(dirname "$0")/lib.sh"

TREE="$REF/tree"

# snap: names, types, sizes, modes, owners, mtimes and atimes under $MNT.
# An open moves atime in memory; the next group-commit tick (1 s) records
# it and drops the kernel's cached attributes: wait for it.
snap() {
	sleep 1.2
	(cd "$MNT" && find . -mindepth 1 -printf '%p|%y|%s|%m|%U|%G|%T@|%A@\n' | LC_ALL=C sort)
}

# check_tree NAME: the regular files under $MNT are exactly those of $TREE,
# byte for byte.
check_tree() {
	local name=$1 f bad="" n=0
	if [ "$(cd "$TREE" && find . -type f | LC_ALL=C sort)" != \
		"$(cd "$MNT" && find . -type f | LC_ALL=C sort)" ]; then
		not_ok "$name: same file names" "$(diff <(cd "$TREE" && find . -type f | LC_ALL=C sort) \
			<(cd "$MNT" && find . -type f | LC_ALL=C sort) | tr '\n' ' ')"
	else
		ok "$name: same file names"
	fi
	while IFS= read -r -d '' f; do
		n=$((n + 1))
		cmp -s "$TREE/$f" "$MNT/$f" || bad="$bad '$f'"
	done < <(cd "$TREE" && find . -type f -print0)
	if [ -z "$bad" ]; then
		ok "$name: all $n files cmp equal"
	else
		not_ok "$name: all $n files cmp equal" "differ:$bad"
	fi
}

# put PATH SIZE: a random file at $TREE/PATH and $MNT/PATH.
put() {
	mkdir -p "$(dirname "$TREE/$1")" "$(dirname "$MNT/$1")"
	mkrand "$TREE/$1" "$2"
	cp "$TREE/$1" "$MNT/$1"
}

# ---- a tree, then a clean unmount ----
ofs_mount || ofs_bail "cannot mount"
mkdir "$MNT/t1" "$MNT/t2"
put t1/a/f0 0
put t1/a/f1 1
put t1/a/b/f4095 4095
put t1/a/b/c/f65536 65536
put t1/f65537 65537
put "t1/sp ace" 1234
put t2/x/f300000 300000
put t2/big $((2 * 1024 * 1024 + 5))
put t2/k/Qwen/Qwen3-32B/abc_0_k 131072
mkdir -p "$MNT/t2/y/z/emptydir"
chmod 600 "$MNT/t1/a/f1"
chmod 2750 "$MNT/t2/x"
chown 1000:2000 "$MNT/t2/x/f300000"
chown 7:8 "$MNT/t2/y"
touch -d "2020-01-02 03:04:05.6789 UTC" "$MNT/t1/f65537"
touch -d "1971-01-01 00:00:01 UTC" "$MNT/t2/y/z/emptydir"
check_tree "written"
free0=$(ofs_free)
snap0=$(snap)
ofs_umount
check_eq "clean unmount: daemon exits 0" 0 "$OFS_RC"
check_grep_log "clean unmount logged" "unmounted $MNT cleanly"
check_fsck_clean "after a clean unmount"

ofs_mount || ofs_bail "cannot remount"
check_grep_log "remount after a clean unmount: log says clean" "mounted clean store"
check_grep_log "remount after a clean unmount: snapshot loaded" "$OFS_LOG_CLEAN"
check_eq "after clean remount: names, modes, owners, times equal" "$snap0" "$(snap)"
check_tree "after clean remount"
check_eq "after clean remount: free blocks equal" "$free0" "$(ofs_free)"

# ---- more closed changes, then kill -9 ----
put t1/new/n1 77777
put t1/new/n2 $((PAGE * 3))
put t2/x/f300000 12345 # overwrite, smaller
mkrand "$TREE/t1/f65537" 200000
cat "$TREE/t1/f65537" >"$MNT/t1/f65537" # overwrite in place (O_TRUNC), bigger
rm "$TREE/t1/a/b/f4095" "$MNT/t1/a/b/f4095"
mv "$TREE/t1/sp ace" "$TREE/t1/renamed"
mv "$MNT/t1/sp ace" "$MNT/t1/renamed"
# A KV client's put: a temp file written and closed, then renamed over the
# final name.  The rename moves the committed object (same inode, same
# pages: no copy); a stat right after the close and after the rename gives
# the new size and pages; the replaced file's pages come back.
put t1/final $((2 * PAGE + 7)) # 3 pages
freeR=$(ofs_free)
mkrand "$TREE/t1/final" $((PAGE + 5)) # 2 pages
cp "$TREE/t1/final" "$MNT/t1/final.tmp"
check_eq "stat of a temp file right after its close: its size" $((PAGE + 5)) \
	"$(stat -c %s "$MNT/t1/final.tmp")"
check_pages "stat of a temp file right after its close: the blocks of its 2 pages" \
	$((2 * PAGE / 512)) "$(stat -c %b "$MNT/t1/final.tmp")"
tmp_id="$(stat -c %i "$MNT/t1/final.tmp") $(getfattr --absolute-names --only-values -n user.offload.descriptor \
	"$MNT/t1/final.tmp" 2>&1)"
mv -f "$MNT/t1/final.tmp" "$MNT/t1/final"
check_eq "stat right after the rename over the final name: the new size" $((PAGE + 5)) \
	"$(stat -c %s "$MNT/t1/final")"
check_pages "stat right after the rename: the blocks of the new 2 pages" \
	$((2 * PAGE / 512)) "$(stat -c %b "$MNT/t1/final")"
check_eq "the renamed file is the temp file's object: same inode, same descriptor (no copy)" \
	"$tmp_id" "$(stat -c %i "$MNT/t1/final") $(getfattr --absolute-names --only-values -n user.offload.descriptor \
	"$MNT/t1/final" 2>&1)"
check_pages "the rename freed the replaced file's 3 pages; the temp file's 2 stay in use" \
	$((freeR + 3 - 2)) "$(ofs_free)"
chmod 604 "$MNT/t1/new/n1"
touch -d "2022-02-22 22:22:22.222222222 UTC" "$MNT/t1/new/n2"
check_tree "before kill -9"
free1=$(ofs_free)
snap1=$(snap)
check "kill -9 the daemon, detach the dead mount" ofs_kill9
ofs_fsck
check_contains "fsck after kill -9 (before remount): says not cleanly unmounted" "not cleanly unmounted" "$OUT"
check_eq "fsck after kill -9: no snapshot comparison line" 0 "$(grep -c "bitmap snapshot: identical" <<<"$OUT")"
check_contains "fsck after kill -9: no checksum mismatch" "checksum mismatches 0" "$OUT"
ofs_mount || ofs_bail "cannot mount after kill -9"
check_grep_log "remount after kill -9: log says unclean" "mounted unclean store"
check_grep_log "remount after kill -9: log says rebuilt" "$OFS_LOG_REBUILT"
check_grep_log "remount after kill -9: nothing dropped (every file was closed)" \
	"recovery dropped 0 unfinished writes and 0 unlinked-open files"
check_eq "after kill -9: names, modes, owners, times equal" "$snap1" "$(snap)"
check_tree "after kill -9"
check_eq "after kill -9: free blocks equal (rebuilt bitmaps)" "$free1" "$(ofs_free)"
ofs_umount
check_eq "unmount after the recovery: daemon exits 0" 0 "$OFS_RC"
check_fsck_clean "after kill -9 recovery and a clean unmount"

# ---- open at the kill: writers dropped, unlinked-open files freed ----
ofs_mount || ofs_bail "cannot remount"
put t1/orphan $((3 * PAGE)) # 3 pages, will be unlinked while open
free2=$(ofs_free)
mkrand "$REF/inflight" 1048576
mkrand "$REF/rewrite" 200000
ok_holders=1
holder_start "$MNT/t1/inflight" w "$REF/inflight" || ok_holders=0
H1=$HOLDER_PID
# An existing 33-page file opened O_RDWR (no O_TRUNC) and overwritten from
# offset 0: copy on write gives it a new 33-page working run.
holder_start "$MNT/t2/big" rw "$REF/rewrite" || ok_holders=0
H2=$HOLDER_PID
holder_start "$MNT/t1/orphan" r || ok_holders=0
H3=$HOLDER_PID
check_eq "three holders started" 1 "$ok_holders"
rm "$MNT/t1/orphan"
rm "$TREE/t1/orphan"
check_pages "pages in use: 16 for the in-flight 1 MiB, 33 for the copy-on-write rewrite" \
	$((free2 - 16 - 33)) "$(ofs_free)"
check_eq "the in-flight file is visible with its size before the kill" 1048576 \
	"$(stat -c %s "$MNT/t1/inflight")"
check "kill -9 the daemon while files are open" ofs_kill9
for p in "$H1" "$H2" "$H3"; do bg_kill "$p"; done
ofs_mount || ofs_bail "cannot mount after the second kill -9"
check_grep_log "after kill -9 with open writers: log says rebuilt" "$OFS_LOG_REBUILT"
check_grep_log "recovery dropped the unfinished write and the unlinked-open file" \
	"recovery dropped 1 unfinished writes and 1 unlinked-open files"
check_fails "the never-closed file is absent" "No such file or directory" stat "$MNT/t1/inflight"
check_cmp "the file overwritten but not closed keeps its last closed content" "$TREE/t2/big" "$MNT/t2/big"
check_fails "the unlinked-open file is gone" "No such file or directory" stat "$MNT/t1/orphan"
check_eq "free blocks: the writers' pages and the orphan's 3 pages are back" \
	$((free2 + 3)) "$(ofs_free)"
check_tree "after the second kill -9"

# ---- open with O_TRUNC and being rewritten at the kill ----
# The O_TRUNC is part of the rewrite: until the writer closes, the last
# closed content is what is committed, what the descriptor shows and what a
# crash leaves.
free3=$(ofs_free)
if holder_start "$MNT/t2/x/f300000" w "$REF/rewrite"; then
	d=$(getfattr --absolute-names --only-values -n user.offload.descriptor "$MNT/t2/x/f300000" 2>&1)
	check_contains "O_TRUNC rewrite in progress: the descriptor still shows the closed content" \
		"object_size=12345" "$d"
	check "kill -9 the daemon during an O_TRUNC rewrite" ofs_kill9
	holder_kill
	ofs_mount || ofs_bail "cannot mount after the third kill -9"
	check_cmp "a file reopened with O_TRUNC, not closed at the kill, keeps its last closed content" \
		"$TREE/t2/x/f300000" "$MNT/t2/x/f300000"
	check_eq "free blocks after the O_TRUNC rewrite was dropped" "$free3" "$(ofs_free)"
	# Put the reference content back so that the checks below stay independent.
	cmp -s "$TREE/t2/x/f300000" "$MNT/t2/x/f300000" || cp "$TREE/t2/x/f300000" "$MNT/t2/x/f300000"
else
	not_ok "hold a file open for an O_TRUNC rewrite" "$(cat "$HOLDER_DIR/err")"
fi
check_tree "after the third kill -9 (the O_TRUNC file restored)"
ofs_umount
check_fsck_clean "after the recoveries and a clean unmount"

# ---- SIGTERM with files open: a clean shutdown that drops the writers ----
ofs_mount || ofs_bail "cannot remount"
put t1/orphan2 $((2 * PAGE))
free4=$(ofs_free)
ok_holders=1
holder_start "$MNT/t1/inflight2" w "$REF/inflight" || ok_holders=0
H1=$HOLDER_PID
holder_start "$MNT/t2/k/Qwen/Qwen3-32B/abc_0_k" rw "$REF/rewrite" || ok_holders=0
H2=$HOLDER_PID
holder_start "$MNT/t1/orphan2" r || ok_holders=0
H3=$HOLDER_PID
check_eq "three holders started" 1 "$ok_holders"
rm "$MNT/t1/orphan2" "$TREE/t1/orphan2"
kill -TERM "$OFS_PID"
for ((i = 0; i < 200; i++)); do
	kill -0 "$OFS_PID" 2>/dev/null || break
	sleep 0.05
done
check_eq "SIGTERM with open files: the daemon exits" gone "$(kill -0 "$OFS_PID" 2>/dev/null && echo running || echo gone)"
ofs_reap "$OFS_PID"
OFS_PID=""
check_eq "SIGTERM: the mount is gone" no "$(is_mounted "$MNT" && echo yes || echo no)"
check_grep_log "SIGTERM: logged a clean unmount" "unmounted $MNT cleanly"
for p in "$H1" "$H2" "$H3"; do bg_kill "$p"; done
check_fsck_clean "after SIGTERM with open files"
ofs_mount || ofs_bail "cannot mount after SIGTERM"
check_grep_log "after SIGTERM: the clean snapshot is loaded" "$OFS_LOG_CLEAN"
check_fails "after SIGTERM: the never-closed file is absent" "No such file or directory" stat "$MNT/t1/inflight2"
check_tree "after SIGTERM"
check_eq "after SIGTERM: free blocks (writers dropped, the orphan's 2 pages back)" \
	$((free4 + 2)) "$(ofs_free)"
ofs_umount
check_fsck_clean "after SIGTERM, remount and a clean unmount"


# ---- msync loops, then kill -9 while the file is still mapped ----
ofs_mount || ofs_bail "cannot mount for the msync loops"
mkdir -p "$MNT/t1/ms"
mkrand "$REF/ms_a" $((1024 * 1024))
mkrand "$REF/ms_b" $((2 * 1024 * 1024 + 5000))
cp "$REF/ms_a" "$MNT/t1/ms/a"
cp "$REF/ms_b" "$MNT/t1/ms/b"
check "msync loops, killed while mapped" python3 -c '
import mmap, os, random, signal, sys
a, b, pid = sys.argv[1], sys.argv[2], int(sys.argv[5])
r = random.Random(17)
# b: rounds of open, map, write some pages, msync, unmap, close.
ref_b = bytearray(open(sys.argv[4], "rb").read())
for _ in range(12):
    fd = os.open(b, os.O_RDWR)
    m = mmap.mmap(fd, len(ref_b), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    for _ in range(r.randrange(1, 40)):
        off = r.randrange(len(ref_b) - 10000)
        blk = os.urandom(r.randrange(1, 10000))
        m[off:off + len(blk)] = blk
        ref_b[off:off + len(blk)] = blk
    m.flush()
    m.close()
# a: one mapping, a page written and msynced at a time; then the kill.
ref_a = bytearray(open(sys.argv[3], "rb").read())
fd = os.open(a, os.O_RDWR)
m = mmap.mmap(fd, len(ref_a), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
for i in range(300):
    off = r.randrange(len(ref_a) // 4096) * 4096
    blk = os.urandom(4096)
    m[off:off + 4096] = blk
    ref_a[off:off + 4096] = blk
    m.flush(off, 4096)
open(sys.argv[3] + ".exp", "wb").write(ref_a)
open(sys.argv[4] + ".exp", "wb").write(ref_b)
os.kill(pid, signal.SIGKILL)
' "$MNT/t1/ms/a" "$MNT/t1/ms/b" "$REF/ms_a" "$REF/ms_b" "$OFS_PID"
check "msync loops: detach the dead mount" ofs_kill9
ofs_fsck
check_contains "fsck after the msync loops' kill: no checksum mismatch" "checksum mismatches 0" "$OUT"
check_contains "fsck after the msync loops' kill: no page leaked" "fsck: clean" "$OUT"
ofs_mount || ofs_bail "cannot mount after the msync loops' kill"
check_cmp "msync loop on one mapping: every msynced page after kill -9" "$REF/ms_a.exp" "$MNT/t1/ms/a"
check_cmp "map-write-msync-unmap rounds: content after kill -9" "$REF/ms_b.exp" "$MNT/t1/ms/b"
ofs_umount
check_fsck_clean "after the msync loops, kill -9 and a clean unmount"

ofs_done
