/*
 * test_alloc_random.c: unit tests for alloc/: randomized runs against a
 * byte-per-page model.
 */
#include "test_alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- randomized against a reference model ----------------------------- */

struct model {
	uint8_t *bit; /* one byte per page, 1 = allocated */
	uint64_t npages, used, hint;
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: fixed seed, same sequence everywhere. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t rng_below(uint64_t n)
{
	return rng() % n;
}

/* First run of count free pages inside [from, to), or UINT64_MAX. */
static uint64_t model_find(const struct model *m, uint64_t from, uint64_t to,
			   uint64_t count)
{
	uint64_t run = 0;

	for (uint64_t p = from; p < to; p++) {
		run = m->bit[p] ? 0 : run + 1;
		if (run == count)
			return p + 1 - count;
	}
	return UINT64_MAX;
}

/* The contract spelled out slowly: first fit from the hint, then wrap. */
static uint64_t model_first_fit(const struct model *m, uint64_t count)
{
	uint64_t hint = m->hint < m->npages ? m->hint : 0;
	uint64_t p = model_find(m, hint, m->npages, count);

	if (p == UINT64_MAX) {
		p = model_find(m, 0, m->npages, count);
		if (p != UINT64_MAX && p >= hint)
			p = UINT64_MAX; /* already looked there */
	}
	return p;
}

static int model_all(const struct model *m, uint64_t page, uint64_t count,
		     int v)
{
	for (uint64_t p = page; p < page + count; p++)
		if (m->bit[p] != v)
			return 0;
	return 1;
}

static void model_set(struct model *m, uint64_t page, uint64_t count, int v)
{
	for (uint64_t p = page; p < page + count; p++)
		m->bit[p] = (uint8_t)v;
	if (v)
		m->used += count;
	else
		m->used -= count;
}

static uint64_t model_largest(const struct model *m)
{
	uint64_t best = 0, run = 0;

	for (uint64_t p = 0; p < m->npages; p++) {
		run = m->bit[p] ? 0 : run + 1;
		if (run > best)
			best = run;
	}
	return best;
}

static void model_check(const struct model *m, const struct alloc *a)
{
	for (uint64_t p = 0; p < m->npages; p++)
		if (alloc_test(a, p) != m->bit[p])
			ck_abort_msg("page %llu: alloc %d model %d",
				     (unsigned long long)p, alloc_test(a, p),
				     m->bit[p]);
	ck_assert_uint_eq(a->used, m->used);
	ck_assert_uint_eq(a->hint, m->hint);
	check_invariants(a);
}

struct live {
	uint64_t page, count;
};

static uint64_t random_count(uint64_t npages)
{
	uint64_t r = rng_below(100), n;

	if (r < 55)
		n = 1 + rng_below(4);
	else if (r < 85)
		n = 5 + rng_below(70);
	else
		n = 75 + rng_below(npages / 3 + 1);
	return n > npages ? npages : n;
}

static void random_run(uint64_t npages, uint64_t seed, int nops)
{
	struct alloc a;
	struct model m = { calloc(npages, 1), npages, 0, 0 };
	struct live *live = calloc(npages, sizeof(*live));
	size_t nlive = 0;
	uint64_t enospc = 0, ok_alloc = 0, efault = 0, eexist = 0, ext = 0;

	ck_assert_ptr_nonnull(m.bit);
	ck_assert_ptr_nonnull(live);
	rng_state = seed;
	init_ok(&a, npages);

	for (int op = 0; op < nops; op++) {
		uint64_t r = rng_below(100);

		if (r < 45 || nlive == 0) {
			/* alloc: must pick exactly the model's first fit */
			uint64_t count = random_count(npages);
			uint64_t page = UINT64_MAX;
			uint64_t want = model_first_fit(&m, count);
			int rc = alloc_alloc(&a, count, &page);

			if (want == UINT64_MAX) {
				ck_assert_int_eq(rc, -ENOSPC);
				ck_assert_uint_eq(
					model_find(&m, 0, npages, count),
					UINT64_MAX);
				enospc++;
			} else {
				ck_assert_int_eq(rc, 0);
				ck_assert_uint_eq(page, want);
				ck_assert(model_all(&m, page, count, 0));
				model_set(&m, page, count, 1);
				m.hint = page + count < npages ? page + count
								: 0;
				live[nlive++] = (struct live){ page, count };
				ok_alloc++;
			}
		} else if (r < 80) {
			/* free a live run, sometimes only its head or tail */
			size_t i = rng_below(nlive);
			struct live l = live[i];
			uint64_t page = l.page, count = l.count;

			if (l.count > 1 && rng_below(4) == 0) {
				count = 1 + rng_below(l.count - 1);
				if (rng_below(2)) {
					page = l.page + l.count - count;
					live[i].count -= count;
				} else {
					live[i].page += count;
					live[i].count -= count;
				}
			} else {
				live[i] = live[--nlive];
			}
			ck_assert_int_eq(alloc_free(&a, page, count), 0);
			model_set(&m, page, count, 0);
			if (page < m.hint)
				m.hint = page;
		} else if (r < 87) {
			/* bad free: out of range, or a run with a free page */
			uint64_t page = rng_below(npages + 2);
			uint64_t count = rng_below(9);
			struct snap s = snap_take(&a);
			int rc = alloc_free(&a, page, count);

			if (count == 0 || page >= npages ||
			    count > npages - page) {
				ck_assert_int_eq(rc, -EINVAL);
				snap_same(&s, &a);
			} else if (!model_all(&m, page, count, 1)) {
				ck_assert_int_eq(rc, -EFAULT);
				snap_same(&s, &a);
				efault++;
			} else {
				/* Wholly allocated after all: give it back. */
				free(s.words);
				ck_assert_int_eq(rc, 0);
				ck_assert_int_eq(alloc_mark(&a, page, count),
						 0);
				if (page < m.hint)
					m.hint = page;
			}
		} else if (r < 93) {
			/* mark: fine on free pages, -EEXIST on any overlap */
			uint64_t page = rng_below(npages);
			uint64_t count = 1 + rng_below(16);

			if (count > npages - page)
				count = npages - page;
			struct snap s = snap_take(&a);
			int rc = alloc_mark(&a, page, count);

			if (model_all(&m, page, count, 0)) {
				free(s.words);
				ck_assert_int_eq(rc, 0);
				model_set(&m, page, count, 1);
				live[nlive++] = (struct live){ page, count };
			} else {
				ck_assert_int_eq(rc, -EEXIST);
				snap_same(&s, &a);
				eexist++;
			}
		} else if (r < 98) {
			/* extend a live run in place */
			size_t i = rng_below(nlive);
			struct live *l = &live[i];
			uint64_t more = 1 + rng_below(16);
			uint64_t end = l->page + l->count;
			struct snap s = snap_take(&a);
			int rc = alloc_extend(&a, l->page, l->count, more);

			if (more > npages - end) {
				ck_assert_int_eq(rc, -EINVAL);
				snap_same(&s, &a);
			} else if (!model_all(&m, end, more, 0)) {
				ck_assert_int_eq(rc, -ENOSPC);
				snap_same(&s, &a);
			} else {
				free(s.words);
				ck_assert_int_eq(rc, 0);
				model_set(&m, end, more, 1);
				l->count += more;
				ext++;
			}
		} else {
			/* read-only queries */
			uint64_t page = rng_below(npages);
			uint64_t count = 1 + rng_below(npages - page);

			ck_assert_int_eq(alloc_test_run(&a, page, count),
					 model_all(&m, page, count, 1));
			ck_assert_uint_eq(alloc_largest_free(&a),
					  model_largest(&m));
		}
		model_check(&m, &a);
	}
	ck_assert_uint_eq(alloc_largest_free(&a), model_largest(&m));

	if (getenv("ALLOC_TEST_STATS"))
		fprintf(stderr, "npages=%llu allocs=%llu enospc=%llu "
			"efault=%llu eexist=%llu extends=%llu\n",
			(unsigned long long)npages, (unsigned long long)ok_alloc,
			(unsigned long long)enospc, (unsigned long long)efault,
			(unsigned long long)eexist, (unsigned long long)ext);

	/* Every path must have been taken for the test to mean anything. */
	ck_assert_uint_gt(ok_alloc, 100);
	ck_assert_uint_gt(enospc, 10);
	ck_assert_uint_gt(efault, 10);
	ck_assert_uint_gt(eexist, 10);
	ck_assert_uint_gt(ext, 10);

	/* Free everything that is left: the bitmap must be empty. */
	while (nlive) {
		struct live l = live[--nlive];

		ck_assert_int_eq(alloc_free(&a, l.page, l.count), 0);
	}
	ck_assert_uint_eq(a.used, 0);
	ck_assert_uint_eq(alloc_largest_free(&a), npages);
	alloc_release(&a);
	free(live);
	free(m.bit);
}

START_TEST(test_random_1000)
{
	random_run(1000, 0x0ff10adf5ULL, 10000);
}
END_TEST

START_TEST(test_random_130)
{
	random_run(130, 0x5eed0130ULL, 10000);
}
END_TEST

START_TEST(test_random_4096)
{
	random_run(4096, 0xb17b17ULL, 10000);
}
END_TEST

/* Randomized runs against the model. */
TCase *tcase_random(void)
{
	TCase *tc = tcase_create("random");

	tcase_set_timeout(tc, 120); /* slow under sanitizers */
	tcase_add_test(tc, test_random_1000);
	tcase_add_test(tc, test_random_130);
	tcase_add_test(tc, test_random_4096);

	return tc;
}
