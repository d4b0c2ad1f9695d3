/*
 * alloc: bitmap page allocator, one bit per page, 1 = allocated.
 *
 * The bitmap is an array of 64-bit words; page p lives in word p / 64, bit
 * p % 64.  Bits of the last word past npages are kept 0 and are treated as
 * allocated by every search, so they can never be handed out.
 *
 * Searching works a word at a time, never a bit at a time: a full word (~0)
 * is skipped with one compare, an empty word just lengthens the current
 * run, runs inside a word are found for all 64 start positions at once with
 * shift-and-AND and ctz, and the free bits at the top of a word (clz) are
 * carried into the next word.  That carry is the one place where runs
 * crossing word boundaries are handled.  A failed candidate resumes past the
 * allocated bit that blocked it, so each word is looked at once per pass.
 *
 * Every mutating function checks the whole run first and only then changes
 * bits and `used`, so a failure never leaves a half-applied change.
 */
#include "alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WORD_BITS 64u
#define NOT_FOUND UINT64_MAX

/* Bits [0, n) set; n may be 0..64 (shifting by 64 is undefined in C). */
static inline uint64_t low_mask(unsigned n)
{
	return n >= WORD_BITS ? ~0ULL : (1ULL << n) - 1;
}

/* n bits set starting at bit lo; n is 1..64 and lo + n <= 64. */
static inline uint64_t run_mask(unsigned lo, unsigned n)
{
	return low_mask(n) << lo;
}

/* Bits of the last word that are past npages (0 when npages % 64 == 0). */
static inline uint64_t tail_mask(const struct alloc *a)
{
	unsigned used_bits = (unsigned)(a->npages % WORD_BITS);

	return used_bits ? ~low_mask(used_bits) : 0;
}

/* [page, page + count) is non-empty and inside [0, npages), overflow-safe. */
static inline int run_valid(const struct alloc *a, uint64_t page,
			    uint64_t count)
{
	return count != 0 && page < a->npages && count <= a->npages - page;
}

/*
 * Walks the words covering a valid run: each step yields a word index and
 * the mask of the run's bits in that word.  Splitting a run at word
 * boundaries lives here and nowhere else.
 */
struct run_iter {
	uint64_t page; /* next page to cover */
	uint64_t left; /* pages still to cover */
};

static inline int run_next(struct run_iter *it, uint64_t *w, uint64_t *m)
{
	if (it->left == 0)
		return 0;

	unsigned b = (unsigned)(it->page % WORD_BITS);
	unsigned n = WORD_BITS - b;

	if (n > it->left)
		n = (unsigned)it->left;
	*w = it->page / WORD_BITS;
	*m = run_mask(b, n);
	it->page += n;
	it->left -= n;
	return 1;
}

static inline int run_all_set(const struct alloc *a, uint64_t page,
			      uint64_t count)
{
	struct run_iter it = { page, count };
	uint64_t w, m;

	while (run_next(&it, &w, &m))
		if ((a->words[w] & m) != m)
			return 0;
	return 1;
}

static inline int run_any_set(const struct alloc *a, uint64_t page,
			      uint64_t count)
{
	struct run_iter it = { page, count };
	uint64_t w, m;

	while (run_next(&it, &w, &m))
		if (a->words[w] & m)
			return 1;
	return 0;
}

static inline void run_set(struct alloc *a, uint64_t page, uint64_t count)
{
	struct run_iter it = { page, count };
	uint64_t w, m;

	while (run_next(&it, &w, &m))
		a->words[w] |= m;
}

static inline void run_clear(struct alloc *a, uint64_t page, uint64_t count)
{
	struct run_iter it = { page, count };
	uint64_t w, m;

	while (run_next(&it, &w, &m))
		a->words[w] &= ~m;
}

/*
 * First run of `count` free pages lying entirely inside [from, to), or
 * NOT_FOUND.  Bits outside [from, to) are treated as allocated, which also
 * keeps runs from crossing npages (callers pass to <= npages).
 */
static inline __attribute__((always_inline)) uint64_t
find_run(const struct alloc *a, uint64_t from, uint64_t to, uint64_t count)
{
	if (from >= to || to - from < count)
		return NOT_FOUND;

	/*
	 * Shift plan for finding runs inside one word: AND the free bits
	 * with themselves shifted down, doubling the covered length each
	 * step, so that bit i survives only if bits i..i+count-1 are all
	 * free.  log2(count) steps test all 64 start positions at once.
	 * Worked out once per search, not once per word.
	 */
	unsigned shift[6], nshift = 0; /* 6 steps reach 63 */

	if (count < WORD_BITS) {
		for (unsigned have = 1; have < count; nshift++) {
			unsigned step = (unsigned)(count - have);

			if (step > have)
				step = have;
			shift[nshift] = step;
			have += step;
		}
	}

	uint64_t w = from / WORD_BITS;
	uint64_t wlast = (to - 1) / WORD_BITS;
	uint64_t last_mask = to % WORD_BITS ?
			     ~low_mask((unsigned)(to % WORD_BITS)) : 0;
	uint64_t x = a->words[w] | low_mask((unsigned)(from % WORD_BITS));
	/*
	 * Free pages just below the current word, i.e. a run carried in from
	 * earlier words; it started at page w * 64 - run.  Always < count.
	 */
	uint64_t run = 0;

	for (;;) {
		uint64_t base = w * WORD_BITS;

		if (w == wlast)
			x |= last_mask;

		if (x == ~0ULL) {
			/* Full word: nothing starts, continues or ends here. */
			run = 0;
		} else if (x == 0) {
			/* Empty word: only grows the run (long runs skip it). */
			run += WORD_BITS;
			if (run >= count)
				return base + WORD_BITS - run;
		} else {
			/*
			 * The carried run goes on up to the first allocated
			 * bit; with nothing carried, this is a run at bit 0.
			 */
			uint64_t low = run + (unsigned)__builtin_ctzll(x);
			/*
			 * Runs wholly inside the word (a non-empty word has
			 * none of 64 or more); for count 1 the survivors are
			 * just ~x and this is plain ctz(~word).
			 */
			uint64_t starts = 0;

			if (count < WORD_BITS) {
				starts = ~x;
				for (unsigned i = 0; i < nshift; i++)
					starts &= starts >> shift[i];
			}
			/* One test for both: it is the hard one to predict. */
			if (low >= count || starts) {
				/* The carried run starts earlier, so it wins. */
				if (low >= count)
					return base - run;
				return base + (unsigned)__builtin_ctzll(starts);
			}
			/*
			 * No fit: every candidate is blocked by an allocated
			 * bit, so resume past the highest one.  Only the free
			 * bits above it can still begin a run, carried on.
			 */
			run = (unsigned)__builtin_clzll(x);
		}

		if (++w > wlast)
			return NOT_FOUND;
		x = a->words[w];
	}
}

/*
 * find_run() with a compile-time count for the lengths that dominate
 * (1 and 2 pages: a 64 KiB or 128 KiB block), so the shift plan folds
 * into straight-line code in the hot loop.
 */
static uint64_t find_first_fit(const struct alloc *a, uint64_t from,
			       uint64_t to, uint64_t count)
{
	switch (count) {
	case 1:
		return find_run(a, from, to, 1);
	case 2:
		return find_run(a, from, to, 2);
	default:
		return find_run(a, from, to, count);
	}
}

int alloc_init(struct alloc *a, uint64_t npages)
{
	if (!a)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	if (npages == 0)
		return -EINVAL;

	/* Written this way so npages near UINT64_MAX cannot overflow. */
	uint64_t nwords = npages / WORD_BITS + (npages % WORD_BITS != 0);

	if (nwords > SIZE_MAX / sizeof(uint64_t))
		return -ENOMEM;
	a->words = calloc((size_t)nwords, sizeof(uint64_t));
	if (!a->words)
		return -ENOMEM;
	a->npages = npages;
	a->nwords = nwords;
	return 0;
}

void alloc_release(struct alloc *a)
{
	if (!a)
		return;
	free(a->words);
	memset(a, 0, sizeof(*a));
}

int alloc_alloc(struct alloc *a, uint64_t count, uint64_t *page)
{
	if (!page || count == 0 || count > a->npages)
		return -EINVAL;

	uint64_t hint = a->hint < a->npages ? a->hint : 0;
	uint64_t p = find_first_fit(a, hint, a->npages, count);

	/*
	 * Wrap around once: runs starting before the hint.  Such a run may
	 * extend up to count - 1 pages past the hint, but never past npages:
	 * a run does not wrap from the last page to page 0.
	 */
	if (p == NOT_FOUND && hint > 0) {
		uint64_t lim = count - 1 < a->npages - hint ? hint + count - 1
							    : a->npages;

		p = find_first_fit(a, 0, lim, count);
	}
	if (p == NOT_FOUND)
		return -ENOSPC;

	run_set(a, p, count);
	a->used += count;
	/* Next search starts right after this run (sequential fill is O(1)). */
	a->hint = count < a->npages - p ? p + count : 0;
	*page = p;
	return 0;
}

int alloc_free(struct alloc *a, uint64_t page, uint64_t count)
{
	if (!run_valid(a, page, count))
		return -EINVAL;
	/* All pages must be allocated, else a double free would skew used. */
	if (!run_all_set(a, page, count))
		return -EFAULT;
	run_clear(a, page, count);
	a->used -= count;
	/* Let the next search find the hole without a full pass. */
	if (page < a->hint)
		a->hint = page;
	return 0;
}

int alloc_mark(struct alloc *a, uint64_t page, uint64_t count)
{
	if (!run_valid(a, page, count))
		return -EINVAL;
	/* Overlap means two mappings claim one page: refuse, change nothing. */
	if (run_any_set(a, page, count))
		return -EEXIST;
	run_set(a, page, count);
	a->used += count;
	return 0;
}

int alloc_extend(struct alloc *a, uint64_t page, uint64_t count, uint64_t more)
{
	if (!run_valid(a, page, count) || more == 0 ||
	    more > a->npages - page - count)
		return -EINVAL;
	/* Growing a run the caller does not own is a bug like a double free. */
	if (!run_all_set(a, page, count))
		return -EFAULT;
	if (run_any_set(a, page + count, more))
		return -ENOSPC;
	run_set(a, page + count, more);
	a->used += more;
	return 0;
}

int alloc_test(const struct alloc *a, uint64_t page)
{
	if (page >= a->npages)
		return -EINVAL;
	return (int)((a->words[page / WORD_BITS] >> (page % WORD_BITS)) & 1);
}

int alloc_test_run(const struct alloc *a, uint64_t page, uint64_t count)
{
	if (!run_valid(a, page, count))
		return -EINVAL;
	return run_all_set(a, page, count);
}

uint64_t alloc_largest_free(const struct alloc *a)
{
	uint64_t best = 0, run = 0;

	for (uint64_t w = 0; w < a->nwords; w++) {
		uint64_t x = a->words[w];

		if (w == a->nwords - 1)
			x |= tail_mask(a); /* pages past npages do not count */
		if (x == 0) {
			run += WORD_BITS;
			continue;
		}
		/* The carried run ends at the first allocated bit. */
		run += (unsigned)__builtin_ctzll(x);
		if (run > best)
			best = run;
		/* Runs wholly inside the word, between allocated bits. */
		while (x != ~0ULL) {
			unsigned f = (unsigned)__builtin_ctzll(~x);
			uint64_t rest = x >> f;

			if (rest == 0)
				break; /* free to the top: carried below */
			unsigned len = (unsigned)__builtin_ctzll(rest);

			if (len > best)
				best = len;
			x |= low_mask(f + len + 1);
		}
		run = x == ~0ULL ? 0
				 : WORD_BITS - (unsigned)__builtin_ctzll(~x);
	}
	return run > best ? run : best;
}

int alloc_load(struct alloc *a, const uint64_t *words, uint64_t nwords)
{
	if (!words || !a->words || nwords != a->nwords)
		return -EINVAL;
	/* Stray bits past npages would be allocated pages that do not exist. */
	if (words[nwords - 1] & tail_mask(a))
		return -EINVAL;

	uint64_t used = 0;

	for (uint64_t w = 0; w < nwords; w++)
		used += (uint64_t)__builtin_popcountll(words[w]);
	memmove(a->words, words, (size_t)nwords * sizeof(uint64_t));
	a->used = used;
	a->hint = 0;
	return 0;
}

int alloc_equal(const struct alloc *a, const struct alloc *b)
{
	if (a->npages != b->npages)
		return 0;
	if (a->nwords == 0)
		return 1;
	return memcmp(a->words, b->words,
		      (size_t)a->nwords * sizeof(uint64_t)) == 0;
}
