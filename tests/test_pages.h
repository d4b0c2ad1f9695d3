/*
 * test_pages.h: what the files of the pages backend's unit test share: the
 * backend under test with its in-memory buckets and faults, the helpers in
 * test_pages.c, and the cases of the other files, which test_pages.c's
 * main() runs as one suite.
 */
#ifndef OFS_TEST_PAGES_H
#define OFS_TEST_PAGES_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "kvb.h"
#include "mem_buckets.h"

#define PS 4096u

/* The backend of the "mem" cases (mem_setup() makes it), and its faults. */
extern struct kvb kvb;
extern struct kvb_mem_faults faults;

/* The pages free, asserting the block size. */
uint64_t free_pages(void);
/* len bytes of a pattern that differs with seed and along the buffer. */
void fill(char *buf, size_t len, unsigned seed);
/* Write len bytes of pattern seed at off through o. */
void put(struct kvb_obj *o, size_t len, uint64_t off, unsigned seed);
/* A durability barrier with nothing to sync: freed runs become reusable. */
uint64_t settle(void);
/* Commit o's working state into *map, then settle(). */
void commit(struct kvb_obj *o, struct kvb_map *map, uint64_t *csum);
/* Assert m holds exactly the len bytes at want. */
void expect(const struct kvb_map *m, const char *want, size_t len);
/* A committed object of len bytes with pattern seed under key. */
struct kvb_map make(const char *key, size_t len, unsigned seed);

/*
 * kvb_obj_copy over the backend in kvb (made by the caller, emptied when
 * it returns): bytes and checksums right, the buckets copying by themselves
 * (memory, or copy_file_range(2) between bucket files).
 */
void copy_checks(void);

/* test_pages_durable.c: barriers, checksums, verified reads, power cuts. */
void pages_add_durable(TCase *mem);
/* test_pages_files.c: real bucket files, snapshot and rebuild, opening rules. */
TCase *pages_tcase_files(void);

#endif
