/*
 * stats: the store's counters and latency histograms, updated with relaxed
 * atomics on the request path (no lock).  The daemon renders them
 * (fuse/metrics.c).
 */
#ifndef OFFLOADFS_STATS_H
#define OFFLOADFS_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Upper bounds of the latency buckets, seconds; +Inf is implied. */
#define OFS_LAT_NBUCKETS 14
extern const double ofs_lat_bounds[OFS_LAT_NBUCKETS];

struct ofs_hist {
	uint64_t counts[OFS_LAT_NBUCKETS + 1];
	uint64_t sum_ns;
	uint64_t n;
};

struct ofs_metrics {
	uint64_t bytes_written, bytes_read, prefills;
	uint64_t objects_committed, commit_failures, objects_read;
	uint64_t checksum_failures;
	uint64_t barriers;
	uint64_t promotions_queued, promotions_done, promotions_failed, promotions_dropped;
	uint64_t dram_hits, dram_misses, dram_evictions;
	uint64_t values_missing; /* files dropped because the backend lost their value */
	/* copy_file_range requests served inside the backend, and through memory */
	uint64_t copies_backend, copies_memory;
	struct ofs_hist read_lat, write_lat;
};

#define OFS_COUNT(field, n) __atomic_add_fetch(&(field), (n), __ATOMIC_RELAXED)

void ofs_hist_observe(struct ofs_hist *h, uint64_t ns);
uint64_t ofs_now_ns(void);

#endif
