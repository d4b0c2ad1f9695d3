/*
 * Unit tests for kvbackend/pages/ (over in-memory buckets with fault
 * injection, and over real bucket files) and for store/open.c's opening
 * rules.
 *
 * This file holds the helpers, the object's life in the "mem" case (write,
 * read, copy on write, truncate, failures) and the suite; the rest of
 * "mem" is in test_pages_durable.c, the "files" case in test_pages_files.c.
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
#include "kvb_hash.h"
#include "mem_buckets.h"
#include "meta.h"
#include "store.h"

#include "test_pages.h"

struct kvb kvb;
struct kvb_mem_faults faults;

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

uint64_t free_pages(void)
{
	struct kvb_statfs st;

	ck_assert_int_eq(kvb_statfs(&kvb, &st), 0);
	ck_assert_uint_eq(st.block_size, PS);
	return st.blocks_free;
}

void fill(char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 131 + i * 7 + (i >> 9));
}

/* Write len bytes of pattern seed at off through o. */
void put(struct kvb_obj *o, size_t len, uint64_t off, unsigned seed)
{
	char *buf = malloc(len);

	fill(buf, len, seed);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, len, off), (ssize_t)len);
	free(buf);
}

/* A durability barrier with nothing to sync: freed runs become reusable. */
uint64_t settle(void)
{
	uint64_t mark;

	ck_assert_int_eq(kvb_barrier(&kvb, &mark), 0);
	return kvb_release_freed(&kvb, mark);
}

void commit(struct kvb_obj *o, struct kvb_map *map, uint64_t *csum)
{
	const uint64_t *pcs;

	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, map, csum, &pcs), 0);
	ck_assert_ptr_nonnull(pcs);
	kvb_obj_commit_done(&kvb, o, 1);
	settle();
}

void expect(const struct kvb_map *m, const char *want, size_t len)
{
	char *got = malloc(len + 1);

	ck_assert_int_eq(kvb_read(&kvb, m, got, len + 1, 0), (ssize_t)len);
	ck_assert_mem_eq(got, want, len);
	free(got);
}

/* A committed object of len bytes with pattern seed under key. */
struct kvb_map make(const char *key, size_t len, unsigned seed)
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

/*
 * A batch's runs get their blocks at reserve_end: adjacent ones with one
 * reserve, run by run when that finds no room, and a run that finds none
 * is dropped (its state fresh: a reserve outside the pair tries again).
 */
START_TEST(test_reserve_batch_no_room)
{
	struct kvb_pages_geom g = { PS, 16 * PS, 1, 0 };
	struct kvb_map empty = KVB_MAP_EMPTY, view;
	struct kvb_obj *o[4];
	uint64_t before, at;
	int errs[4];
	char key[8];
	unsigned i;

	kvb_release(&kvb);
	ck_assert_int_eq(kvb_mem_init(&kvb, &g, &faults), 0);
	before = free_pages();
	for (i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "t/k%u", i);
		ck_assert_int_eq(kvb_obj_open(&kvb, &empty, key, strlen(key), &o[i]), 0);
	}
	/* Together: one reserve of the 8 adjacent pages. */
	ck_assert_int_eq(kvb_reserve_begin(&kvb), 0);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(kvb_obj_reserve(&kvb, o[i], 2 * PS), 0);
	ck_assert_uint_eq(faults.reserves, 0);
	kvb_reserve_end(&kvb, o, 4, errs);
	ck_assert_uint_eq(faults.reserves, 1);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(errs[i], 0);
	for (i = 0; i < 4; i++) {
		kvb_obj_close(&kvb, o[i]);
		snprintf(key, sizeof(key), "t/k%u", i);
		ck_assert_int_eq(kvb_obj_open(&kvb, &empty, key, strlen(key), &o[i]), 0);
	}
	ck_assert_uint_eq(free_pages(), before);
	/* No room for more than a run at once: run by run, all held. */
	faults.reserve_max = 2 * PS;
	faults.reserves = 0;
	ck_assert_int_eq(kvb_reserve_begin(&kvb), 0);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(kvb_obj_reserve(&kvb, o[i], 2 * PS), 0);
	kvb_obj_view(&kvb, o[2], &view);
	at = view.page * PS;
	kvb_reserve_end(&kvb, o, 4, errs);
	ck_assert_uint_eq(faults.reserves, 5);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(errs[i], 0);
	ck_assert_uint_eq(free_pages(), before - 8);
	for (i = 0; i < 4; i++) {
		kvb_obj_close(&kvb, o[i]);
		snprintf(key, sizeof(key), "t/k%u", i);
		ck_assert_int_eq(kvb_obj_open(&kvb, &empty, key, strlen(key), &o[i]), 0);
	}
	/* No room for one run: that state alone is fresh again, its pages free. */
	faults.reserve_fail_at = at + 1;
	ck_assert_int_eq(kvb_reserve_begin(&kvb), 0);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(kvb_obj_reserve(&kvb, o[i], 2 * PS), 0);
	kvb_obj_view(&kvb, o[2], &view);
	ck_assert_uint_eq(view.page * PS, at);
	kvb_reserve_end(&kvb, o, 4, errs);
	ck_assert_int_eq(errs[0], 0);
	ck_assert_int_eq(errs[1], 0);
	ck_assert_int_eq(errs[2], -ENOSPC);
	ck_assert_int_eq(errs[3], 0);
	kvb_obj_view(&kvb, o[2], &view);
	ck_assert_int_eq(view.bucket, -1);
	ck_assert_uint_eq(free_pages(), before - 6);
	faults.reserve_fail_at = 0;
	ck_assert_int_eq(kvb_obj_reserve(&kvb, o[2], 2 * PS), 0);
	ck_assert_uint_eq(free_pages(), before - 8);
	for (i = 0; i < 4; i++)
		kvb_obj_close(&kvb, o[i]);
	ck_assert_uint_eq(free_pages(), before);
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
/*
 * Copy-on-write copies the pages it keeps inside the storage (io copy),
 * and through a buffer where the storage cannot: same bytes either way.
 */
START_TEST(test_copy_inside_storage_and_fallback)
{
	static char want[8 * PS];
	struct kvb_map c, n;
	struct kvb_obj *o;
	uint64_t csum;
	int round;

	for (round = 0; round < 2; round++) {
		/* Round 1: the storage cannot copy (a copy between filesystems). */
		faults.copy_err = round ? -EXDEV : 0;
		c = make(round ? "cpy1" : "cpy0", sizeof(want), 21);
		fill(want, sizeof(want), 21);
		ck_assert_int_eq(kvb_obj_open(&kvb, &c, "cpy", 3, &o), 0);
		faults.copies = 0;
		faults.writes = 0;
		/* Part of page 3: its old bytes first, then the data. */
		put(o, 100, 3 * PS + 10, 22);
		fill(want + 3 * PS + 10, 100, 22);
		commit(o, &n, &csum);
		kvb_obj_close(&kvb, o);
		expect(&n, want, sizeof(want));
		ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
		if (round == 0) {
			/* Page 3, then pages 0-2 and 4-7 at commit: three copies, no buffer. */
			ck_assert_uint_eq(faults.copies, 3);
			ck_assert_uint_eq(faults.writes, 4);
		} else {
			/* Asked once; then read and written: 3 copies and the data. */
			ck_assert_uint_eq(faults.copies, 1);
			ck_assert_uint_eq(faults.writes, 4);
		}
	}
}
END_TEST

/* The page sums a commit hands out, checked against want. */
static void check_pcs(const uint64_t *pcs, const char *want, size_t len)
{
	size_t pg;

	for (pg = 0; pg * PS < len; pg++)
		ck_assert_uint_eq(pcs[pg], XXH3_64bits(want + pg * PS,
						       len - pg * PS < PS ? len - pg * PS : PS));
}

/*
 * Commits of small overwrites of one writer (msync): after a barrier the
 * previous version's run is written again, so a commit copies only the
 * pages written since, and keeps the sums of the others; without a
 * barrier the previous version stays intact and a fresh run is used.
 */
START_TEST(test_spare_run_reused_after_barrier)
{
	static char want[8 * PS], prev[8 * PS];
	struct kvb_map c0, c1, c2, c3;
	const uint64_t *pcs;
	struct kvb_obj *o;
	uint64_t csum, before;

	c0 = make("spare", sizeof(want), 31);
	fill(want, sizeof(want), 31);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c0, "spare", 5, &o), 0);
	put(o, 100, 2 * PS + 7, 32);
	fill(want + 2 * PS + 7, 100, 32);
	commit(o, &c1, &csum);
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
	before = free_pages();
	/* After the barrier: c0's run again; page 2 only is stale (page 5 is c1's there). */
	faults.copies = 0;
	put(o, 10, 5 * PS + 1, 33);
	fill(want + 5 * PS + 1, 10, 33);
	faults.read_bytes = 0;
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &c2, &csum, &pcs), 0);
	ck_assert_uint_eq(c2.bucket, c0.bucket);
	ck_assert_uint_eq(c2.page, c0.page);
	ck_assert_uint_eq(faults.copies, 1);
	/* The commit hashed the one page written, not the object. */
	ck_assert_uint_eq(faults.read_bytes, PS);
	/* Nothing allocated: the spare, counted free, is the working run. */
	ck_assert_uint_eq(free_pages(), before - 8);
	ck_assert_uint_eq(csum, kvb_pages_sum_buf(want, sizeof(want), PS));
	check_pcs(pcs, want, sizeof(want));
	kvb_obj_commit_done(&kvb, o, 1);
	expect(&c2, want, sizeof(want));
	/* No barrier since: c1's run (the previous version) must stay as it is. */
	memcpy(prev, want, sizeof(prev));
	put(o, PS, 0, 34);
	fill(want, PS, 34);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &c3, &csum, &pcs), 0);
	ck_assert(c3.bucket != c1.bucket || c3.page != c1.page);
	ck_assert(c3.bucket != c2.bucket || c3.page != c2.page);
	check_pcs(pcs, want, sizeof(want));
	kvb_obj_commit_done(&kvb, o, 1);
	expect(&c2, prev, sizeof(prev));
	expect(&c3, want, sizeof(want));
	ck_assert_uint_eq(csum, kvb_pages_sum_buf(want, sizeof(want), PS));
	settle();
	kvb_obj_close(&kvb, o);
	settle();
	/* Every run but the last version's is free again (before: c1's). */
	ck_assert_uint_eq(free_pages(), before);
	expect(&c3, want, sizeof(want));
}
END_TEST

/*
 * The first overwrite of a version, with that version's page sums (the
 * store gives them from its record): its pages of zeros (a fallocated
 * pool's, never written) are zeroed in the new run, not copied; the
 * others are copied as before.
 */
START_TEST(test_fill_zeros_not_copied)
{
	static char want[8 * PS];
	struct kvb_map empty = KVB_MAP_EMPTY, c, n;
	uint64_t pcs[8], csum, p;
	const uint64_t *npcs;
	struct kvb_obj *o;

	memset(want, 0, sizeof(want));
	fill(want + 6 * PS, PS, 51);
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "pool", 4, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, want, sizeof(want), 0), (ssize_t)sizeof(want));
	commit(o, &c, &csum);
	kvb_obj_close(&kvb, o);
	for (p = 0; p < 8; p++)
		pcs[p] = XXH3_64bits(want + p * PS, PS);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "pool", 4, &o), 0);
	ck_assert_uint_eq(kvb_obj_sums_wanted(&kvb, o), 0); /* nothing written yet */
	put(o, 100, 3 * PS + 5, 52); /* copy-on-write: page 3 is copied before the write */
	fill(want + 3 * PS + 5, 100, 52);
	ck_assert_uint_eq(kvb_obj_sums_wanted(&kvb, o), 8);
	kvb_obj_sums_known(&kvb, o, &c, pcs, 8);
	faults.copy_bytes = 0;
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &n, &csum, &npcs), 0);
	/* Page 6 only is copied at the commit; the six others of zeros are zeroed. */
	ck_assert_uint_eq(faults.copy_bytes, PS);
	ck_assert(n.bucket != c.bucket || n.page != c.page);
	check_pcs(npcs, want, sizeof(want));
	ck_assert_uint_eq(csum, kvb_pages_sum_buf(want, sizeof(want), PS));
	kvb_obj_commit_done(&kvb, o, 1);
	expect(&n, want, sizeof(want));
	kvb_obj_close(&kvb, o);
	settle();
}
END_TEST

/*
 * The spare again, after the writer changed its committed version in place
 * since that commit: bytes appended into c's last page (and the zeros
 * before them), or a shrink and regrowth, are not in the spare and must
 * come from the working run.  t-io's random operations found the append.
 */
START_TEST(test_spare_reuse_after_in_place_change)
{
	static char want[8 * PS];
	struct kvb_map c0, c1, c2, c3;
	const uint64_t *pcs;
	struct kvb_obj *o;
	size_t size = 7 * PS + 100;
	uint64_t csum;

	c0 = make("inplace", size, 41);
	fill(want, size, 41);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c0, "inplace", 7, &o), 0);
	put(o, 100, PS + 7, 42); /* copy-on-write: c0's run becomes the spare */
	fill(want + PS + 7, 100, 42);
	commit(o, &c1, &csum);
	put(o, 1, 7 * PS + 500, 43); /* past c1's end, inside its last page: in place */
	memset(want + size, 0, 400);
	fill(want + 7 * PS + 500, 1, 43);
	size = 7 * PS + 501;
	put(o, PS, 3 * PS, 44); /* into c1's bytes: the spare is the new run */
	fill(want + 3 * PS, PS, 44);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &c2, &csum, &pcs), 0);
	ck_assert_uint_eq(c2.bucket, c0.bucket);
	ck_assert_uint_eq(c2.page, c0.page);
	ck_assert_uint_eq(csum, kvb_pages_sum_buf(want, size, PS));
	check_pcs(pcs, want, size);
	kvb_obj_commit_done(&kvb, o, 1);
	settle();
	expect(&c2, want, size);
	/* A shrink into page 6 and a regrowth: its tail is zeros, not the spare's bytes. */
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, 6 * PS + 10), 0);
	ck_assert_int_eq(kvb_obj_truncate(&kvb, o, size), 0);
	memset(want + 6 * PS + 10, 0, size - (6 * PS + 10));
	put(o, 10, 2 * PS, 45);
	fill(want + 2 * PS, 10, 45);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &c3, &csum, &pcs), 0);
	ck_assert_uint_eq(csum, XXH3_64bits(want, size));
	check_pcs(pcs, want, size);
	kvb_obj_commit_done(&kvb, o, 1);
	settle();
	expect(&c3, want, size);
	kvb_obj_close(&kvb, o);
	settle();
}
END_TEST

/*
 * A closing writer's spare run is kept for the object (an mmap stressor
 * opens, writes and closes again): the next writer finds it; it counts as
 * free, and goes when the object does.
 */
START_TEST(test_spare_run_parked_across_opens)
{
	static char want[4 * PS];
	struct kvb_map c0, c1, c2;
	struct kvb_obj *o;
	uint64_t csum, all;

	all = free_pages();
	c0 = make("park", sizeof(want), 51);
	fill(want, sizeof(want), 51);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c0, "park", 4, &o), 0);
	put(o, PS, 3 * PS, 52);
	fill(want + 3 * PS, PS, 52);
	commit(o, &c1, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(free_pages(), all - 4);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c1, "park", 4, &o), 0);
	faults.copies = 0;
	put(o, PS, PS, 53);
	fill(want + PS, PS, 53);
	commit(o, &c2, &csum);
	kvb_obj_close(&kvb, o);
	/* c0's run again, stale in page 3 only: one copy (a fresh run: pages 0 and 2-3). */
	ck_assert_uint_eq(c2.bucket, c0.bucket);
	ck_assert_uint_eq(c2.page, c0.page);
	ck_assert_uint_eq(faults.copies, 1);
	expect(&c2, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
	/* The object goes, its parked spare with it. */
	ck_assert_int_eq(kvb_remove(&kvb, &c2), 0);
	settle();
	ck_assert_uint_eq(free_pages(), all);
	/* A new object in the same run finds no spare of the old one's. */
	c0 = make("park", sizeof(want), 54);
	fill(want, sizeof(want), 54);
	ck_assert_uint_eq(c0.bucket, c2.bucket);
	ck_assert_uint_eq(c0.page, c2.page);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c0, "park", 4, &o), 0);
	put(o, PS, PS, 55);
	fill(want + PS, PS, 55);
	commit(o, &c1, &csum);
	kvb_obj_close(&kvb, o);
	expect(&c1, want, sizeof(want));
	ck_assert_int_eq(kvb_remove(&kvb, &c1), 0);
	settle();
	{
		struct kvb_map empty = KVB_MAP_EMPTY;
		uint64_t n = all;
		struct kvb_obj *b;

		/* Every page can be allocated: no spare is left holding any. */
		ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "big", 3, &b), 0);
		while (n > 0 && kvb_obj_reserve(&kvb, b, n * PS) != 0)
			n--;
		ck_assert_uint_eq(n, all / 2); /* two buckets, one run */
		kvb_obj_close(&kvb, b);
	}
}
END_TEST

/*
 * An open writer's spare run stands between no allocation and the disk: a
 * copy-on-write short of room gives it up (here not yet reusable: freed at
 * the next barrier), so the barrier the store then runs releases pages and
 * the write goes through on its retry (ofs_store_reclaim retries only then).
 */
START_TEST(test_open_writer_spare_given_up_for_room)
{
	static char want[40 * PS];
	struct kvb_map c0, c1, c2;
	const uint64_t *pcs;
	struct kvb_obj *o;
	char buf[10];
	uint64_t csum;

	c0 = make("room", sizeof(want), 71);
	fill(want, sizeof(want), 71);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c0, "room", 4, &o), 0);
	put(o, 10, 0, 72);
	fill(want, 10, 72);
	/* Committed, no barrier yet: c0's run is the spare, not reusable. */
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &c1, &csum, &pcs), 0);
	kvb_obj_commit_done(&kvb, o, 1);
	ck_assert_int_ne(c1.bucket, c0.bucket); /* 40 pages each: one per bucket */
	fill(buf, sizeof(buf), 73);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, sizeof(buf), PS), -ENOSPC);
	/* The store's reclaim: a barrier; it retries the write if pages came back. */
	ck_assert_uint_gt(settle(), 0);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, buf, sizeof(buf), PS), (ssize_t)sizeof(buf));
	memcpy(want + PS, buf, sizeof(buf));
	commit(o, &c2, &csum);
	kvb_obj_close(&kvb, o);
	expect(&c2, want, sizeof(want));
	ck_assert_uint_eq(csum, XXH3_64bits(want, sizeof(want)));
}
END_TEST

/*
 * Another object's open writer keeps a spare run: short of room, a writer
 * gets it given up too (here not yet reusable: the barrier the store then
 * runs releases it), and statfs counts it free as it counts parked ones.
 */
START_TEST(test_other_writers_spare_given_up_for_room)
{
	struct kvb_map a0, a1, b1, empty = KVB_MAP_EMPTY;
	struct kvb_obj *a, *b;
	const uint64_t *pcs;
	uint64_t csum, all = free_pages();

	a0 = make("a", 40 * PS, 101);
	ck_assert_int_eq(kvb_obj_open(&kvb, &a0, "a", 1, &a), 0);
	put(a, 10, 0, 102);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, a, 0, &a1, &csum, &pcs), 0);
	kvb_obj_commit_done(&kvb, a, 1);
	ck_assert_int_ne(a1.bucket, a0.bucket);
	ck_assert_uint_eq(free_pages(), all - 40); /* the spare counts free */
	/* 40 pages: no bucket has them but the one a's spare holds. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "b", 1, &b), 0);
	ck_assert_int_eq(kvb_obj_reserve(&kvb, b, 40 * PS), -ENOSPC);
	ck_assert_uint_gt(settle(), 0);
	ck_assert_int_eq(kvb_obj_reserve(&kvb, b, 40 * PS), 0);
	put(b, 40 * PS, 0, 103);
	commit(b, &b1, &csum);
	kvb_obj_close(&kvb, b);
	/* a closes with no spare to park: it went to b. */
	kvb_obj_close(&kvb, a);
	ck_assert_uint_eq(b1.npages, 40);
	ck_assert_uint_eq(free_pages(), all - 80);
}
END_TEST

/*
 * A parked spare right past a growing run: short of room, the spare is
 * given up and the run grows into its pages, in place, as it would have
 * once a barrier freed that old version without the spare.
 */
START_TEST(test_parked_spare_given_up_for_growth_in_place)
{
	static char want[8 * PS];
	struct kvb_map f, g, g1, x, y, f1;
	struct kvb_obj *o;
	uint64_t csum;

	f = make("f", 4 * PS, 81);
	fill(want, 4 * PS, 81);
	g = make("f", 4 * PS, 82);
	ck_assert_int_eq(g.bucket, f.bucket);
	ck_assert_uint_eq(g.page, f.page + 4);
	/* g rewritten: a fresh run past it, g's old run parked at close. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &g, "f", 1, &o), 0);
	put(o, 10, 0, 83);
	commit(o, &g1, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_int_eq(g1.bucket, f.bucket);
	ck_assert_uint_eq(g1.page, f.page + 8);
	/* Every other page taken. */
	x = make("x", 64 * PS, 84);
	ck_assert_int_ne(x.bucket, f.bucket);
	y = make("f", (64 - 12) * PS, 85);
	ck_assert_int_eq(y.bucket, f.bucket);
	ck_assert_uint_eq(free_pages(), 4); /* the parked spare, counted free */
	/* f grows by the spare's 4 pages: only in place can it. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &f, "f", 1, &o), 0);
	fill(want + 4 * PS, 4 * PS, 86);
	ck_assert_int_eq(kvb_obj_write(&kvb, o, want + 4 * PS, 4 * PS, 4 * PS), 4 * PS);
	commit(o, &f1, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_int_eq(f1.bucket, f.bucket);
	ck_assert_uint_eq(f1.page, f.page);
	expect(&f1, want, sizeof(want));
	ck_assert_uint_eq(free_pages(), 0);
}
END_TEST

/*
 * A large write into a spare run being written again (a writer that
 * syncs, as an msync loop does) asks for its write-out at once; a write
 * into a fresh run, or a small one, does not.
 */
START_TEST(test_rewrite_starts_writeback)
{
	static char want[64 * PS];
	struct kvb_map c0, c1, c2;
	struct kvb_obj *o;
	uint64_t csum;

	c0 = make("wb", sizeof(want), 61); /* a whole bucket: the rewrites take the other */
	ck_assert_int_eq(kvb_obj_open(&kvb, &c0, "wb", 2, &o), 0);
	faults.writebacks = 0;
	put(o, sizeof(want), 0, 62);
	ck_assert_uint_eq(faults.writebacks, 0); /* a fresh run */
	commit(o, &c1, &csum);
	put(o, sizeof(want), 0, 63);
	fill(want, sizeof(want), 63);
	ck_assert_uint_eq(faults.writebacks, 1); /* c0's run again */
	ck_assert_uint_eq(faults.writeback_bytes, sizeof(want));
	put(o, PS, 0, 64);
	fill(want, PS, 64);
	ck_assert_uint_eq(faults.writebacks, 1);
	commit(o, &c2, &csum);
	kvb_obj_close(&kvb, o);
	ck_assert_uint_eq(c2.bucket, c0.bucket);
	ck_assert_uint_eq(c2.page, c0.page);
	expect(&c2, want, sizeof(want));
	ck_assert_uint_eq(csum, kvb_pages_sum_buf(want, sizeof(want), PS));
}
END_TEST

/* Kept page sums: an append changes the last page's, past the old size too. */
START_TEST(test_kept_sums_after_append)
{
	static char want[4 * PS];
	size_t len = 3 * PS + PS / 2;
	struct kvb_map c, n;
	const uint64_t *pcs;
	struct kvb_obj *o;
	uint64_t csum;

	c = make("sums", len, 41);
	fill(want, len, 41);
	ck_assert_int_eq(kvb_obj_open(&kvb, &c, "sums", 4, &o), 0);
	put(o, 1, 0, 42);
	fill(want, 1, 42);
	commit(o, &n, &csum);
	put(o, 10, PS + 3, 43);
	fill(want + PS + 3, 10, 43);
	put(o, 100, len, 44);
	fill(want + len, 100, 44);
	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, &n, &csum, &pcs), 0);
	check_pcs(pcs, want, len + 100);
	ck_assert_uint_eq(csum, kvb_pages_sum_buf(want, len + 100, PS));
	kvb_obj_commit_done(&kvb, o, 1);
	kvb_obj_close(&kvb, o);
	settle();
	expect(&n, want, len + 100);
}
END_TEST

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

/* Commit o into *map, asserting the whole and per-page checksums of want (its len bytes). */
static void commit_check(struct kvb_obj *o, struct kvb_map *map, const char *want, size_t len)
{
	const uint64_t *pcs;
	uint64_t csum, p;

	ck_assert_int_eq(kvb_obj_commit_prepare(&kvb, o, 0, map, &csum, &pcs), 0);
	ck_assert_uint_eq(map->size, len);
	/* Either kind (kvb_hash.h): the bytes' sum, or that of the page sums after a change in place. */
	ck_assert(kvb_csum_matches(want, len, PS, csum));
	for (p = 0; p < map->npages; p++)
		ck_assert_uint_eq(pcs[p], XXH3_64bits(want + p * PS,
						      len - p * PS < PS ? len - p * PS : PS));
	kvb_obj_commit_done(&kvb, o, 1);
	settle();
	expect(map, want, len);
}

void copy_checks(void)
{
	struct kvb_map a, empty = KVB_MAP_EMPTY, n, view;
	struct kvb_obj *o, *w;
	static char src[3 * PS + 7], want[4 * PS];
	struct kvb_stats st;
	uint64_t before = free_pages();

	a = make("src", sizeof(src), 21);
	fill(src, sizeof(src), 21);
	/* Over bytes a sequential write has summed already: the commit re-reads them. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &empty, "dst", 3, &o), 0);
	put(o, 3 * PS + 12, 0, 22);
	fill(want, 3 * PS + 12, 22);
	ck_assert_int_eq(kvb_obj_copy(&kvb, o, &a, 100, 2 * PS + 5, PS - 3), 2 * PS + 5);
	memcpy(want + PS - 3, src + 100, 2 * PS + 5);
	commit_check(o, &n, want, 3 * PS + 12);
	/* At the running sum's end, then a write after it: still right. */
	put(o, PS, 0, 24);
	fill(want, PS, 24);
	ck_assert_int_eq(kvb_obj_copy(&kvb, o, &a, 0, 10, PS), 10);
	memcpy(want + PS, src, 10);
	put(o, 2, PS + 10, 25);
	fill(want + PS + 10, 2, 25);
	commit_check(o, &n, want, 3 * PS + 12);
	kvb_obj_close(&kvb, o);
	/* A range past the source's end is the caller's error. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &n, "dst", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_copy(&kvb, o, &a, sizeof(src) - 1, 2, 0), -EINVAL);
	/* Into a committed object (copy-on-write) from another writer's settled view. */
	ck_assert_int_eq(kvb_obj_open(&kvb, &a, "src", 3, &w), 0);
	put(w, 50, 10, 23);
	fill(src + 10, 50, 23);
	ck_assert_int_eq(kvb_obj_settle(&kvb, w, 0, 300), 0);
	kvb_obj_view(&kvb, w, &view);
	ck_assert_int_eq(kvb_obj_copy(&kvb, o, &view, 0, 300, PS), 300);
	memcpy(want + PS, src, 300);
	commit_check(o, &n, want, 3 * PS + 12);
	kvb_obj_close(&kvb, o);
	kvb_obj_close(&kvb, w);
	fill(src, sizeof(src), 21);
	expect(&a, src, sizeof(src)); /* the source's committed bytes are as they were */
	kvb_stats(&kvb, &st);
	/* Both devices copy inside the storage: the three copies, and the copy-on-write fills. */
	ck_assert_uint_ge(st.calls[KVB_CALL_COPY], 3);
	ck_assert_uint_eq(st.errors[KVB_CALL_COPY], 0);
	ck_assert_int_eq(kvb_remove(&kvb, &a), 0);
	ck_assert_int_eq(kvb_remove(&kvb, &n), 0);
	settle();
	ck_assert_uint_eq(free_pages(), before);
}

/* Copies between objects through memory (these buckets cannot copy by themselves). */
START_TEST(test_copy_range)
{
	copy_checks();
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

START_TEST(test_describe)
{
	struct kvb_map m = { .bucket = 1, .page = 3, .npages = 1, .size = 10 };
	char buf[256];

	ck_assert_int_gt(kvb_describe(&kvb, &m, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "file_path=/bucket_01.data\noffset=12288\nobject_size=10\n");
	ck_assert_int_eq(kvb_describe(&kvb, &m, buf, 10), -ERANGE);
}
END_TEST

static Suite *pages_suite(void)
{
	Suite *s = suite_create("pages");
	TCase *mem = tcase_create("mem");

	tcase_add_checked_fixture(mem, mem_setup, mem_teardown);
	tcase_add_test(mem, test_home_bucket);
	tcase_add_test(mem, test_write_commit_read);
	tcase_add_test(mem, test_reserve_batch_no_room);
	tcase_add_test(mem, test_random_writes_checksum);
	tcase_add_test(mem, test_hole_reads_zeros);
	tcase_add_test(mem, test_extend_in_place_then_move);
	tcase_add_test(mem, test_copy_on_write);
	tcase_add_test(mem, test_lazy_copy_on_write);
	tcase_add_test(mem, test_copy_range);
	tcase_add_test(mem, test_copy_inside_storage_and_fallback);
	tcase_add_test(mem, test_spare_run_reused_after_barrier);
	tcase_add_test(mem, test_fill_zeros_not_copied);
	tcase_add_test(mem, test_spare_reuse_after_in_place_change);
	tcase_add_test(mem, test_kept_sums_after_append);
	tcase_add_test(mem, test_spare_run_parked_across_opens);
	tcase_add_test(mem, test_rewrite_starts_writeback);
	tcase_add_test(mem, test_open_writer_spare_given_up_for_room);
	tcase_add_test(mem, test_parked_spare_given_up_for_growth_in_place);
	tcase_add_test(mem, test_other_writers_spare_given_up_for_room);
	tcase_add_test(mem, test_abandoned_write_frees_pages);
	tcase_add_test(mem, test_truncate);
	tcase_add_test(mem, test_efbig_enospc_spill);
	tcase_add_test(mem, test_failed_write_leaks_nothing);
	tcase_add_test(mem, test_failed_commit_keeps_old);
	tcase_add_test(mem, test_describe);
	pages_add_durable(mem);
	suite_add_tcase(s, mem);

	suite_add_tcase(s, pages_tcase_files());
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
