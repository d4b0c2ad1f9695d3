/*
 * test_pages_durable.c: unit tests for kvbackend/pages/ over in-memory
 * buckets: freed pages wait for a barrier, page checksums and verified reads,
 * and what survives a power cut.
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

#include "test_pages.h"

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

/* The "mem" cases of this file, after test_pages.c's. */
void pages_add_durable(TCase *mem)
{
	tcase_add_test(mem, test_power_cut_keeps_zeroed_growth);
	tcase_add_test(mem, test_freed_pages_wait_for_barrier);
	tcase_add_test(mem, test_page_checksums_and_verified_read);
	tcase_add_test(mem, test_read_hint_covers_the_object);
	tcase_add_test(mem, test_verified_read_stays_in_its_buffer);
	tcase_add_test(mem, test_power_cut_keeps_synced_objects);
}
