/*
 * Unit tests for alloc/: every function, every error path, sizes that are
 * and are not multiples of 64, runs across word boundaries, the hint and
 * its wrap-around, and a randomized run against a byte-per-page model.
 *
 * The cases are in three files: this one (init, alloc), test_alloc_free.c
 * (free, mark, extend, largest_free, load, equal) and test_alloc_random.c.
 */
#include "test_alloc.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * test_init_huge asks calloc for 2^61 bytes; ASan would abort on that
 * instead of returning NULL like libc does.  Unused without ASan.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

const uint64_t sizes[6] = { 1, 63, 64, 65, 130, 1000 };

/* ---- helpers ---------------------------------------------------------- */

void init_ok(struct alloc *a, uint64_t npages)
{
	ck_assert_int_eq(alloc_init(a, npages), 0);
}

uint64_t alloc_ok(struct alloc *a, uint64_t count)
{
	uint64_t page = UINT64_MAX;

	ck_assert_int_eq(alloc_alloc(a, count, &page), 0);
	ck_assert_uint_lt(page, a->npages);
	ck_assert_uint_le(count, a->npages - page);
	return page;
}

struct snap snap_take(const struct alloc *a)
{
	struct snap s = { NULL, a->nwords, a->used, a->hint };

	s.words = malloc(a->nwords * sizeof(uint64_t));
	ck_assert_ptr_nonnull(s.words);
	memcpy(s.words, a->words, a->nwords * sizeof(uint64_t));
	return s;
}

void snap_same(struct snap *s, const struct alloc *a)
{
	ck_assert_uint_eq(s->nwords, a->nwords);
	ck_assert_int_eq(memcmp(s->words, a->words,
				a->nwords * sizeof(uint64_t)), 0);
	ck_assert_uint_eq(s->used, a->used);
	ck_assert_uint_eq(s->hint, a->hint);
	free(s->words);
	s->words = NULL;
}

/* used must equal the number of set bits, and bits past npages stay 0. */
void check_invariants(const struct alloc *a)
{
	uint64_t pop = 0;

	for (uint64_t w = 0; w < a->nwords; w++)
		pop += (uint64_t)__builtin_popcountll(a->words[w]);
	ck_assert_uint_eq(pop, a->used);
	if (a->npages % 64)
		ck_assert_uint_eq(a->words[a->nwords - 1] >> (a->npages % 64),
				  0);
	ck_assert_uint_eq(alloc_used(a) + alloc_free_pages(a), a->npages);
}

/* ---- init / release --------------------------------------------------- */

START_TEST(test_init_sizes)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct alloc a;

		init_ok(&a, sizes[i]);
		ck_assert_uint_eq(a.npages, sizes[i]);
		ck_assert_uint_eq(a.nwords, (sizes[i] + 63) / 64);
		ck_assert_uint_eq(a.used, 0);
		ck_assert_uint_eq(a.hint, 0);
		ck_assert_uint_eq(alloc_free_pages(&a), sizes[i]);
		for (uint64_t w = 0; w < a.nwords; w++)
			ck_assert_uint_eq(a.words[w], 0);
		for (uint64_t p = 0; p < a.npages; p++)
			ck_assert_int_eq(alloc_test(&a, p), 0);
		ck_assert_uint_eq(alloc_largest_free(&a), sizes[i]);
		alloc_release(&a);
	}
}
END_TEST

START_TEST(test_init_zero)
{
	struct alloc a;

	memset(&a, 0xa5, sizeof(a));
	ck_assert_int_eq(alloc_init(&a, 0), -EINVAL);
	ck_assert_ptr_null(a.words);
	ck_assert_uint_eq(a.npages, 0);
	ck_assert_int_eq(alloc_init(NULL, 10), -EINVAL);
}
END_TEST

START_TEST(test_init_huge)
{
	struct alloc a;

	/* Cannot be allocated: must fail cleanly, not overflow nwords. */
	ck_assert_int_eq(alloc_init(&a, UINT64_MAX), -ENOMEM);
	ck_assert_ptr_null(a.words);
	ck_assert_uint_eq(a.npages, 0);
}
END_TEST

START_TEST(test_release_reinit)
{
	struct alloc a, zero;

	memset(&zero, 0, sizeof(zero));
	init_ok(&a, 100);
	alloc_ok(&a, 7);
	alloc_release(&a);
	ck_assert_int_eq(memcmp(&a, &zero, sizeof(a)), 0);
	alloc_release(&a); /* releasing twice is harmless */
	init_ok(&a, 65);
	ck_assert_uint_eq(a.used, 0);
	ck_assert_uint_eq(alloc_ok(&a, 65), 0);
	alloc_release(&a);
}
END_TEST

/* ---- alloc ------------------------------------------------------------ */

START_TEST(test_alloc_invalid)
{
	struct alloc a;
	uint64_t page = 12345;

	init_ok(&a, 130);
	alloc_ok(&a, 3);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_alloc(&a, 0, &page), -EINVAL);
	ck_assert_int_eq(alloc_alloc(&a, 131, &page), -EINVAL);
	ck_assert_int_eq(alloc_alloc(&a, UINT64_MAX, &page), -EINVAL);
	ck_assert_int_eq(alloc_alloc(&a, 1, NULL), -EINVAL);
	ck_assert_uint_eq(page, 12345);
	snap_same(&s, &a);
	alloc_release(&a);
}
END_TEST

/* Allocate one page at a time until full: pages come out in order. */
START_TEST(test_exact_fill_single)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct alloc a;
		uint64_t page;

		init_ok(&a, sizes[i]);
		for (uint64_t p = 0; p < sizes[i]; p++)
			ck_assert_uint_eq(alloc_ok(&a, 1), p);
		ck_assert_uint_eq(alloc_used(&a), sizes[i]);
		ck_assert_uint_eq(alloc_free_pages(&a), 0);
		ck_assert_uint_eq(alloc_largest_free(&a), 0);
		check_invariants(&a);

		struct snap s = snap_take(&a);

		ck_assert_int_eq(alloc_alloc(&a, 1, &page), -ENOSPC);
		snap_same(&s, &a);
		alloc_release(&a);
	}
}
END_TEST

/* One run of exactly npages, then nothing fits. */
START_TEST(test_exact_fill_whole)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct alloc a;
		uint64_t page;

		init_ok(&a, sizes[i]);
		ck_assert_uint_eq(alloc_ok(&a, sizes[i]), 0);
		ck_assert_uint_eq(a.used, sizes[i]);
		ck_assert_uint_eq(a.hint, 0); /* ran to the end: hint wraps */
		ck_assert_int_eq(alloc_test_run(&a, 0, sizes[i]), 1);
		check_invariants(&a);
		ck_assert_int_eq(alloc_alloc(&a, 1, &page), -ENOSPC);
		ck_assert_uint_eq(a.used, sizes[i]);
		alloc_release(&a);
	}
}
END_TEST

/* Mixed run lengths that tile npages exactly. */
START_TEST(test_exact_fill_mixed)
{
	struct alloc a;
	uint64_t page, total = 0;
	static const uint64_t lens[] = { 10, 64, 65, 1, 128, 200, 3, 63 };

	init_ok(&a, 1000);
	for (size_t i = 0; total < 1000; i++) {
		uint64_t n = lens[i % 8];

		if (n > 1000 - total)
			n = 1000 - total;
		ck_assert_uint_eq(alloc_ok(&a, n), total);
		total += n;
	}
	ck_assert_uint_eq(a.used, 1000);
	check_invariants(&a);
	ck_assert_int_eq(alloc_alloc(&a, 1, &page), -ENOSPC);
	alloc_release(&a);
}
END_TEST

START_TEST(test_alloc_cross_word_10_at_60)
{
	struct alloc a;

	init_ok(&a, 200);
	ck_assert_int_eq(alloc_mark(&a, 0, 60), 0);
	ck_assert_uint_eq(alloc_ok(&a, 10), 60);
	ck_assert_uint_eq(a.words[0], ~0ULL);
	ck_assert_uint_eq(a.words[1], 0x3fULL);
	ck_assert_uint_eq(a.hint, 70);
	ck_assert_uint_eq(a.used, 70);
	ck_assert_int_eq(alloc_test(&a, 69), 1);
	ck_assert_int_eq(alloc_test(&a, 70), 0);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* Long runs: count 64, 65, 128, 200 from unaligned starting points. */
START_TEST(test_alloc_long_runs)
{
	static const uint64_t lens[] = { 64, 65, 128, 200 };

	for (size_t i = 0; i < 4; i++) {
		for (uint64_t start = 0; start < 70; start += 3) {
			struct alloc a;
			uint64_t n = lens[i];

			init_ok(&a, 1000);
			if (start)
				ck_assert_int_eq(alloc_mark(&a, 0, start), 0);
			ck_assert_uint_eq(alloc_ok(&a, n), start);
			ck_assert_int_eq(alloc_test_run(&a, start, n), 1);
			if (start)
				ck_assert_int_eq(alloc_test(&a, start - 1), 1);
			ck_assert_int_eq(alloc_test(&a, start + n), 0);
			ck_assert_uint_eq(a.used, start + n);
			ck_assert_uint_eq(a.hint, start + n);
			check_invariants(&a);
			alloc_release(&a);
		}
	}
}
END_TEST

/* A long run must skip holes that are too short, even across words. */
START_TEST(test_alloc_skips_short_holes)
{
	struct alloc a;

	init_ok(&a, 1000);
	ck_assert_int_eq(alloc_mark(&a, 0, 1000), 0);
	ck_assert_int_eq(alloc_free(&a, 10, 30), 0);   /* 30 in one word */
	ck_assert_int_eq(alloc_free(&a, 100, 60), 0);  /* 60 across words 1-2 */
	ck_assert_int_eq(alloc_free(&a, 300, 127), 0); /* 127 across 3 words */
	ck_assert_int_eq(alloc_free(&a, 500, 129), 0); /* 129 */
	a.hint = 0;
	ck_assert_uint_eq(alloc_ok(&a, 129), 500);
	ck_assert_uint_eq(alloc_ok(&a, 61), 300);
	ck_assert_uint_eq(alloc_ok(&a, 31), 361);
	ck_assert_uint_eq(alloc_ok(&a, 35), 392); /* only 35 left at 392..426 */
	ck_assert_uint_eq(alloc_ok(&a, 31), 100);
	ck_assert_uint_eq(alloc_ok(&a, 30), 10);
	ck_assert_uint_eq(alloc_largest_free(&a), 29);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* A full word between two free ends breaks the run: it must not carry. */
START_TEST(test_full_word_breaks_run)
{
	struct alloc a;
	uint64_t page;

	init_ok(&a, 256);
	ck_assert_int_eq(alloc_mark(&a, 0, 256), 0);
	ck_assert_int_eq(alloc_free(&a, 60, 4), 0);  /* top of word 0 */
	ck_assert_int_eq(alloc_free(&a, 128, 4), 0); /* bottom of word 2 */
	a.hint = 0;
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_alloc(&a, 5, &page), -ENOSPC);
	ck_assert_int_eq(alloc_alloc(&a, 8, &page), -ENOSPC);
	ck_assert_int_eq(alloc_alloc(&a, 70, &page), -ENOSPC);
	snap_same(&s, &a);
	ck_assert_uint_eq(alloc_largest_free(&a), 4);
	/* The same with an empty word in between does join up. */
	ck_assert_int_eq(alloc_free(&a, 64, 64), 0);
	a.hint = 0;
	ck_assert_uint_eq(alloc_largest_free(&a), 72);
	ck_assert_uint_eq(alloc_ok(&a, 72), 60);
	alloc_release(&a);
}
END_TEST

START_TEST(test_alloc_reuse_after_free)
{
	struct alloc a;
	uint64_t page;

	init_ok(&a, 1000);
	ck_assert_uint_eq(alloc_ok(&a, 1000), 0);
	ck_assert_uint_eq(a.hint, 0); /* the run ended at npages */
	ck_assert_int_eq(alloc_free(&a, 100, 5), 0);
	ck_assert_uint_eq(a.hint, 0); /* 100 is not before the hint */
	ck_assert_int_eq(alloc_alloc(&a, 6, &page), -ENOSPC);
	ck_assert_uint_eq(alloc_ok(&a, 5), 100);
	ck_assert_int_eq(alloc_alloc(&a, 1, &page), -ENOSPC);
	ck_assert_uint_eq(a.used, 1000);

	/* Free a run across a word boundary and get the same pages back. */
	ck_assert_int_eq(alloc_free(&a, 60, 70), 0);
	ck_assert_uint_eq(alloc_ok(&a, 70), 60);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

START_TEST(test_hint_moves)
{
	struct alloc a;

	init_ok(&a, 130);
	ck_assert_uint_eq(alloc_ok(&a, 10), 0);
	ck_assert_uint_eq(a.hint, 10);
	ck_assert_uint_eq(alloc_ok(&a, 10), 10);
	ck_assert_uint_eq(a.hint, 20);
	/* Freeing after the hint leaves it alone. */
	ck_assert_uint_eq(alloc_ok(&a, 50), 20);
	ck_assert_uint_eq(a.hint, 70);
	ck_assert_int_eq(alloc_mark(&a, 100, 5), 0);
	ck_assert_uint_eq(a.hint, 70);
	ck_assert_int_eq(alloc_free(&a, 100, 5), 0);
	ck_assert_uint_eq(a.hint, 70);
	/* Freeing before it moves the hint back to the freed page. */
	ck_assert_int_eq(alloc_free(&a, 10, 10), 0);
	ck_assert_uint_eq(a.hint, 10);
	ck_assert_int_eq(alloc_free(&a, 40, 10), 0);
	ck_assert_uint_eq(a.hint, 10);
	ck_assert_uint_eq(alloc_ok(&a, 10), 10);
	ck_assert_uint_eq(alloc_ok(&a, 10), 40);
	/* A run ending at npages wraps the hint to 0. */
	ck_assert_uint_eq(alloc_ok(&a, 60), 70);
	ck_assert_uint_eq(a.hint, 0);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* Hint near the end, free space only at the beginning. */
START_TEST(test_wrap_around)
{
	struct alloc a;

	init_ok(&a, 130);
	ck_assert_int_eq(alloc_mark(&a, 10, 120), 0);
	a.hint = 125;
	ck_assert_uint_eq(alloc_ok(&a, 5), 0);
	ck_assert_uint_eq(a.hint, 5);
	ck_assert_uint_eq(alloc_ok(&a, 5), 5);
	uint64_t page;

	ck_assert_int_eq(alloc_alloc(&a, 1, &page), -ENOSPC);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* Free pages at both ends do not join into one run across the wrap. */
START_TEST(test_no_run_across_wrap)
{
	struct alloc a;
	uint64_t page;

	init_ok(&a, 130);
	ck_assert_int_eq(alloc_mark(&a, 4, 122), 0); /* free: 0-3, 126-129 */
	a.hint = 127;
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_alloc(&a, 8, &page), -ENOSPC);
	ck_assert_int_eq(alloc_alloc(&a, 5, &page), -ENOSPC);
	snap_same(&s, &a);
	ck_assert_uint_eq(alloc_largest_free(&a), 4);
	/* From 127 only 3 pages remain; 4 wraps to page 0. */
	ck_assert_uint_eq(alloc_ok(&a, 4), 0);
	ck_assert_uint_eq(alloc_ok(&a, 4), 126);
	ck_assert_uint_eq(a.hint, 0);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* The second pass finds a run that starts before the hint and covers it. */
START_TEST(test_wrap_run_spans_hint)
{
	struct alloc a;

	init_ok(&a, 1000);
	ck_assert_int_eq(alloc_mark(&a, 0, 1000), 0);
	ck_assert_int_eq(alloc_free(&a, 60, 70), 0); /* free: 60-129 */
	a.hint = 100;
	ck_assert_uint_eq(alloc_ok(&a, 70), 60);
	ck_assert_uint_eq(a.hint, 130);
	ck_assert_int_eq(alloc_free(&a, 60, 70), 0);
	a.hint = 129; /* only page 129 is free from here on */
	ck_assert_uint_eq(alloc_ok(&a, 2), 60);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* The hint itself may be past npages if a caller set it so; treat as 0. */
START_TEST(test_hint_out_of_range)
{
	struct alloc a;

	init_ok(&a, 65);
	a.hint = 1000;
	ck_assert_uint_eq(alloc_ok(&a, 3), 0);
	ck_assert_uint_eq(a.hint, 3);
	alloc_release(&a);
}
END_TEST

/* Alternate allocated and free pages: no run of 2, yet every 1 fits. */
START_TEST(test_fragmentation)
{
	struct alloc a;
	uint64_t page;

	init_ok(&a, 1000);
	for (uint64_t p = 0; p < 1000; p += 2)
		ck_assert_int_eq(alloc_mark(&a, p, 1), 0);
	ck_assert_uint_eq(alloc_largest_free(&a), 1);
	struct snap s = snap_take(&a);

	ck_assert_int_eq(alloc_alloc(&a, 2, &page), -ENOSPC);
	ck_assert_int_eq(alloc_alloc(&a, 64, &page), -ENOSPC);
	snap_same(&s, &a);
	for (uint64_t p = 1; p < 1000; p += 2)
		ck_assert_uint_eq(alloc_ok(&a, 1), p);
	ck_assert_int_eq(alloc_alloc(&a, 1, &page), -ENOSPC);
	ck_assert_uint_eq(a.used, 1000);
	check_invariants(&a);
	alloc_release(&a);
}
END_TEST

/* ---- runner ----------------------------------------------------------- */

static Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc;

	tc = tcase_create("init");
	tcase_add_test(tc, test_init_sizes);
	tcase_add_test(tc, test_init_zero);
	tcase_add_test(tc, test_init_huge);
	tcase_add_test(tc, test_release_reinit);
	suite_add_tcase(s, tc);

	tc = tcase_create("alloc");
	tcase_add_test(tc, test_alloc_invalid);
	tcase_add_test(tc, test_exact_fill_single);
	tcase_add_test(tc, test_exact_fill_whole);
	tcase_add_test(tc, test_exact_fill_mixed);
	tcase_add_test(tc, test_alloc_cross_word_10_at_60);
	tcase_add_test(tc, test_alloc_long_runs);
	tcase_add_test(tc, test_alloc_skips_short_holes);
	tcase_add_test(tc, test_full_word_breaks_run);
	tcase_add_test(tc, test_alloc_reuse_after_free);
	tcase_add_test(tc, test_hint_moves);
	tcase_add_test(tc, test_wrap_around);
	tcase_add_test(tc, test_no_run_across_wrap);
	tcase_add_test(tc, test_wrap_run_spans_hint);
	tcase_add_test(tc, test_hint_out_of_range);
	tcase_add_test(tc, test_fragmentation);
	suite_add_tcase(s, tc);

	suite_add_tcase(s, tcase_free_mark_extend());
	suite_add_tcase(s, tcase_snapshot());
	suite_add_tcase(s, tcase_random());

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(alloc_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
