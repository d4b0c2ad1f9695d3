/*
 * test_alloc.h: what the files of the alloc/ unit test share: the sizes
 * tried, the helpers in test_alloc.c, and each file's test cases, which
 * test_alloc.c's main() runs as one suite.
 */
#ifndef OFS_TEST_ALLOC_H
#define OFS_TEST_ALLOC_H

#include <check.h>
#include <stdint.h>

#include "alloc.h"

/* Bitmap sizes: below, at and past a word, and several words. */
extern const uint64_t sizes[6];
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

void init_ok(struct alloc *a, uint64_t npages);
/* A run of count pages, asserted inside the bitmap; its first page. */
uint64_t alloc_ok(struct alloc *a, uint64_t count);


/* A copy of the bitmap and counters, to prove a failed call changed nothing. */
struct snap {
	uint64_t *words;
	uint64_t nwords, used, hint;
};

struct snap snap_take(const struct alloc *a);
/* Assert a is as s was taken, and free s. */
void snap_same(struct snap *s, const struct alloc *a);

/* used must equal the number of set bits, and bits past npages stay 0. */
void check_invariants(const struct alloc *a);

/* The cases of test_alloc_free.c and test_alloc_random.c. */
TCase *tcase_free_mark_extend(void);
TCase *tcase_snapshot(void);
TCase *tcase_random(void);

#endif
