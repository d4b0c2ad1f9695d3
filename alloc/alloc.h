/*
 * alloc: a bitmap page allocator for one bucket file.
 *
 * One bit per page, 1 = allocated.  Pure data structure: no I/O, no locks
 * (the caller serialises access to one struct alloc), no FUSE, no sqlite.
 * Every function that can fail returns 0 or a negative errno and leaves the
 * bitmap unchanged on failure.
 */
#ifndef OFFLOADFS_ALLOC_H
#define OFFLOADFS_ALLOC_H

#include <stddef.h>
#include <stdint.h>

struct alloc {
	uint64_t *words;   /* nwords 64-bit words; bits past npages stay 0 */
	uint64_t npages;   /* pages in the bucket */
	uint64_t nwords;   /* (npages + 63) / 64 */
	uint64_t hint;     /* first page the next search looks at */
	uint64_t used;     /* allocated pages, kept in step with the bits */
};

/* Set up an empty allocator of npages pages (npages >= 1). -ENOMEM, -EINVAL. */
int alloc_init(struct alloc *a, uint64_t npages);
/* Free the bitmap; the struct may be alloc_init()ed again. */
void alloc_release(struct alloc *a);

/*
 * Allocate `count` contiguous free pages, first fit starting at the hint and
 * wrapping around once.  On success stores the first page in *page and moves
 * the hint past the run.  -EINVAL for count 0 or count > npages, -ENOSPC when
 * no run of that length is free.  Never loops more than one pass.
 */
int alloc_alloc(struct alloc *a, uint64_t count, uint64_t *page);

/*
 * Free [page, page+count).  -EINVAL when the run is out of range or empty,
 * -EFAULT when any page of it is not allocated (double free): then nothing is
 * changed.  Moves the hint back to `page` when that is before it.
 */
int alloc_free(struct alloc *a, uint64_t page, uint64_t count);

/*
 * Mark [page, page+count) allocated (rebuilding at mount).  -EINVAL out of
 * range, -EEXIST when any page of it is already allocated (overlap): then
 * nothing is changed.
 */
int alloc_mark(struct alloc *a, uint64_t page, uint64_t count);

/*
 * Grow the allocated run [page, page+count) by `more` pages in place, i.e.
 * take [page+count, page+count+more) if all of it is free.  -EINVAL out of
 * range, -EFAULT when [page, page+count) is not wholly allocated (not a
 * run this allocator handed out), -ENOSPC when the new pages are not all free.
 */
int alloc_extend(struct alloc *a, uint64_t page, uint64_t count, uint64_t more);

/* 1 if the page is allocated, 0 if free, -EINVAL when out of range. */
int alloc_test(const struct alloc *a, uint64_t page);

/* 1 if every page of [page, page+count) is allocated, 0 if not, -EINVAL. */
int alloc_test_run(const struct alloc *a, uint64_t page, uint64_t count);

static inline uint64_t alloc_used(const struct alloc *a) { return a->used; }
static inline uint64_t alloc_free_pages(const struct alloc *a) { return a->npages - a->used; }

/* Length of the longest free run (for fragmentation reports). */
uint64_t alloc_largest_free(const struct alloc *a);

/*
 * Replace the bitmap with a saved copy of nwords words (a clean snapshot).
 * -EINVAL when nwords does not match or bits past npages are set; the
 * allocator is unchanged then.
 */
int alloc_load(struct alloc *a, const uint64_t *words, uint64_t nwords);

/* 1 when both allocators have the same size and the same bits. */
int alloc_equal(const struct alloc *a, const struct alloc *b);

#endif
