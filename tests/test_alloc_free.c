/*
 * test_alloc_free.c: unit tests for alloc/ on runs already allocated (free,
 * mark, extend, the range checks, test and test_run) and on the whole map
 * (largest_free, load, equal).
 */
#include "test_alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- free ------------------------------------------------------------- */

START_TEST(test_double_free)
{
	struct alloc a;

	init_ok(&a, 130);
	uint64_t p = alloc_ok(&a, 10);

	ck_assert_int_eq(alloc_free(&a, p, 10), 0);
	ck_assert_uint_eq(a.used, 0);
	alloc_ok(&a, 3);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_free(&a, 3, 7), -EFAULT);
	ck_assert_int_eq(alloc_free(&a, 9, 1), -EFAULT);
	snap_same(&s, &a);
	alloc_release(&a);
}
END_TEST

START_TEST(test_free_never_allocated)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct alloc a;

		init_ok(&a, sizes[i]);
		struct snap s = snap_take(&a);

		ck_assert_int_eq(alloc_free(&a, 0, 1), -EFAULT);
		ck_assert_int_eq(alloc_free(&a, sizes[i] - 1, 1), -EFAULT);
		ck_assert_int_eq(alloc_free(&a, 0, sizes[i]), -EFAULT);
		snap_same(&s, &a);
		alloc_release(&a);
	}
}
END_TEST

/* A run that is only partly allocated is refused as a whole. */
START_TEST(test_free_partial)
{
	struct alloc a;

	init_ok(&a, 200);
	ck_assert_int_eq(alloc_mark(&a, 0, 5), 0);
	ck_assert_int_eq(alloc_mark(&a, 60, 10), 0);
	ck_assert_int_eq(alloc_mark(&a, 71, 60), 0);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_free(&a, 3, 5), -EFAULT);   /* 5-7 free */
	ck_assert_int_eq(alloc_free(&a, 60, 71), -EFAULT); /* hole at 70 */
	ck_assert_int_eq(alloc_free(&a, 59, 3), -EFAULT);  /* 59 free */
	ck_assert_int_eq(alloc_free(&a, 125, 10), -EFAULT);/* tail free */
	snap_same(&s, &a);
	ck_assert_int_eq(alloc_test_run(&a, 3, 2), 1);
	ck_assert_int_eq(alloc_free(&a, 3, 2), 0);
	ck_assert_int_eq(alloc_free(&a, 62, 5), 0); /* part of a run is fine */
	ck_assert_uint_eq(a.used, 3 + 5 + 60);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* ---- range checks ------------------------------------------------------ */

START_TEST(test_out_of_range)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct alloc a;
		uint64_t n = sizes[i];

		init_ok(&a, n);
		ck_assert_int_eq(alloc_mark(&a, 0, n), 0);
		ck_assert_int_eq(alloc_free(&a, n - 1, 1), 0);
		struct snap s = snap_take(&a);

		/* free */
		ck_assert_int_eq(alloc_free(&a, n, 1), -EINVAL);
		ck_assert_int_eq(alloc_free(&a, 0, n + 1), -EINVAL);
		ck_assert_int_eq(alloc_free(&a, 0, 0), -EINVAL);
		ck_assert_int_eq(alloc_free(&a, n - 1, 2), -EINVAL);
		ck_assert_int_eq(alloc_free(&a, UINT64_MAX, 1), -EINVAL);
		ck_assert_int_eq(alloc_free(&a, 1, UINT64_MAX), -EINVAL);
		/* mark */
		ck_assert_int_eq(alloc_mark(&a, n, 1), -EINVAL);
		ck_assert_int_eq(alloc_mark(&a, n - 1, 2), -EINVAL);
		ck_assert_int_eq(alloc_mark(&a, n - 1, 0), -EINVAL);
		ck_assert_int_eq(alloc_mark(&a, UINT64_MAX, 2), -EINVAL);
		/* extend */
		ck_assert_int_eq(alloc_extend(&a, n, 1, 1), -EINVAL);
		ck_assert_int_eq(alloc_extend(&a, 0, 0, 1), -EINVAL);
		ck_assert_int_eq(alloc_extend(&a, 0, n, 1), -EINVAL);
		ck_assert_int_eq(alloc_extend(&a, 0, 1, UINT64_MAX), -EINVAL);
		/* test */
		ck_assert_int_eq(alloc_test(&a, n), -EINVAL);
		ck_assert_int_eq(alloc_test(&a, UINT64_MAX), -EINVAL);
		ck_assert_int_eq(alloc_test_run(&a, 0, 0), -EINVAL);
		ck_assert_int_eq(alloc_test_run(&a, n, 1), -EINVAL);
		ck_assert_int_eq(alloc_test_run(&a, 0, n + 1), -EINVAL);
		ck_assert_int_eq(alloc_test_run(&a, UINT64_MAX, 2), -EINVAL);
		snap_same(&s, &a);
		alloc_release(&a);
	}
}
END_TEST

/* ---- mark ------------------------------------------------------------- */

START_TEST(test_mark)
{
	struct alloc a;

	init_ok(&a, 200);
	ck_assert_int_eq(alloc_mark(&a, 5, 5), 0);
	ck_assert_uint_eq(a.used, 5);
	ck_assert_uint_eq(a.hint, 0); /* marking does not move the hint */
	ck_assert_uint_eq(a.words[0], 0x3e0ULL);
	ck_assert_int_eq(alloc_mark(&a, 60, 80), 0); /* words 0, 1 and 2 */
	ck_assert_uint_eq(a.words[1], ~0ULL);
	ck_assert_uint_eq(a.words[2], 0xfffULL);
	ck_assert_uint_eq(a.used, 85);
	ck_assert_int_eq(alloc_mark(&a, 199, 1), 0);
	ck_assert_uint_eq(a.used, 86);
	check_invariants(&a);
	/* Allocation sees marked pages as taken. */
	ck_assert_uint_eq(alloc_ok(&a, 5), 0);
	ck_assert_uint_eq(alloc_ok(&a, 50), 10);
	ck_assert_uint_eq(alloc_ok(&a, 59), 140);
	alloc_release(&a);
}
END_TEST

START_TEST(test_mark_overlap)
{
	struct alloc a;

	init_ok(&a, 200);
	ck_assert_int_eq(alloc_mark(&a, 5, 5), 0);
	ck_assert_int_eq(alloc_mark(&a, 130, 1), 0);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_mark(&a, 8, 4), -EEXIST);  /* tail overlaps */
	ck_assert_int_eq(alloc_mark(&a, 0, 6), -EEXIST);  /* head overlaps */
	ck_assert_int_eq(alloc_mark(&a, 5, 5), -EEXIST);  /* same run */
	ck_assert_int_eq(alloc_mark(&a, 6, 1), -EEXIST);  /* inside */
	ck_assert_int_eq(alloc_mark(&a, 0, 200), -EEXIST);/* covers all */
	ck_assert_int_eq(alloc_mark(&a, 20, 111), -EEXIST); /* last page */
	snap_same(&s, &a);
	ck_assert_int_eq(alloc_mark(&a, 10, 120), 0); /* exactly between */
	ck_assert_uint_eq(a.used, 126);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* ---- extend ----------------------------------------------------------- */

START_TEST(test_extend)
{
	struct alloc a;

	init_ok(&a, 200);
	ck_assert_uint_eq(alloc_ok(&a, 4), 0);
	ck_assert_int_eq(alloc_extend(&a, 0, 4, 4), 0);
	ck_assert_uint_eq(a.used, 8);
	ck_assert_int_eq(alloc_test_run(&a, 0, 8), 1);
	ck_assert_int_eq(alloc_test(&a, 8), 0);
	/* Across a word boundary. */
	ck_assert_int_eq(alloc_extend(&a, 0, 8, 62), 0);
	ck_assert_uint_eq(a.used, 70);
	ck_assert_int_eq(alloc_test_run(&a, 0, 70), 1);
	/* Extending from the middle of an allocated run is allowed. */
	ck_assert_int_eq(alloc_extend(&a, 60, 10, 2), 0);
	ck_assert_uint_eq(a.used, 72);
	/* Up to exactly the last page. */
	ck_assert_int_eq(alloc_mark(&a, 190, 2), 0);
	ck_assert_int_eq(alloc_extend(&a, 190, 2, 8), 0);
	ck_assert_uint_eq(a.used, 82);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

START_TEST(test_extend_blocked)
{
	struct alloc a;
	uint64_t page;

	init_ok(&a, 200);
	ck_assert_int_eq(alloc_mark(&a, 0, 8), 0);
	ck_assert_int_eq(alloc_mark(&a, 100, 1), 0);
	ck_assert_uint_eq(alloc_ok(&a, 1), 8);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_extend(&a, 0, 8, 1), -ENOSPC);  /* 8 is taken */
	ck_assert_int_eq(alloc_extend(&a, 8, 1, 92), -ENOSPC); /* 100 taken */
	ck_assert_int_eq(alloc_extend(&a, 8, 1, 150), -ENOSPC);
	snap_same(&s, &a);
	ck_assert_int_eq(alloc_extend(&a, 8, 1, 91), 0); /* up to 99 */
	ck_assert_uint_eq(a.used, 101);
	ck_assert_int_eq(alloc_alloc(&a, 100, &page), -ENOSPC);
	ck_assert_uint_eq(alloc_ok(&a, 99), 101);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

START_TEST(test_extend_past_end)
{
	struct alloc a;

	init_ok(&a, 130);
	ck_assert_int_eq(alloc_mark(&a, 120, 5), 0);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_extend(&a, 120, 5, 6), -EINVAL);
	ck_assert_int_eq(alloc_extend(&a, 120, 5, 0), -EINVAL);
	ck_assert_int_eq(alloc_extend(&a, 120, 5, UINT64_MAX - 3), -EINVAL);
	ck_assert_int_eq(alloc_extend(&a, 120, 11, 1), -EINVAL);
	snap_same(&s, &a);
	ck_assert_int_eq(alloc_extend(&a, 120, 5, 5), 0); /* up to the end */
	ck_assert_uint_eq(a.used, 10);
	alloc_release(&a);
}
END_TEST

/* Growing a run that is not wholly allocated is refused like a double free. */
START_TEST(test_extend_unallocated)
{
	struct alloc a;

	init_ok(&a, 130);
	ck_assert_int_eq(alloc_mark(&a, 10, 5), 0);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_extend(&a, 0, 5, 1), -EFAULT);
	ck_assert_int_eq(alloc_extend(&a, 8, 7, 1), -EFAULT);
	snap_same(&s, &a);
	alloc_release(&a);
}
END_TEST

/* ---- test / test_run -------------------------------------------------- */

START_TEST(test_test_bits)
{
	struct alloc a;

	init_ok(&a, 130);
	ck_assert_int_eq(alloc_mark(&a, 62, 4), 0);
	ck_assert_int_eq(alloc_mark(&a, 129, 1), 0);
	ck_assert_int_eq(alloc_test(&a, 61), 0);
	ck_assert_int_eq(alloc_test(&a, 62), 1);
	ck_assert_int_eq(alloc_test(&a, 65), 1);
	ck_assert_int_eq(alloc_test(&a, 66), 0);
	ck_assert_int_eq(alloc_test(&a, 128), 0);
	ck_assert_int_eq(alloc_test(&a, 129), 1);
	ck_assert_int_eq(alloc_test_run(&a, 62, 4), 1);
	ck_assert_int_eq(alloc_test_run(&a, 63, 2), 1);
	ck_assert_int_eq(alloc_test_run(&a, 61, 2), 0);
	ck_assert_int_eq(alloc_test_run(&a, 62, 5), 0);
	ck_assert_int_eq(alloc_test_run(&a, 0, 130), 0);
	ck_assert_int_eq(alloc_test_run(&a, 129, 1), 1);
	ck_assert_int_eq(alloc_test_run(&a, 128, 2), 0);
	alloc_release(&a);
}
END_TEST

/* ---- largest_free ----------------------------------------------------- */

START_TEST(test_largest_free)
{
	struct alloc a;

	init_ok(&a, 1000);
	ck_assert_uint_eq(alloc_largest_free(&a), 1000);
	ck_assert_int_eq(alloc_mark(&a, 500, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 500);
	ck_assert_int_eq(alloc_mark(&a, 0, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 499);
	ck_assert_int_eq(alloc_mark(&a, 250, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 499); /* 501-999 */
	ck_assert_int_eq(alloc_mark(&a, 700, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 299); /* 701-999 */
	ck_assert_int_eq(alloc_mark(&a, 999, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 298); /* 701-998 */
	alloc_release(&a);

	/* A hole inside one word, bounded on both sides. */
	init_ok(&a, 64);
	ck_assert_int_eq(alloc_mark(&a, 0, 64), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 0);
	ck_assert_int_eq(alloc_free(&a, 3, 2), 0);
	ck_assert_int_eq(alloc_free(&a, 10, 7), 0);
	ck_assert_int_eq(alloc_free(&a, 20, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 7);
	ck_assert_int_eq(alloc_free(&a, 60, 4), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 7);
	alloc_release(&a);

	/* Pages past npages (here 63 of them) never count as free. */
	init_ok(&a, 65);
	ck_assert_int_eq(alloc_mark(&a, 0, 64), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 1);
	ck_assert_int_eq(alloc_free(&a, 60, 4), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 5);
	alloc_release(&a);

	init_ok(&a, 1);
	ck_assert_uint_eq(alloc_largest_free(&a), 1);
	alloc_ok(&a, 1);
	ck_assert_uint_eq(alloc_largest_free(&a), 0);
	alloc_release(&a);
}
END_TEST

/* ---- load / equal ----------------------------------------------------- */

START_TEST(test_load_round_trip)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct alloc a, b;
		uint64_t n = sizes[i];

		init_ok(&a, n);
		init_ok(&b, n);
		for (uint64_t p = 0; p < n; p += 3)
			ck_assert_int_eq(alloc_mark(&a, p, 1), 0);
		if ((n - 1) % 3)
			ck_assert_int_eq(alloc_mark(&a, n - 1, 1), 0);
		ck_assert_int_eq(alloc_equal(&a, &b), 0);
		b.hint = 7;
		ck_assert_int_eq(alloc_load(&b, a.words, a.nwords), 0);
		ck_assert_int_eq(alloc_equal(&a, &b), 1);
		ck_assert_uint_eq(b.used, a.used);
		ck_assert_uint_eq(b.hint, 0);
		check_invariants(&b);
		/* The loaded copy allocates exactly like the original. */
		if (a.used < n) {
			uint64_t pa, pb;

			a.hint = 0;
			ck_assert_int_eq(alloc_alloc(&a, 1, &pa), 0);
			ck_assert_int_eq(alloc_alloc(&b, 1, &pb), 0);
			ck_assert_uint_eq(pa, pb);
		}
		alloc_release(&a);
		alloc_release(&b);
	}
}
END_TEST

START_TEST(test_load_full_words)
{
	struct alloc a;
	uint64_t w[2] = { ~0ULL, 0x8000000000000001ULL };

	init_ok(&a, 128); /* no tail: every bit is a page */
	ck_assert_int_eq(alloc_load(&a, w, 2), 0);
	ck_assert_uint_eq(a.used, 66);
	ck_assert_uint_eq(alloc_largest_free(&a), 62);
	check_invariants(&a);
	/* Loading its own words is allowed. */
	ck_assert_int_eq(alloc_load(&a, a.words, a.nwords), 0);
	ck_assert_uint_eq(a.used, 66);
	alloc_release(&a);
}
END_TEST

START_TEST(test_load_rejects)
{
	struct alloc a;
	uint64_t w[4] = { 0x5ULL, 0x1ULL, 0, 0 };

	init_ok(&a, 65);
	ck_assert_int_eq(alloc_mark(&a, 10, 3), 0);
	a.hint = 13;
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_load(&a, w, 1), -EINVAL);
	ck_assert_int_eq(alloc_load(&a, w, 3), -EINVAL);
	ck_assert_int_eq(alloc_load(&a, w, 0), -EINVAL);
	ck_assert_int_eq(alloc_load(&a, NULL, 2), -EINVAL);
	w[1] = 0x2ULL; /* page 65 does not exist */
	ck_assert_int_eq(alloc_load(&a, w, 2), -EINVAL);
	w[1] = 0x8000000000000000ULL;
	ck_assert_int_eq(alloc_load(&a, w, 2), -EINVAL);
	snap_same(&s, &a);
	w[1] = 0x1ULL; /* page 64 is the last real page */
	ck_assert_int_eq(alloc_load(&a, w, 2), 0);
	ck_assert_uint_eq(a.used, 3);
	ck_assert_uint_eq(a.hint, 0);
	alloc_release(&a);

	init_ok(&a, 1);
	w[0] = 0x2ULL;
	ck_assert_int_eq(alloc_load(&a, w, 1), -EINVAL);
	w[0] = 0x1ULL;
	ck_assert_int_eq(alloc_load(&a, w, 1), 0);
	ck_assert_uint_eq(a.used, 1);
	alloc_release(&a);
}
END_TEST

START_TEST(test_equal)
{
	struct alloc a, b, c;

	init_ok(&a, 130);
	init_ok(&b, 130);
	init_ok(&c, 131);
	ck_assert_int_eq(alloc_equal(&a, &b), 1);
	ck_assert_int_eq(alloc_equal(&a, &a), 1);
	ck_assert_int_eq(alloc_equal(&a, &c), 0); /* same nwords, other size */
	ck_assert_int_eq(alloc_mark(&a, 129, 1), 0);
	ck_assert_int_eq(alloc_equal(&a, &b), 0);
	ck_assert_int_eq(alloc_equal(&b, &a), 0);
	ck_assert_int_eq(alloc_mark(&b, 129, 1), 0);
	ck_assert_int_eq(alloc_equal(&a, &b), 1);
	/* The hint is not part of the state that must match. */
	b.hint = 50;
	ck_assert_int_eq(alloc_equal(&a, &b), 1);
	alloc_release(&a);
	alloc_release(&b);
	alloc_release(&c);
}
END_TEST

/* free, the range checks, mark, extend, test. */
TCase *tcase_free_mark_extend(void)
{
	TCase *tc = tcase_create("free_mark_extend");

	tcase_add_test(tc, test_double_free);
	tcase_add_test(tc, test_free_never_allocated);
	tcase_add_test(tc, test_free_partial);
	tcase_add_test(tc, test_out_of_range);
	tcase_add_test(tc, test_mark);
	tcase_add_test(tc, test_mark_overlap);
	tcase_add_test(tc, test_extend);
	tcase_add_test(tc, test_extend_blocked);
	tcase_add_test(tc, test_extend_past_end);
	tcase_add_test(tc, test_extend_unallocated);
	tcase_add_test(tc, test_test_bits);

	return tc;
}

/* largest_free, load, equal. */
TCase *tcase_snapshot(void)
{
	TCase *tc = tcase_create("snapshot");

	tcase_add_test(tc, test_largest_free);
	tcase_add_test(tc, test_load_round_trip);
	tcase_add_test(tc, test_load_full_words);
	tcase_add_test(tc, test_load_rejects);
	tcase_add_test(tc, test_equal);

	return tc;
}
