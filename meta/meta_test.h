/*
 * meta_test.h: seams of the metadata engine for tests only.  Included by
 * the tests and by meta's own files, never by the daemon or offloadctl.
 */
#ifndef OFFLOADFS_META_TEST_H
#define OFFLOADFS_META_TEST_H

#include "meta.h"

/*
 * Fault injection: the nth write statement from now (inserts, updates,
 * deletes, moves, xattr changes; counting from 1) fails with -EIO.
 * 0 disarms.
 */
void meta_inject_fault(struct meta *m, unsigned long nth_write);

#endif
