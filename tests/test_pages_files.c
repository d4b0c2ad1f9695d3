/*
 * test_pages_files.c: unit tests for kvbackend/pages/ over real bucket files
 * (blocks held, snapshot and rebuild) and for store/open.c's opening rules.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fiemap.h>
#include <linux/fs.h>

#include <xxhash.h>

#include "kvb.h"
#include "mem_buckets.h"
#include "pages_io.h"
#include "meta.h"
#include "store.h"

#include "test_pages.h"

/* ---- real bucket files, snapshot and rebuild, store opening rules ---- */

static char dir[256];

/* Under TMPDIR when set: TMPDIR=/mnt/xfs runs these over a filesystem that shares blocks. */
static void dir_setup(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/ofs-test-pages-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void dir_teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct ofs_config cfg_small(void)
{
	struct ofs_config cfg = { 0 };

	cfg.root = dir;
	cfg.geom.page_size = PS;
	cfg.geom.bucket_size = 32 * PS;
	cfg.geom.bucket_count = 3;
	cfg.set_page_size = cfg.set_bucket_size = cfg.set_bucket_count = 1;
	return cfg;
}

/* Bytes of disk the bucket files under dir hold. */
static uint64_t bucket_blocks(unsigned n)
{
	char path[512];
	struct stat sb;
	uint64_t total = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/bucket_%02x.data", dir, i);
		ck_assert_int_eq(stat(path, &sb), 0);
		total += (uint64_t)sb.st_blocks * 512;
	}
	return total;
}

/* 1 when the filesystem under dir can allocate and punch blocks; else nothing to check. */
static int dir_can_punch(void)
{
	char probe[512];
	int fd, can;

	snprintf(probe, sizeof(probe), "%s/probe", dir);
	fd = open(probe, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	can = fallocate(fd, 0, 0, PS) == 0 &&
	      fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, PS) == 0;
	close(fd);
	unlink(probe);
	return can;
}

static uint64_t statfs_free(void)
{
	struct kvb_statfs st;

	ck_assert_int_eq(kvb_statfs(&kvb, &st), 0);
	return st.blocks_free;
}

/*
 * Runs reserved between reserve_begin and reserve_end (a batch) get their
 * blocks at the end, adjacent ones together; outside the pair at once.
 */
START_TEST(test_reserve_batch_blocks_at_end)
{
	struct kvb_pages_geom g = { PS, 32 * PS, 1, 0 };
	struct kvb_map empty = KVB_MAP_EMPTY, view;
	struct kvb_obj *o[5];
	char err[256], key[8];
	int errs[5] = { 1, 1, 1, 1, 1 };
	unsigned i;

	if (!dir_can_punch())
		return;
	ck_assert_int_eq(kvb_pages_init(&kvb, dir, &g, 1, err, sizeof(err)), 0);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	ck_assert_int_eq(kvb_reserve_begin(&kvb), 0);
	ck_assert_int_eq(kvb_reserve_begin(&kvb), -EBUSY);
	for (i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "t/k%u", i);
		ck_assert_int_eq(kvb_obj_open(&kvb, &empty, key, strlen(key), &o[i]), 0);
		ck_assert_int_eq(kvb_obj_reserve(&kvb, o[i], 2 * PS), 0);
	}
	o[4] = NULL;
	ck_assert_uint_eq(bucket_blocks(1), 0);
	kvb_reserve_end(&kvb, o, 5, errs);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(errs[i], 0);
	ck_assert_uint_ge(bucket_blocks(1), 8 * PS);
	for (i = 0; i < 4; i++) {
		kvb_obj_view(&kvb, o[i], &view);
		ck_assert_int_eq(view.npages, 2);
	}
	/* After the pair: blocks at once. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "t/x", 3, &o[4]), 0);
	ck_assert_int_eq(kvb_obj_reserve(&kvb, o[4], 3 * PS), 0);
	ck_assert_uint_ge(bucket_blocks(1), 11 * PS);
	for (i = 0; i < 5; i++)
		kvb_obj_close(&kvb, o[i]);
	kvb_release(&kvb);
}
END_TEST

/*
 * A run holds its disk blocks from its allocation (a write-back then
 * never meets a full disk).  Freed (a working state's at once, a
 * committed one's after the barrier), it keeps them, warm, for the next
 * allocation, and statfs counts it free; it gives them back once it has
 * stayed free long enough, or when warm runs pass their bound.
 */
START_TEST(test_runs_hold_blocks_until_freed)
{
	struct kvb_pages_geom g = { PS, 32 * PS, 1, 0 };
	struct kvb_map empty = KVB_MAP_EMPTY, map, view;
	struct kvb_obj *o;
	char err[256];
	uint64_t csum, page;

	if (!dir_can_punch())
		return;
	ck_assert_int_eq(kvb_pages_init(&kvb, dir, &g, 1, err, sizeof(err)), 0);
	kvb_pages_set_warm(&kvb, 3600 * 1000, 32 * PS);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "a", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 8 * PS), 0);
	ck_assert_uint_ge(bucket_blocks(1), 8 * PS);
	kvb_obj_view(&kvb, o, &view);
	ck_assert_int_eq(view.npages, 8);
	page = view.page;
	/* Dropped uncommitted: free at once, its blocks kept (warm) and counted free. */
	kvb_obj_close(&kvb, o);
	ck_assert_uint_ge(bucket_blocks(1), 8 * PS);
	ck_assert_uint_eq(statfs_free(), 32);
	kvb_tick(&kvb);
	ck_assert_uint_ge(bucket_blocks(1), 8 * PS);
	/* The next allocation takes the warm run: no new blocks. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "b", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 8 * PS), 0);
	kvb_obj_view(&kvb, o, &view);
	ck_assert_uint_eq(view.page, page);
	ck_assert_uint_eq(bucket_blocks(1), 8 * PS);
	kvb_obj_close(&kvb, o);
	/* Free long enough: punched at the next tick. */
	kvb_pages_set_warm(&kvb, 0, 32 * PS);
	kvb_tick(&kvb);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	ck_assert_uint_eq(statfs_free(), 32);
	/* Committed, then removed: the blocks stay through the barrier, then warm. */
	kvb_pages_set_warm(&kvb, 3600 * 1000, 32 * PS);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "a", 1, &o), 0);
	put(o, 4 * PS, 0, 1);
	commit(o, &map, &csum);
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_ge(bucket_blocks(1), 4 * PS);
	ck_assert_int_eq(kvb_remove(&kvb, &map), 0);
	ck_assert_uint_ge(bucket_blocks(1), 4 * PS);
	ck_assert_uint_eq(settle(), 4);
	ck_assert_uint_ge(bucket_blocks(1), 4 * PS);
	ck_assert_uint_eq(statfs_free(), 32);
	/* Past the bound (two pages held warm at most): the oldest runs go first. */
	kvb_pages_set_warm(&kvb, 3600 * 1000, 2 * PS);
	kvb_tick(&kvb);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	kvb_release(&kvb);
}
END_TEST

/*
 * A clean unmount punches every warm run (fsck then finds no free page
 * holding blocks); free pages that hold blocks at a mount (a kill came
 * before their punch) are warm again, and punched once free long enough.
 */
START_TEST(test_warm_runs_at_unmount_and_mount)
{
	struct ofs_config cfg = cfg_small();
	struct ofs_store s;
	struct kvb_map empty = KVB_MAP_EMPTY;
	struct kvb_obj *o;
	char err[512], path[512], buf[4 * PS];
	int fd;

	if (!dir_can_punch())
		return;
	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	kvb_pages_set_warm(&s.kvb, 3600 * 1000, 1 << 30);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "a", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&s.kvb, o, 8 * PS), 0);
	kvb_obj_close(&s.kvb, o);
	ck_assert_uint_ge(bucket_blocks(3), 8 * PS);
	ofs_store_close(&s);
	ck_assert_uint_eq(bucket_blocks(3), 0);
	/* Blocks under free pages, as a kill between a free and its punch leaves them. */
	snprintf(path, sizeof(path), "%s/bucket_01.data", dir);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 4 * PS), (ssize_t)sizeof(buf));
	close(fd);
	ck_assert_uint_eq(bucket_blocks(3), 4 * PS);
	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	kvb_pages_set_warm(&s.kvb, 0, 1 << 30);
	kvb_tick(&s.kvb);
	ck_assert_uint_eq(bucket_blocks(3), 0);
	ofs_store_close(&s);
}
END_TEST

START_TEST(test_store_create_snapshot_rebuild)
{
	struct ofs_config cfg = cfg_small();
	struct ofs_store s;
	struct kvb_statfs st1, st2;
	struct meta_inode in = { 0 };
	struct kvb_map empty = KVB_MAP_EMPTY, map;
	struct kvb_obj *o;
	char err[512], path[512], buf[5000];
	uint64_t csum;
	struct stat sb;
	int i;

	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(s.created, 1);
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/bucket_%02x.data", dir, i);
		ck_assert_int_eq(stat(path, &sb), 0);
		ck_assert_int_eq(sb.st_size, 32 * PS);
	}
	/* Three committed objects recorded in the metadata. */
	for (i = 0; i < 3; i++) {
		char key[8];

		snprintf(key, sizeof(key), "obj%d", i);
		ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, key, strlen(key), &o), 0);
		fill(buf, sizeof(buf), (unsigned)i);
		ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, sizeof(buf), 0),
				 (ssize_t)sizeof(buf));
		{
			const uint64_t *pcs;

			ck_assert_int_eq(kvb_obj_commit_prepare(&s.kvb, o, 1, &map, &csum,
								       &pcs),
					 0);
		}
		memset(&in, 0, sizeof(in));
		in.parent = META_ROOT_INO;
		in.mode = 0100644;
		in.size = map.size;
		in.bucket = map.bucket;
		in.page = map.page;
		in.npages = map.npages;
		in.csum = csum;
		ck_assert_int_eq(meta_insert(s.meta, &in, key, strlen(key)), 0);
		kvb_obj_commit_done(&s.kvb, o, 1);
		kvb_obj_close(&s.kvb, o);
	}
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st1), 0);
	ck_assert_uint_eq(st1.blocks, 96);
	ck_assert_uint_eq(st1.blocks_free, 96 - 6);
	ck_assert_int_eq(ofs_store_close(&s), 0);

	/* Clean: the snapshot is loaded. */
	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(s.was_clean, 1);
	ck_assert_ptr_nonnull(strstr(s.start_msg, "snapshot"));
	ck_assert_uint_eq(s.nfiles, 3);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st2), 0);
	ck_assert_uint_eq(st2.blocks_free, st1.blocks_free);
	/* Simulate a crash: drop the handles without the clean close. */
	meta_close(s.meta);
	kvb_release(&s.kvb);
	close(s.lock_fd);
	free(s.root);
	free(s.meta_path);
	free(s.meta_shown);

	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(s.was_clean, 0);
	ck_assert_ptr_nonnull(strstr(s.start_msg, "rebuilt from 3 mappings"));
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st2), 0);
	ck_assert_uint_eq(st2.blocks_free, st1.blocks_free);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

START_TEST(test_store_refusals)
{
	struct ofs_config cfg = cfg_small();
	struct ofs_store s, s2;
	char err[512], path[512];
	FILE *f;

	/* A foreign file in ROOT: refused and left alone. */
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	f = fopen(path, "w");
	fputs("mine", f);
	fclose(f);
	ck_assert_int_eq(ofs_store_open(&s, &cfg, err, sizeof(err)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "did not create"));
	ck_assert_ptr_nonnull(strstr(err, "notes.txt"));
	snprintf(path, sizeof(path), "%s/offloadfs.db", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	unlink(path);

	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	/* One process per store. */
	ck_assert_int_eq(ofs_store_open(&s2, &cfg, err, sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "in use"));
	ck_assert_int_eq(ofs_store_close(&s), 0);

	/* Another geometry: refused, naming both values. */
	cfg.geom.bucket_count = 4;
	ck_assert_int_eq(ofs_store_open(&s, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "geometry mismatch: bucket_count=4 requested, store has 3");
	cfg.geom.bucket_count = 3;
	cfg.geom.page_size = 2 * PS;
	ck_assert_int_eq(ofs_store_open(&s, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "page_size=8192 requested, store has 4096"));
	/* Geometry not given: the store's own is used. */
	cfg.set_page_size = cfg.set_bucket_size = cfg.set_bucket_count = 0;
	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(s.geom.page_size, PS);
	ck_assert_int_eq(ofs_store_close(&s), 0);

	/* A truncated bucket file is never silently re-extended. */
	snprintf(path, sizeof(path), "%s/bucket_01.data", dir);
	ck_assert_int_eq(truncate(path, PS), 0);
	ck_assert_int_eq(ofs_store_open(&s, &cfg, err, sizeof(err)), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "truncated"));

	/* Bucket files without their database: refused. */
	snprintf(path, sizeof(path), "%s/offloadfs.db", dir);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(ofs_store_open(&s, &cfg, err, sizeof(err)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "no metadata"));
}
END_TEST

START_TEST(test_parse_size)
{
	uint64_t v;

	ck_assert_int_eq(ofs_parse_size("4G", &v), 0);
	ck_assert_uint_eq(v, 4ULL << 30);
	ck_assert_int_eq(ofs_parse_size("64k", &v), 0);
	ck_assert_uint_eq(v, 65536);
	ck_assert_int_eq(ofs_parse_size("1MiB", &v), 0);
	ck_assert_uint_eq(v, 1 << 20);
	ck_assert_int_eq(ofs_parse_size("65536", &v), 0);
	ck_assert_uint_eq(v, 65536);
	ck_assert_int_eq(ofs_parse_size("", &v), -EINVAL);
	ck_assert_int_eq(ofs_parse_size("abc", &v), -EINVAL);
	ck_assert_int_eq(ofs_parse_size("-1", &v), -EINVAL);
	ck_assert_int_eq(ofs_parse_size("4X", &v), -EINVAL);
	ck_assert_int_eq(ofs_parse_size("99999999999T", &v), -EINVAL);
}
END_TEST

START_TEST(test_desc_escape)
{
	char out[64], small[8];
	const char *v = "t/evil\nkey=x%y\x7f\x01z";

	/* Nothing a name holds can start a line; '%' itself is escaped. */
	ck_assert_uint_eq(kvb_desc_escape(out, sizeof(out), v), strlen("t/evil%0Akey=x%25y%7F%01z"));
	ck_assert_str_eq(out, "t/evil%0Akey=x%25y%7F%01z");
	ck_assert_ptr_null(strchr(out, '\n'));
	ck_assert_int_eq(kvb_desc_unescape(out), 0);
	ck_assert_str_eq(out, v);
	/* Plain names are unchanged. */
	ck_assert_uint_eq(kvb_desc_escape(out, sizeof(out), "/mnt/3fs/root"), 13);
	ck_assert_str_eq(out, "/mnt/3fs/root");
	/* Too small: the full length is returned, the buffer stays terminated. */
	ck_assert_uint_eq(kvb_desc_escape(small, sizeof(small), "ab\ncdefgh"), 11);
	ck_assert_uint_lt(strlen(small), sizeof(small));
	strcpy(out, "bad%4");
	ck_assert_int_eq(kvb_desc_unescape(out), -EINVAL);
	strcpy(out, "bad%zz");
	ck_assert_int_eq(kvb_desc_unescape(out), -EINVAL);
}
END_TEST

START_TEST(test_geom_valid)
{
	struct meta_geom g = { .page_size = 65536, .bucket_size = 4ULL << 30, .bucket_count = 256 };
	char err[256];

	ck_assert_int_eq(ofs_geom_valid(&g, err, sizeof(err)), 0);
	g.page_size = 3;
	ck_assert_int_eq(ofs_geom_valid(&g, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "invalid page_size 3: a power of two from 4096 to 1G");
	g.page_size = 2048;
	ck_assert_int_eq(ofs_geom_valid(&g, err, sizeof(err)), -EINVAL);
	g.page_size = 2ULL << 30;
	ck_assert_int_eq(ofs_geom_valid(&g, err, sizeof(err)), -EINVAL);
	g.page_size = 4096;
	g.bucket_count = 0;
	ck_assert_int_eq(ofs_geom_valid(&g, err, sizeof(err)), -EINVAL);
	g.bucket_count = 1;
	g.bucket_size = 4096 * 3 + 1;
	ck_assert_int_eq(ofs_geom_valid(&g, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "a multiple of page_size"));
}
END_TEST

START_TEST(test_store_refuses_symlinks_and_sets_modes)
{
	struct ofs_config cfg = cfg_small();
	struct ofs_store s;
	char err[512], path[512], target[512];
	struct stat st;

	/* A dangling link where the database goes: refused, its target not created. */
	snprintf(path, sizeof(path), "%s/offloadfs.db", dir);
	snprintf(target, sizeof(target), "%s.elsewhere", dir);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_int_eq(ofs_store_open(&s, &cfg, err, sizeof(err)), -ELOOP);
	ck_assert_ptr_nonnull(strstr(err, "symbolic link"));
	ck_assert_int_ne(access(target, F_OK), 0);
	unlink(path);

	ck_assert_msg(ofs_store_open(&s, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/bucket_00.data", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/offloadfs.db", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* The "files" case: each test in a fresh directory. */
/*
 * A batch client's put: a reserved run written through the bucket file by
 * someone else, adopted at its size and committed with the page sums of
 * those bytes; a size past the run is refused; a reservation dropped
 * uncommitted frees its pages at once.
 */
START_TEST(test_adopt_run_written_outside)
{
	struct kvb_pages_geom g = { PS, 32 * PS, 1, 0 };
	struct kvb_map empty = KVB_MAP_EMPTY, map, view;
	struct kvb_obj *o;
	const uint64_t *pcs;
	char err[256], path[512], buf[2 * PS + 10];
	uint64_t csum, before;
	unsigned p;
	int fd;

	ck_assert_int_eq(kvb_pages_init(&kvb, dir, &g, 1, err, sizeof(err)), 0);
	before = free_pages();
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "t/k", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_reserve(&kvb, o, sizeof(buf)), 0);
	kvb_obj_view(&kvb, o, &view);
	ck_assert_int_eq(view.npages, 3);
	ck_assert_uint_eq(view.size, 0);
	ck_assert_uint_eq(free_pages(), before - 3);
	fill(buf, sizeof(buf), 4);
	snprintf(path, sizeof(path), "%s/bucket_00.data", dir);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), (off_t)(view.page * PS)), (ssize_t)sizeof(buf));
	close(fd);
	ck_assert_int_eq(kvb_obj_adopt(&kvb, o, 3 * PS + 1, NULL, 0), -EINVAL);
	ck_assert_int_eq(kvb_obj_adopt(&kvb, o, sizeof(buf), NULL, 0), 0);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &map, &csum, &pcs), 0);
	ck_assert_uint_eq(csum, XXH3_64bits(buf, sizeof(buf)));
	for (p = 0; p < 3; p++)
		ck_assert_uint_eq(pcs[p], XXH3_64bits(buf + p * PS, p < 2 ? PS : 10));
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);
	expect(&map, buf, sizeof(buf));
	ck_assert_uint_eq(free_pages(), before - 3);
	/* Reserved, never committed: back at once. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "t/j", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_reserve(&kvb, o, 5 * PS), 0);
	ck_assert_uint_eq(free_pages(), before - 8);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before - 3);
	kvb_release(&kvb);
}
END_TEST

/* One bucket of 8 pages in memory whose punch takes a while (a large or slow one). */
#define SLOW_PAGES 8
static char slow_mem[SLOW_PAGES * PS];
static int slow_punching;

static ssize_t slow_pread(void *dev, uint32_t b, void *buf, size_t len, uint64_t off)
{
	(void)dev;
	(void)b;
	memcpy(buf, slow_mem + off, len);
	return (ssize_t)len;
}

static ssize_t slow_pwrite(void *dev, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	(void)dev;
	(void)b;
	memcpy(slow_mem + off, buf, len);
	return (ssize_t)len;
}

static int slow_zero(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	(void)dev;
	(void)b;
	memset(slow_mem + off, 0, len);
	return 0;
}

static int slow_sync(void *dev, uint32_t b)
{
	(void)dev;
	(void)b;
	return 0;
}

static int slow_punch(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	(void)dev;
	(void)b;
	__atomic_store_n(&slow_punching, 1, __ATOMIC_RELEASE);
	usleep(300 * 1000);
	memset(slow_mem + off, 0, len);
	return 0;
}

static const struct kvb_pages_io slow_io = {
	.pread = slow_pread, .pwrite = slow_pwrite, .zero = slow_zero, .sync = slow_sync,
	.punch = slow_punch,
};

static void *tick_thread(void *arg)
{
	kvb_tick(arg);
	return NULL;
}

/*
 * A warm run being punched is held allocated meanwhile, so that no one
 * takes it between the punch and its free: an allocation that needs it
 * waits for the punch rather than failing with ENOSPC (a full store would
 * then evict, or a writer lose its bytes, for pages that are free).
 */
START_TEST(test_alloc_waits_for_a_punch)
{
	struct kvb_pages_geom g = { PS, SLOW_PAGES * PS, 1, 0 };
	struct kvb_map empty = KVB_MAP_EMPTY;
	struct kvb slow;
	struct kvb_obj *o;
	pthread_t t;
	char err[256];

	ck_assert_int_eq(kvb_pages_init_io(&slow, &g, &slow_io, NULL, err, sizeof(err)), 0);
	kvb_pages_set_warm(&slow, 0, 1 << 30); /* due for its punch at once */
	ck_assert_int_eq(kvb_obj_open(&slow, &empty, "a", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&slow, o, SLOW_PAGES * PS), 0);
	kvb_obj_close(&slow, o); /* the whole bucket free, warm */
	__atomic_store_n(&slow_punching, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_create(&t, NULL, tick_thread, &slow), 0);
	while (!__atomic_load_n(&slow_punching, __ATOMIC_ACQUIRE))
		usleep(1000);
	ck_assert_int_eq(kvb_obj_open(&slow, &empty, "b", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&slow, o, SLOW_PAGES * PS), 0);
	kvb_obj_close(&slow, o);
	pthread_join(t, NULL);
	kvb_release(&slow);
}
END_TEST

/* Bucket files copy between themselves inside the kernel. */
START_TEST(test_copy_range_files)
{
	struct kvb_pages_geom g = { PS, 64 * PS, 2, 0 };
	char err[256];

	ck_assert_int_eq(kvb_pages_init(&kvb, dir, &g, 1, err, sizeof(err)), 0);
	copy_checks();
	kvb_release(&kvb);
}
END_TEST

/* Whether any block of bytes [off, off + len) of bucket b's file is shared with another extent. */
static int bucket_shared(uint32_t b, uint64_t off, uint64_t len)
{
	char name[32], path[512];
	struct fiemap *fm = calloc(1, sizeof(*fm) + 64 * sizeof(struct fiemap_extent));
	unsigned i;
	int fd, shared = 0;

	ck_assert_ptr_nonnull(fm);
	kvb_bucket_name(b, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	fm->fm_start = off;
	fm->fm_length = len;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = 64;
	if (ioctl(fd, FS_IOC_FIEMAP, fm) == 0) {
		for (i = 0; i < fm->fm_mapped_extents; i++)
			shared |= (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_SHARED) != 0;
	}
	close(fd);
	free(fm);
	return shared;
}

/*
 * A run copied into (copy-on-write fills, copy_file_range) keeps blocks of
 * its own: on XFS (and btrfs) the in-kernel copy shares the source's
 * blocks and gives back those the run held (io_reserve), and a later write
 * there, even one the kernel acknowledged and writes back later, could
 * find the disk full.  Shares nothing on ext4 or tmpfs; see dir_setup.
 */
START_TEST(test_copied_run_keeps_own_blocks)
{
	struct kvb_pages_geom g = { PS, 64 * PS, 2, 0 };
	struct kvb_map c, n;
	struct kvb_obj *o;
	char err[256];
	uint64_t csum;

	ck_assert_int_eq(kvb_pages_init(&kvb, dir, &g, 1, err, sizeof(err)), 0);
	c = make("cow", 16 * PS, 91);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "cow", 3, &o), 0);
	put(o, 10, 3, 92);
	commit(o, &n, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert(n.bucket != c.bucket || n.page != c.page);
	ck_assert(!bucket_shared((uint32_t)n.bucket, n.page * PS, n.npages * PS));
	kvb_release(&kvb);
}
END_TEST

TCase *pages_tcase_files(void)
{
	TCase *files = tcase_create("files");

	tcase_add_checked_fixture(files, dir_setup, dir_teardown);
	tcase_add_test(files, test_runs_hold_blocks_until_freed);
	tcase_add_test(files, test_warm_runs_at_unmount_and_mount);
	tcase_add_test(files, test_adopt_run_written_outside);
	tcase_add_test(files, test_copy_range_files);
	tcase_add_test(files, test_alloc_waits_for_a_punch);
	tcase_add_test(files, test_copied_run_keeps_own_blocks);
	tcase_add_test(files, test_store_create_snapshot_rebuild);
	tcase_add_test(files, test_store_refusals);
	tcase_add_test(files, test_parse_size);
	tcase_add_test(files, test_desc_escape);
	tcase_add_test(files, test_geom_valid);
	tcase_add_test(files, test_store_refuses_symlinks_and_sets_modes);
	tcase_add_test(files, test_reserve_batch_blocks_at_end);
	return files;
}
