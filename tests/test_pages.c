/*
 * Unit tests for kvbackend/pages/ (over in-memory buckets with fault
 * injection, and over real bucket files) and for store/open.c's opening
 * rules.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "kvb.h"
#include "mem_buckets.h"
#include "meta.h"
#include "store.h"

#define PS 4096u

static struct kvb kvb;
static struct kvb_mem_faults faults;
static char dir[256];

static void mem_setup(void)
{
	struct kvb_pages_geom g = { PS, 64 * PS, 2, 0 };

	memset(&faults, 0, sizeof(faults));
	ck_assert_int_eq(kvb_mem_init(&kvb, &g, &faults), 0);
}

static void mem_teardown(void)
{
	kvb_release(&kvb);
}

static uint64_t free_pages(void)
{
	struct kvb_statfs st;

	ck_assert_int_eq(kvb_statfs(&kvb, &st), 0);
	ck_assert_uint_eq(st.block_size, PS);
	return st.blocks_free;
}

static void fill(char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 131 + i * 7 + (i >> 9));
}

/* Write len bytes of pattern seed at off through o. */
static void put(struct kvb_obj *o, size_t len, uint64_t off, unsigned seed)
{
	char *buf = malloc(len);

	fill(buf, len, seed);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, len, off), (ssize_t)len);
	free(buf);
}

/* A durability barrier with nothing to sync: freed runs become reusable. */
static uint64_t settle(void)
{
	uint64_t mark;

	ck_assert_int_eq(kvb_barrier(&kvb, &mark), 0);
	return kvb_release_freed(&kvb, mark);
}

static void commit(struct kvb_obj *o, struct kvb_map *map, uint64_t *csum)
{
	const uint64_t *pcs;

	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, map, csum, &pcs), 0);
	ck_assert_ptr_nonnull(pcs);
	kvb_obj_commit_done(&kvb, o, 1);
	settle();
}

static void expect(const struct kvb_map *m, const char *want, size_t len)
{
	char *got = malloc(len + 1);

	ck_assert_int_eq(kvb_read(&kvb, m, got, len + 1, 0), (ssize_t)len);
	ck_assert_mem_eq(got, want, len);
	free(got);
}

/* A committed object of len bytes with pattern seed under key. */
static struct kvb_map make(const char *key, size_t len, unsigned seed)
{
	struct kvb_map empty = KVB_MAP_EMPTY, map;
	struct kvb_obj *o;
	uint64_t csum;

	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, key, strlen(key), &o), 0);
	put(o, len, 0, seed);
	commit(o, &map, &csum);
	kvb_obj_close(&kvb, o);
	return map;
}

START_TEST(test_home_bucket)
{
	const char *k = "Qwen/Qwen3-32B/abc_0_k";

	ck_assert_uint_eq(kvb_home_bucket(k, strlen(k), 256), XXH64(k, strlen(k), 0) % 256);
	ck_assert_uint_eq(kvb_home_bucket(k, strlen(k), 7), XXH64(k, strlen(k), 0) % 7);
}
END_TEST

START_TEST(test_write_commit_read)
{
	struct kvb_map empty = KVB_MAP_EMPTY, map;
	struct kvb_obj *o;
	char buf[3 * PS + 5];
	uint64_t csum, csum2, before = free_pages();
	const char *key = "k1";

	fill(buf, sizeof(buf), 1);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, key, 2, &o), 0);
	/* Sequential pieces, as cp writes them. */
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, 100, 0), 100);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf + 100, sizeof(buf) - 100, 100),
			 (ssize_t)(sizeof(buf) - 100));
	ck_assert_int_eq(kvb_obj_dirty(&kvb, o), 1);
	commit(o, &map, &csum);
	ck_assert_int_eq(kvb_obj_dirty(&kvb, o), 0);
	kvb_obj_close(&kvb, o);

	ck_assert_int_eq(map.bucket, (int32_t)kvb_home_bucket(key, 2, 2));
	ck_assert_uint_eq(map.npages, 4);
	ck_assert_uint_eq(map.size, sizeof(buf));
	ck_assert_uint_eq(csum, XXH3_64bits(buf, sizeof(buf)));
	ck_assert_int_eq(kvb_checksum(&kvb, &map, &csum2), 0);
	ck_assert_uint_eq(csum2, csum);
	expect(&map, buf, sizeof(buf));
	ck_assert_uint_eq(free_pages(), before - 4);
	ck_assert_int_eq(kvb_remove(&kvb, &map), 0);
	/* Held until the record change is durable. */
	ck_assert_uint_eq(free_pages(), before - 4);
	ck_assert_uint_eq(settle(), 4);
	ck_assert_uint_eq(free_pages(), before);
	/* A second remove is a double free: refused at release, counts unchanged. */
	ck_assert_int_eq(kvb_remove(&kvb, &map), 0);
	settle();
	ck_assert_uint_eq(free_pages(), before);
}
END_TEST

START_TEST(test_random_writes_checksum)
{
	struct kvb_map empty = KVB_MAP_EMPTY, map;
	struct kvb_obj *o;
	char buf[2 * PS];
	uint64_t csum;

	/* Out-of-order writes: the checksum is recomputed from the pages. */
	fill(buf, sizeof(buf), 9);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "r", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf + PS, PS, PS), PS);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, PS, 0), PS);
	commit(o, &map, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(csum, XXH3_64bits(buf, sizeof(buf)));
	expect(&map, buf, sizeof(buf));
}
END_TEST

START_TEST(test_hole_reads_zeros)
{
	struct kvb_map empty = KVB_MAP_EMPTY, map;
	struct kvb_obj *o;
	char want[PS + 10], got[PS + 10];
	uint64_t csum;

	/* The memory backend starts as 0xa5, so a missed zero-fill shows. */
	memset(want, 0, sizeof(want));
	memcpy(want + PS, "0123456789", 10);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "h", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, "0123456789", 10, PS), 10);
	commit(o, &map, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_int_eq(kvb_read(&kvb, &map, got, sizeof(got), 0), (ssize_t)sizeof(want));
	ck_assert_mem_eq(got, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
}
END_TEST

START_TEST(test_extend_in_place_then_move)
{
	struct kvb_pages_geom g = { PS, 8 * PS, 1, 0 };
	struct kvb_map a, b, a2;
	struct kvb_obj *o;
	char want[3 * PS];
	uint64_t csum;

	kvb_release(&kvb);
	ck_assert_int_eq(kvb_mem_init(&kvb, &g, &faults), 0);
	a = make("a", PS, 1);
	ck_assert_uint_eq(a.page, 0);

	/* Appending grows the run in place while the next page is free. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &a, "a", 1, &o), 0);
	put(o, PS, PS, 2);
	commit(o, &a2, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(a2.page, 0);
	ck_assert_uint_eq(a2.npages, 2);
	ck_assert_uint_eq(free_pages(), 6);

	/* Blocked by b, the next append moves the object and frees the old run. */
	b = make("b", PS, 3);
	ck_assert_uint_eq(b.page, 2);
	ck_assert_int_eq(kvb_obj_open(&kvb, &a2, "a", 1, &o), 0);
	put(o, PS, 2 * PS, 4);
	ck_assert_uint_eq(free_pages(), 2); /* old run (2) + new run (3) + b (1) */
	commit(o, &a, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(a.page, 3);
	ck_assert_uint_eq(a.npages, 3);
	ck_assert_uint_eq(free_pages(), 4);
	fill(want, PS, 1);
	fill(want + PS, PS, 2);
	fill(want + 2 * PS, PS, 4);
	expect(&a, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
}
END_TEST

START_TEST(test_copy_on_write)
{
	struct kvb_map c, view, n;
	struct kvb_obj *o;
	char old[2 * PS], neu[2 * PS];
	uint64_t csum, before;

	c = make("cow", sizeof(old), 5);
	fill(old, sizeof(old), 5);
	before = free_pages();
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "cow", 3, &o), 0);
	put(o, 10, 100, 6);
	/* The committed pages are untouched while the overwrite is in progress. */
	expect(&c, old, sizeof(old));
	kvb_obj_view(&kvb, o, &view);
	ck_assert(view.page != c.page || view.bucket != c.bucket);
	memcpy(neu, old, sizeof(neu));
	fill(neu + 100, 10, 6);
	/* A reader of the view settles it first (the copy is lazy). */
	ck_assert_int_eq(kvb_obj_settle(&kvb, o, 0, sizeof(neu)), 0);
	expect(&view, neu, sizeof(neu));
	ck_assert_uint_eq(free_pages(), before - 2);
	commit(o, &n, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before);
	expect(&n, neu, sizeof(neu));
	ck_assert_uint_eq(csum, XXH3_64bits(neu, sizeof(neu)));
}
END_TEST

/*
 * Copy-on-write is lazy: an overwrite copies only the pages it does not
 * cover, and those only when the object is committed (or read, or
 * truncated); a page it covers in part is copied before the write.
 */
START_TEST(test_lazy_copy_on_write)
{
	struct kvb_map c, n, view;
	struct kvb_obj *o;
	static char want[8 * PS], orig[8 * PS];
	unsigned long w0;
	uint64_t csum;

	c = make("lazy", sizeof(want), 11);
	fill(want, sizeof(want), 11);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "lazy", 4, &o), 0);
	faults.writes = 0;
	put(o, 4 * PS, 2 * PS, 12);
	fill(want + 2 * PS, 4 * PS, 12);
	ck_assert_uint_eq(faults.writes, 1); /* the data only: nothing copied yet */
	/* 100 bytes inside page 6: that page's old bytes first, then the data. */
	put(o, 100, 6 * PS + 50, 13);
	fill(want + 6 * PS + 50, 100, 13);
	ck_assert_uint_eq(faults.writes, 3);
	fill(orig, sizeof(orig), 11);
	expect(&c, orig, sizeof(orig)); /* the committed run is untouched */
	/* A reader of 10 bytes of page 0 settles that page only. */
	ck_assert_int_eq(kvb_obj_settle(&kvb, o, 5, 10), 0);
	ck_assert_uint_eq(faults.writes, 4);
	kvb_obj_view(&kvb, o, &view);
	{
		char got[PS];

		ck_assert_int_eq(kvb_read(&kvb, &view, got, PS, 0), PS);
		ck_assert_mem_eq(got, want, PS);
	}
	w0 = faults.writes;
	commit(o, &n, &csum);
	/* Page 1 and page 7, still in the old run: two copies at commit. */
	ck_assert_uint_eq(faults.writes, w0 + 2);
	kvb_obj_view(&kvb, o, &view);
	kvb_obj_close(&kvb, o);
	expect(&n, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));

	/* A whole overwrite from 0 copies nothing at all, and hashes as it goes. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &n, "lazy", 4, &o), 0);
	faults.writes = 0;
	put(o, sizeof(want), 0, 14);
	fill(want, sizeof(want), 14);
	commit(o, &n, &csum);
	ck_assert_uint_eq(faults.writes, 1);
	kvb_obj_close(&kvb, o);
	expect(&n, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));

	/* A truncate fills first: growing after a partial overwrite keeps the old bytes. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &n, "lazy", 4, &o), 0);
	put(o, 10, 0, 15);
	fill(want, 10, 15);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, sizeof(want) - PS), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, sizeof(want)), 0);
	memset(want + sizeof(want) - PS, 0, PS);
	commit(o, &n, &csum);
	kvb_obj_close(&kvb, o);
	expect(&n, want, sizeof(want));
}
END_TEST

START_TEST(test_abandoned_write_frees_pages)
{
	struct kvb_map c, view;
	struct kvb_obj *o;
	char old[PS];
	uint64_t before;

	c = make("keep", PS, 7);
	fill(old, PS, 7);
	before = free_pages();
	/* Overwrite and append, then drop without committing. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "keep", 4, &o), 0);
	put(o, 3 * PS, 0, 8);
	kvb_obj_view(&kvb, o, &view);
	ck_assert_uint_eq(view.size, 3 * PS);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before);
	expect(&c, old, PS);

	/* Appending in place then dropping frees only the appended pages. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "keep", 4, &o), 0);
	put(o, PS, PS, 9);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before);
	expect(&c, old, PS);
}
END_TEST

START_TEST(test_truncate)
{
	struct kvb_map c, n;
	struct kvb_obj *o;
	char want[3 * PS];
	uint64_t csum, before;

	c = make("t", 3 * PS, 1);
	fill(want, sizeof(want), 1);
	before = free_pages();
	/* Shrink: committed pages stay until the commit, then the tail is freed. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "t", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, PS + 1), 0);
	ck_assert_uint_eq(free_pages(), before);
	commit(o, &n, &csum);
	ck_assert_uint_eq(n.npages, 2);
	ck_assert_uint_eq(n.page, c.page);
	ck_assert_uint_eq(free_pages(), before + 1);
	expect(&n, want, PS + 1);
	ck_assert_uint_eq(csum, XXH3_64bits(want, PS + 1));

	/* Grow: the new bytes are zeros, the run is reserved exactly. */
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 4 * PS), 0);
	commit(o, &n, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(n.npages, 4);
	memset(want + PS + 1, 0, sizeof(want) - PS - 1);
	{
		char full[4 * PS];

		memcpy(full, want, PS + 1);
		memset(full + PS + 1, 0, sizeof(full) - PS - 1);
		expect(&n, full, sizeof(full));
		ck_assert_uint_eq(csum, XXH3_64bits(full, sizeof(full)));
	}
	/* To zero: no pages at all. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &n, "t", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 0), 0);
	commit(o, &c, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_int_eq(c.bucket, -1);
	ck_assert_uint_eq(free_pages(), 128);
}
END_TEST

START_TEST(test_efbig_enospc_spill)
{
	struct kvb_map empty = KVB_MAP_EMPTY, m[4];
	struct kvb_obj *o;
	char *big = calloc(1, 64 * PS + 1);
	int i;

	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "big", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, big, 64 * PS + 1, 0), -EFBIG);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 64 * PS + 1), -EFBIG);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), 128);

	/* Two whole-bucket objects: the second spills into the other bucket. */
	m[0] = make("x", 64 * PS, 1);
	m[1] = make("x", 64 * PS, 2);
	ck_assert_int_ne(m[0].bucket, m[1].bucket);
	ck_assert_uint_eq(free_pages(), 0);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "y", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, big, 1, 0), -ENOSPC);
	kvb_obj_close(&kvb, o);
	ck_assert_int_eq(kvb_remove(&kvb, &m[0]), 0);
	settle();
	for (i = 2; i < 4; i++)
		m[i] = make("z", 32 * PS, (unsigned)i);
	ck_assert_uint_eq(free_pages(), 0);
	free(big);
}
END_TEST

START_TEST(test_failed_write_leaks_nothing)
{
	struct kvb_map c, empty = KVB_MAP_EMPTY;
	struct kvb_obj *o;
	char old[PS], buf[2 * PS];
	uint64_t before;

	c = make("f", PS, 3);
	fill(old, PS, 3);
	before = free_pages();
	/* The copy of a copy-on-write fails: the error reaches the writer, nothing leaks. */
	faults.writes = 0;
	faults.fail_write_at = 1;
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "f", 1, &o), 0);
	fill(buf, sizeof(buf), 4);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, 10, 0), -EIO);
	ck_assert_uint_eq(free_pages(), before);
	/* A later write succeeds; dropping it restores the counts. */
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before);
	expect(&c, old, PS);

	/* A new object whose data write fails keeps its pages only until close. */
	faults.writes = 0;
	faults.fail_write_at = 1;
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "g", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, sizeof(buf), 0), -EIO);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before);
}
END_TEST

START_TEST(test_failed_commit_keeps_old)
{
	struct kvb_map c, n;
	struct kvb_obj *o;
	char old[PS];
	uint64_t csum, before;

	c = make("fc", PS, 3);
	fill(old, PS, 3);
	before = free_pages();
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "fc", 2, &o), 0);
	put(o, PS, 0, 4);
	{
		const uint64_t *pcs;

		ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 1, &n, &csum, &pcs), 0);
	}
	/* The metadata commit failed: the old object stays, the new run is freed at close. */
	kvb_obj_commit_done(&kvb, o, 0);
	ck_assert_int_eq(kvb_obj_dirty(&kvb, o), 1);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), before);
	expect(&c, old, PS);
}
END_TEST

START_TEST(test_freed_pages_wait_for_barrier)
{
	struct kvb_pages_geom g = { PS, 4 * PS, 1, 0 };
	struct kvb_map a, empty = KVB_MAP_EMPTY, n;
	struct kvb_obj *o;
	const uint64_t *pcs;
	uint64_t csum;

	kvb_release(&kvb);
	ck_assert_int_eq(kvb_mem_init(&kvb, &g, &faults), 0);
	a = make("a", 4 * PS, 1);
	ck_assert_int_eq(kvb_remove(&kvb, &a), 0);
	/* Before the barrier the old pages cannot be handed out again. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "b", 1, &o), 0);
	{
		char c = 'x';

		ck_assert_int_eq(kvb_obj_write(&kvb, o, &c, 1, 0), -ENOSPC);
		ck_assert_uint_eq(settle(), 4);
		ck_assert_int_eq(kvb_obj_write(&kvb, o, &c, 1, 0), 1);
	}
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &n, &csum, &pcs), 0);
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), 3);
}
END_TEST

START_TEST(test_page_checksums_and_verified_read)
{
	struct kvb_map empty = KVB_MAP_EMPTY, map, rnd;
	struct kvb_obj *o;
	const uint64_t *pcs;
	uint64_t csum, keep[4], bad = 99;
	char buf[3 * PS + 100], got[3 * PS + 100];
	int i;

	fill(buf, sizeof(buf), 11);
	/* Streamed (sequential) and re-read (random order) give the same sums. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "p", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, 5000, 0), 5000);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf + 5000, sizeof(buf) - 5000, 5000),
			 (ssize_t)(sizeof(buf) - 5000));
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &map, &csum, &pcs), 0);
	ck_assert_uint_eq(map.npages, 4);
	for (i = 0; i < 4; i++) {
		size_t len = i < 3 ? PS : 100;

		ck_assert_uint_eq(pcs[i], XXH3_64bits(buf + (size_t)i * PS, len));
	}
	memcpy(keep, pcs, sizeof(keep));
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);

	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "q", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf + PS, sizeof(buf) - PS, PS),
			 (ssize_t)(sizeof(buf) - PS));
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, PS, 0), PS);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &rnd, &csum, &pcs), 0);
	ck_assert_mem_eq(pcs, keep, sizeof(keep));
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);

	/* Partial and unaligned verified reads return the right bytes. */
	ck_assert_int_eq(kvb_read_verified(&kvb, &map, keep, got, 10, PS - 5, &bad), 10);
	ck_assert_mem_eq(got, buf + PS - 5, 10);
	ck_assert_int_eq(kvb_read_verified(&kvb, &map, keep, got, sizeof(got), 0, &bad),
			 (ssize_t)sizeof(buf));
	ck_assert_mem_eq(got, buf, sizeof(buf));
	/* A checksum that does not match is an error naming the page, never the bytes. */
	keep[2] ^= 1;
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(kvb_read_verified(&kvb, &map, keep, got, 10, 2 * PS + 3, &bad),
			 -EBADMSG);
	ck_assert_uint_eq(bad, 2);
	/* Also when the whole object is read, and checked, in the caller's buffer. */
	bad = 99;
	ck_assert_int_eq(kvb_read_verified(&kvb, &map, keep, got, sizeof(got), 0, &bad),
			 -EBADMSG);
	ck_assert_uint_eq(bad, 2);
	ck_assert_int_eq(kvb_read_verified(&kvb, &map, keep, got, 10, PS, &bad), 10);
}
END_TEST

/*
 * A read of a whole object asks the bucket for exactly that object, so
 * readahead does not run into its neighbours; reads of a part keep the
 * kernel's own readahead.
 */
START_TEST(test_read_hint_covers_the_object)
{
	struct kvb_map a, b;
	uint64_t bad = 0, pcs[4];
	char buf[3 * PS + 100], got[3 * PS + 100];
	unsigned i;

	a = make("a", sizeof(buf), 21);
	b = make("b", 2 * PS, 22);
	fill(buf, sizeof(buf), 21);
	for (i = 0; i < 4; i++)
		pcs[i] = XXH3_64bits(buf + i * PS, i < 3 ? PS : 100);
	ck_assert_uint_eq(faults.willneeds, 0);

	expect(&a, buf, sizeof(buf));
	ck_assert_uint_eq(faults.willneeds, 1);
	ck_assert_uint_eq(faults.willneed_bucket, (uint32_t)a.bucket);
	ck_assert_uint_eq(faults.willneed_off, a.page * PS);
	ck_assert_uint_eq(faults.willneed_len, sizeof(buf));

	/* Parts: from the start, from the middle, verified or not. */
	ck_assert_int_eq(kvb_read(&kvb, &a, got, PS, 0), PS);
	ck_assert_int_eq(kvb_read(&kvb, &a, got, sizeof(got), PS), sizeof(buf) - PS);
	ck_assert_int_eq(kvb_read_verified(&kvb, &a, pcs, got, 10, 7, &bad), 10);
	ck_assert_int_eq(kvb_read_verified(&kvb, &a, pcs, got, 10, 2 * PS + 3, &bad), 10);
	ck_assert_int_eq(kvb_read_verified(&kvb, &b, pcs, got, 0, 0, &bad), 0);
	ck_assert_uint_eq(faults.willneeds, 1);

	/* A verified whole read. */
	ck_assert_int_eq(kvb_read_verified(&kvb, &a, pcs, got, sizeof(got), 0, &bad),
			 (ssize_t)sizeof(buf));
	ck_assert_mem_eq(got, buf, sizeof(buf));
	ck_assert_uint_eq(faults.willneeds, 2);
	ck_assert_uint_eq(faults.willneed_off, a.page * PS);
	ck_assert_uint_eq(faults.willneed_len, sizeof(buf));
}
END_TEST

/*
 * Verified reads into buffers of exactly the asked-for size: whole pages are
 * checked in place, anything else through a copy, and no read writes past
 * what it was asked for.
 */
START_TEST(test_verified_read_stays_in_its_buffer)
{
	static const struct { uint64_t off; size_t len; } r[] = {
		{ 0, 3 * PS + 100 }, { PS, 2 * PS }, { 3 * PS, 100 }, { 0, 10 },
		{ PS, PS - 1 }, { PS + 1, PS }, { 3 * PS + 50, 50 }, { 2 * PS, PS + 100 },
	};
	char want[3 * PS + 100];
	uint64_t pcs[4], bad = 0;
	struct kvb_map m;
	unsigned i, j;

	m = make("x", sizeof(want), 31);
	fill(want, sizeof(want), 31);
	for (i = 0; i < 4; i++)
		pcs[i] = XXH3_64bits(want + i * PS, i < 3 ? PS : 100);
	for (i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		unsigned char *got = malloc(r[i].len + 64);

		memset(got, 0xa5, r[i].len + 64);
		ck_assert_int_eq(kvb_read_verified(&kvb, &m, pcs, got, r[i].len, r[i].off,
							&bad), (ssize_t)r[i].len);
		ck_assert_mem_eq(got, want + r[i].off, r[i].len);
		for (j = 0; j < 64; j++)
			ck_assert_uint_eq(got[r[i].len + j], 0xa5);
		free(got);
	}
}
END_TEST

/* Commit o's working state without a barrier (commit() settles). */
static void commit_nosync(struct kvb_obj *o, struct kvb_map *map)
{
	const uint64_t *pcs;
	uint64_t csum;

	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, map, &csum, &pcs), 0);
	kvb_obj_commit_done(&kvb, o, 1);
}

/*
 * Zeros are data: a file grown in place over a page that another, removed
 * object's bytes left behind reads back as zeros after a barrier and a
 * power cut (the zeroing marks its bucket for the barrier's sync).
 */
START_TEST(test_power_cut_keeps_zeroed_growth)
{
	struct kvb_pages_geom g = { PS, 4 * PS, 1, 0 };
	struct kvb_map b, a, b2;
	struct kvb_obj *o;
	char want[2 * PS], got[2 * PS];
	uint64_t csum, mark;
	const uint64_t *pcs;

	kvb_release(&kvb);
	ck_assert_int_eq(kvb_mem_init(&kvb, &g, &faults), 0);
	b = make("b", PS, 1); /* page 0 */
	a = make("a", PS, 2); /* page 1 */
	ck_assert_int_eq(kvb_remove(&kvb, &a), 0);
	ck_assert_int_eq(kvb_barrier(&kvb, &mark), 0);
	kvb_release_freed(&kvb, mark); /* page 1 free, its old bytes durable */
	ck_assert_int_eq(kvb_obj_open(&kvb, &b, "b", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 2 * PS), 0);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &b2, &csum, &pcs), 0);
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(b2.page, b.page); /* grown in place, over a's old page */
	ck_assert_int_eq(kvb_barrier(&kvb, &mark), 0);
	kvb_release_freed(&kvb, mark);
	kvb_mem_power_cut(&kvb);
	fill(want, PS, 1);
	memset(want + PS, 0, PS);
	ck_assert_int_eq(kvb_read(&kvb, &b2, got, sizeof(got), 0), (ssize_t)sizeof(got));
	ck_assert_mem_eq(got, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
}
END_TEST

START_TEST(test_power_cut_keeps_synced_objects)
{
	struct kvb_pages_geom g = { PS, 8 * PS, 1, 0 };
	struct kvb_map a, b, a2, c, empty = KVB_MAP_EMPTY;
	struct kvb_obj *o;
	char wa[3 * PS], wb[PS + 9];
	uint64_t csum, mark;

	kvb_release(&kvb);
	ck_assert_int_eq(kvb_mem_init(&kvb, &g, &faults), 0);
	/* a and b committed, then a barrier: their bytes are durable. */
	a = make("a", sizeof(wa), 1);
	b = make("b", sizeof(wb), 2);
	fill(wa, sizeof(wa), 1);
	fill(wb, sizeof(wb), 2);
	ck_assert_int_eq(kvb_barrier(&kvb, &mark), 0);
	kvb_release_freed(&kvb, mark);
	/* After it, with no barrier: a overwritten, b removed, then c fills the bucket. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &a, "a", 1, &o), 0);
	put(o, PS, 0, 7);
	commit_nosync(o, &a2);
	kvb_obj_close(&kvb, o);
	ck_assert_int_eq(kvb_remove(&kvb, &b), 0);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "c", 1, &o), 0);
	{
		/*
		 * The bucket is full: a's new run took the last 3 pages, and a's
		 * old run and b's wait for the barrier.  Handing them to c now
		 * would overwrite bytes the durable metadata still points at.
		 */
		char *buf = malloc(5 * PS);

		memset(buf, 'c', 5 * PS);
		ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, 5 * PS, 0), -ENOSPC);
		free(buf);
	}
	commit_nosync(o, &c);
	kvb_obj_close(&kvb, o);
	/*
	 * Power cut: every write since the barrier is lost, and the metadata
	 * comes back as of the barrier (a and b as they were).  Their pages
	 * were never written since: copy-on-write and the freed list kept
	 * them out of reach, so they still hold their content (invariant 2).
	 */
	kvb_mem_power_cut(&kvb);
	expect(&a, wa, sizeof(wa));
	expect(&b, wb, sizeof(wb));
	ck_assert_int_eq(kvb_checksum(&kvb, &a, &csum), 0);
	ck_assert_uint_eq(csum, XXH3_64bits(wa, sizeof(wa)));
}
END_TEST

START_TEST(test_describe)
{
	struct kvb_map m = { .bucket = 1, .page = 3, .npages = 1, .size = 10 };
	char buf[256];

	ck_assert_int_gt(kvb_describe(&kvb, &m, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "file_path=/bucket_01.data\noffset=12288\nobject_size=10\n");
	ck_assert_int_eq(kvb_describe(&kvb, &m, buf, 10), -ERANGE);
}
END_TEST

/* ---- real bucket files, snapshot and rebuild, store opening rules ---- */

static void dir_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ofs-test-pages-XXXXXX");
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

/*
 * A run holds its disk blocks from its allocation (a write-back then
 * never meets a full disk) and gives them back when it is freed: a working
 * state's at once, a committed one's after the barrier.
 */
START_TEST(test_runs_hold_blocks_until_freed)
{
	struct kvb_pages_geom g = { PS, 32 * PS, 1, 0 };
	struct kvb_map empty = KVB_MAP_EMPTY, map, view;
	struct kvb_obj *o;
	char err[256];
	uint64_t csum;

	char probe[512];
	int fd, can;

	/* A filesystem under /tmp without fallocate and hole punching: nothing to check. */
	snprintf(probe, sizeof(probe), "%s/probe", dir);
	fd = open(probe, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	can = fallocate(fd, 0, 0, PS) == 0 &&
	      fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, PS) == 0;
	close(fd);
	unlink(probe);
	if (!can)
		return;
	ck_assert_int_eq(kvb_pages_init(&kvb, dir, &g, 1, err, sizeof(err)), 0);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "a", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 8 * PS), 0);
	ck_assert_uint_ge(bucket_blocks(1), 8 * PS);
	kvb_obj_view(&kvb, o, &view);
	ck_assert_int_eq(view.npages, 8);
	/* Dropped uncommitted: its blocks go back at once. */
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	/* Committed, then removed: the blocks stay until the barrier. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "a", 1, &o), 0);
	put(o, 4 * PS, 0, 1);
	commit(o, &map, &csum);
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_ge(bucket_blocks(1), 4 * PS);
	ck_assert_int_eq(kvb_remove(&kvb, &map), 0);
	ck_assert_uint_ge(bucket_blocks(1), 4 * PS);
	ck_assert_uint_eq(settle(), 4);
	ck_assert_uint_eq(bucket_blocks(1), 0);
	kvb_release(&kvb);
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

static Suite *pages_suite(void)
{
	Suite *s = suite_create("pages");
	TCase *mem = tcase_create("mem"), *files = tcase_create("files");

	tcase_add_checked_fixture(mem, mem_setup, mem_teardown);
	tcase_add_test(mem, test_home_bucket);
	tcase_add_test(mem, test_write_commit_read);
	tcase_add_test(mem, test_random_writes_checksum);
	tcase_add_test(mem, test_hole_reads_zeros);
	tcase_add_test(mem, test_extend_in_place_then_move);
	tcase_add_test(mem, test_copy_on_write);
	tcase_add_test(mem, test_lazy_copy_on_write);
	tcase_add_test(mem, test_power_cut_keeps_zeroed_growth);
	tcase_add_test(mem, test_abandoned_write_frees_pages);
	tcase_add_test(mem, test_truncate);
	tcase_add_test(mem, test_efbig_enospc_spill);
	tcase_add_test(mem, test_failed_write_leaks_nothing);
	tcase_add_test(mem, test_failed_commit_keeps_old);
	tcase_add_test(mem, test_describe);
	tcase_add_test(mem, test_freed_pages_wait_for_barrier);
	tcase_add_test(mem, test_page_checksums_and_verified_read);
	tcase_add_test(mem, test_read_hint_covers_the_object);
	tcase_add_test(mem, test_verified_read_stays_in_its_buffer);
	tcase_add_test(mem, test_power_cut_keeps_synced_objects);
	suite_add_tcase(s, mem);

	tcase_add_checked_fixture(files, dir_setup, dir_teardown);
	tcase_add_test(files, test_runs_hold_blocks_until_freed);
	tcase_add_test(files, test_store_create_snapshot_rebuild);
	tcase_add_test(files, test_store_refusals);
	tcase_add_test(files, test_parse_size);
	tcase_add_test(files, test_desc_escape);
	tcase_add_test(files, test_geom_valid);
	tcase_add_test(files, test_store_refuses_symlinks_and_sets_modes);
	suite_add_tcase(s, files);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pages_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
