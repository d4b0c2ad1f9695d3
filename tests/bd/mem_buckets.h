/*
 * mem_buckets: the pages backend over buckets in memory, for unit tests
 * (a struct kvb_pages_io, pages_io.h).  It can fail the Nth write
 * (fail_write_at, counting from 1) with -EIO, refuse copies inside the
 * buckets (copy_err), refuse reserves of blocks (reserve_max,
 * reserve_fail_at), and lose every write since
 * the last sync of its bucket (kvb_mem_power_cut).
 */
#ifndef OFFLOADFS_TESTS_MEM_BUCKETS_H
#define OFFLOADFS_TESTS_MEM_BUCKETS_H

#include <stdint.h>

#include "kvb.h"

struct kvb_mem_faults {
	unsigned long fail_write_at;
	unsigned long writes;     /* copies count as writes too */
	/* Copies inside the buckets asked for; copy_err (-EXDEV, ...): they all fail with it. */
	unsigned long copies;
	int copy_err;
	/* Write-outs asked to start early (hints), and the bytes they covered. */
	unsigned long writebacks;
	uint64_t writeback_bytes;
	/* The read-ahead hints asked for, and the last one (bucket, byte range). */
	unsigned long willneeds;
	uint32_t willneed_bucket;
	uint64_t willneed_off, willneed_len;
	/*
	 * Reserves of blocks (none fail unless set): those longer than
	 * reserve_max bytes, and those covering byte reserve_fail_at - 1 of a
	 * bucket, fail with -ENOSPC; reserves counts them all.
	 */
	uint64_t reserve_max, reserve_fail_at;
	unsigned long reserves;
	/* Bytes read, written and copied inside the buckets (what a commit costs). */
	uint64_t read_bytes, write_bytes, copy_bytes;
};

/* faults may be NULL; kvb_release frees the buckets with the backend. */
int kvb_mem_init(struct kvb *kvb, const struct kvb_pages_geom *g, struct kvb_mem_faults *faults);
/* Power cut: every bucket goes back to its bytes as of its last sync. */
void kvb_mem_power_cut(struct kvb *kvb);

#endif
