/*
 * bench_alloc: allocations per second of alloc_alloc() against the naive
 * allocator the RFC describes ("linear scan from hint_ for count consecutive
 * free bits, wrap around at end"), one bit at a time.
 *
 * One bucket of 4 GiB in 64 KiB pages (65536 pages), filled to 0%, 50% and
 * 90% in two layouts: "random", a fixed random pattern of single allocated
 * pages, so free space is as fragmented as it gets; and "packed", the pages
 * taken front to back, which is what the allocator itself leaves behind (its
 * hint moves past each run), with the free space at the end.  Each operation sets the hint to a page from
 * a fixed random sequence (otherwise free() would put the hint back on the
 * hole just freed and every search would succeed at its first look), then
 * allocates a run and frees it again, so the fill level stays constant and
 * both allocators see the identical bitmap and the identical hints.
 *
 * Usage: bench_alloc [--quick] [iterations]
 *   default     ~0.2 s per allocator per cell
 *   --quick     ~0.02 s per allocator per cell
 *   iterations  a fixed number of alloc+free pairs per allocator per cell
 *
 * It prints ratios; it asserts nothing about timing.  It does check, before
 * timing each cell, that both allocators return the same pages.
 */
#include "alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPAGES 65536u  /* 4 GiB / 64 KiB */
#define NHINTS 4096u   /* length of the fixed hint sequence */
#define ROUNDS 4       /* ours and naive alternate this many times per cell */
#define BATCH 16       /* operations between clock reads */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: fixed seed, same pattern on every run. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int naive_bit(const struct alloc *a, uint64_t p)
{
	return (int)((a->words[p / 64] >> (p % 64)) & 1);
}

/* First run of count free pages in [from, to), testing one bit at a time. */
static uint64_t naive_scan(const struct alloc *a, uint64_t from, uint64_t to,
			   uint64_t count)
{
	uint64_t run = 0;

	for (uint64_t p = from; p < to; p++) {
		if (naive_bit(a, p))
			run = 0;
		else if (++run == count)
			return p + 1 - count;
	}
	return UINT64_MAX;
}

/*
 * The naive allocator: scan from the hint to the end, then wrap around to
 * page 0.  The second part goes count - 1 pages past the hint so that it
 * follows the same contract as alloc_alloc() (first fit from the hint, no
 * run across the end of the bitmap) and returns the same pages: the
 * comparison is about speed only.
 */
static int naive_alloc(struct alloc *a, uint64_t count, uint64_t *page)
{
	if (count == 0 || count > a->npages)
		return -EINVAL;

	uint64_t hint = a->hint < a->npages ? a->hint : 0;
	uint64_t p = naive_scan(a, hint, a->npages, count);

	if (p == UINT64_MAX && hint > 0) {
		uint64_t lim = hint + count - 1;

		p = naive_scan(a, 0, lim < a->npages ? lim : a->npages, count);
	}
	if (p == UINT64_MAX)
		return -ENOSPC;
	for (uint64_t q = p; q < p + count; q++)
		a->words[q / 64] |= 1ULL << (q % 64);
	a->used += count;
	a->hint = p + count < a->npages ? p + count : 0;
	*page = p;
	return 0;
}

typedef int (*alloc_fn)(struct alloc *, uint64_t, uint64_t *);

static uint64_t hints[NHINTS];

/* One alloc + free with the next hint; returns the page or UINT64_MAX. */
static inline uint64_t one_op(alloc_fn fn, struct alloc *a, uint64_t count,
			      unsigned *hi)
{
	uint64_t page;

	a->hint = hints[*hi];
	*hi = (*hi + 1) % NHINTS;
	if (fn(a, count, &page) != 0)
		return UINT64_MAX;
	if (alloc_free(a, page, count) != 0) {
		fprintf(stderr, "bench: free of a fresh run failed\n");
		exit(2);
	}
	return page;
}

/*
 * Run fn for `budget` seconds (or exactly `iters` operations when iters is
 * non-zero); adds the operations done and the time taken.
 */
static void slice(alloc_fn fn, struct alloc *a, uint64_t count, double budget,
		  uint64_t iters, unsigned *hi, uint64_t *ops, double *secs)
{
	double t0 = now(), t = t0;
	uint64_t n = 0;

	if (iters) {
		for (; n < iters; n++)
			one_op(fn, a, count, hi);
		t = now();
	} else {
		while (t - t0 < budget) {
			for (int i = 0; i < BATCH; i++)
				one_op(fn, a, count, hi);
			n += BATCH;
			t = now();
		}
	}
	*ops += n;
	*secs += t - t0;
}

/* Fill exactly pct% of the pages, chosen at random, one page at a time. */
static void fill(struct alloc *a, unsigned pct)
{
	static uint32_t order[NPAGES];
	uint64_t want = (uint64_t)NPAGES * pct / 100;

	for (uint32_t i = 0; i < NPAGES; i++)
		order[i] = i;
	rng_state = 0x5eedf111ULL + pct;
	for (uint64_t i = 0; i < want; i++) {
		uint64_t j = i + rng() % (NPAGES - i);
		uint32_t tmp = order[i];

		order[i] = order[j];
		order[j] = tmp;
		if (alloc_mark(a, order[i], 1) != 0) {
			fprintf(stderr, "bench: fill failed\n");
			exit(2);
		}
	}
}

/* Fill pct% of the pages front to back, as a run of allocations does. */
static void fill_packed(struct alloc *a, unsigned pct)
{
	uint64_t want = (uint64_t)NPAGES * pct / 100;

	if (want && alloc_mark(a, 0, want) != 0) {
		fprintf(stderr, "bench: fill failed\n");
		exit(2);
	}
}

/* Both allocators must agree on every hint of the sequence. */
static void cross_check(struct alloc *a, uint64_t count)
{
	unsigned hi_ours = 0, hi_naive = 0;

	for (unsigned i = 0; i < NHINTS; i++) {
		uint64_t p1 = one_op(alloc_alloc, a, count, &hi_ours);
		uint64_t p2 = one_op(naive_alloc, a, count, &hi_naive);

		if (p1 != p2) {
			fprintf(stderr, "bench: hint %llu count %llu: "
				"ours %lld naive %lld\n",
				(unsigned long long)hints[i],
				(unsigned long long)count, (long long)p1,
				(long long)p2);
			exit(2);
		}
	}
}

/* Operations per second of both allocators on one bitmap and run length. */
static void measure(struct alloc *a, uint64_t count, double budget,
		    uint64_t iters, double *ours, double *naive)
{
	uint64_t ops_ours = 0, ops_naive = 0;
	double s_ours = 0, s_naive = 0;
	unsigned hi_ours = 0, hi_naive = 0;
	uint64_t per_round = iters ? (iters + ROUNDS - 1) / ROUNDS : 0;

	/* Alternate so drift (clock speed, neighbours) hits both alike. */
	for (int r = 0; r < ROUNDS; r++) {
		slice(alloc_alloc, a, count, budget / ROUNDS, per_round,
		      &hi_ours, &ops_ours, &s_ours);
		slice(naive_alloc, a, count, budget / ROUNDS, per_round,
		      &hi_naive, &ops_naive, &s_naive);
	}
	*ours = (double)ops_ours / s_ours;
	*naive = (double)ops_naive / s_naive;
}

int main(int argc, char **argv)
{
	static const unsigned fills[] = { 0, 50, 90 };
	static const uint64_t counts[] = { 1, 2, 32 };
	const size_t nfills = sizeof(fills) / sizeof(fills[0]);
	const size_t ncounts = sizeof(counts) / sizeof(counts[0]);
	double budget = 0.2;
	uint64_t iters = 0;
	double min90 = 0, min90_packed = 0;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "--quick") == 0) {
			budget = 0.02;
			continue;
		}
		iters = strtoull(argv[i], &end, 10);
		if (*end || iters == 0) {
			fprintf(stderr, "usage: %s [--quick] [iterations]\n",
				argv[0]);
			return 2;
		}
	}

	rng_state = 0x417b175ULL;
	for (unsigned i = 0; i < NHINTS; i++)
		hints[i] = rng() % NPAGES;

	for (int packed = 0; packed < 2; packed++) {
		for (size_t f = 0; f < nfills; f++) {
			struct alloc a;

			if (alloc_init(&a, NPAGES) != 0) {
				fprintf(stderr, "bench: alloc_init failed\n");
				return 2;
			}
			if (packed)
				fill_packed(&a, fills[f]);
			else
				fill(&a, fills[f]);

			for (size_t c = 0; c < ncounts; c++) {
				double ours, naive, ratio;

				cross_check(&a, counts[c]);
				measure(&a, counts[c], budget, iters, &ours, &naive);
				ratio = ours / naive;
				printf("fill=%u%% %s pages=%llu ours=%.0f/s naive=%.0f/s "
				       "ratio=%.1fx\n", fills[f], packed ? "packed" : "random",
				       (unsigned long long)counts[c], ours, naive, ratio);
				fflush(stdout);
				if (fills[f] == 90 && packed &&
				    (min90_packed == 0 || ratio < min90_packed))
					min90_packed = ratio;
				if (fills[f] == 90 && !packed && (min90 == 0 || ratio < min90))
					min90 = ratio;
			}
			alloc_release(&a);
		}
	}
	printf("min ratio at 90%% fill, packed (the allocator's own layout): %.1fx\n",
	       min90_packed);
	printf("min ratio at 90%% fill, random single pages (worst fragmentation): %.1fx\n",
	       min90);
	return 0;
}
