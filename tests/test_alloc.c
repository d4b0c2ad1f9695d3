/*
 * Unit tests for alloc/: every function, every error path, sizes that are
 * and are not multiples of 64, runs across word boundaries, the hint and
 * its wrap-around, and a randomized run against a byte-per-page model.
 */
#include "alloc.h"

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

static const uint64_t sizes[] = { 1, 63, 64, 65, 130, 1000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ---- helpers ---------------------------------------------------------- */

static void init_ok(struct alloc *a, uint64_t npages)
{
	ck_assert_int_eq(alloc_init(a, npages), 0);
}

static uint64_t alloc_ok(struct alloc *a, uint64_t count)
{
	uint64_t page = UINT64_MAX;

	ck_assert_int_eq(alloc_alloc(a, count, &page), 0);
	ck_assert_uint_lt(page, a->npages);
	ck_assert_uint_le(count, a->npages - page);
	return page;
}

/* A copy of the bitmap and counters, to prove a failed call changed nothing. */
struct snap {
	uint64_t *words;
	uint64_t nwords, used, hint;
};

static struct snap snap_take(const struct alloc *a)
{
	struct snap s = { NULL, a->nwords, a->used, a->hint };

	s.words = malloc(a->nwords * sizeof(uint64_t));
	ck_assert_ptr_nonnull(s.words);
	memcpy(s.words, a->words, a->nwords * sizeof(uint64_t));
	return s;
}

static void snap_same(struct snap *s, const struct alloc *a)
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
static void check_invariants(const struct alloc *a)
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

	tc = tcase_create("free_mark_extend");
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
	suite_add_tcase(s, tc);

	tc = tcase_create("snapshot");
	tcase_add_test(tc, test_largest_free);
	tcase_add_test(tc, test_load_round_trip);
	tcase_add_test(tc, test_load_full_words);
	tcase_add_test(tc, test_load_rejects);
	tcase_add_test(tc, test_equal);
	suite_add_tcase(s, tc);

	tc = tcase_create("random");
	tcase_set_timeout(tc, 120); /* slow under sanitizers */
	tcase_add_test(tc, test_random_1000);
	tcase_add_test(tc, test_random_130);
	tcase_add_test(tc, test_random_4096);
	suite_add_tcase(s, tc);

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
