/*
 * Helpers shared by the unit tests of a whole store (test_store.c over the
 * pages backend, test_ubsio.c over the ubsio stand-in).  A failure inside
 * one fails the calling test through check's assertions.
 */
#ifndef OFS_TEST_HELPERS_H
#define OFS_TEST_HELPERS_H

#include <stddef.h>

#include "meta.h"
#include "store.h"

/* len bytes of a pattern that differs with seed and along the buffer. */
void fill(char *buf, size_t len, unsigned seed);

/* A new, never committed record for name under the root. */
struct meta_inode new_record(struct ofs_store *s, const char *name);

#endif
