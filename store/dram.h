/*
 * dram: the DRAM tier.  Whole committed objects held in daemon memory,
 * least recently used evicted first, bounded by a byte capacity.
 *
 * An entry is one *version* of an object (its run and checksum): a read
 * checks the version it wants against the entry's, so a stale entry is
 * never served even if an invalidation was missed.  Thread-safe.
 */
#ifndef OFFLOADFS_DRAM_H
#define OFFLOADFS_DRAM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ofs_dram_version {
	int32_t bucket;
	uint64_t page, size, csum;
};

struct ofs_dram_entry;
struct htab;

struct ofs_dram {
	pthread_mutex_t lock;
	uint64_t capacity, bytes; /* bytes: under lock */
	struct htab *tab;         /* the entries by inode number (common/htab); under lock */
	struct ofs_dram_entry *mru, *lru; /* doubly linked, most recent first */
};

int ofs_dram_init(struct ofs_dram *d, uint64_t capacity);
void ofs_dram_release(struct ofs_dram *d);

/*
 * Copy [off, off+len) of ino's version v into buf when it is resident:
 * returns the bytes copied (0 at or past the end), or -ENOENT on a miss.
 */
ssize_t ofs_dram_read(struct ofs_dram *d, uint64_t ino, const struct ofs_dram_version *v,
		      void *buf, size_t len, uint64_t off);
/*
 * Insert data (malloc'd, v->size bytes; the tier takes it) as ino's
 * version v, evicting least recently used entries; *evicted counts them.
 * -E2BIG when the object is larger than the tier (data is freed).
 */
int ofs_dram_insert(struct ofs_dram *d, uint64_t ino, const struct ofs_dram_version *v,
		    char *data, uint64_t *evicted);
void ofs_dram_drop(struct ofs_dram *d, uint64_t ino);
/* 1 when ino's version v is resident. */
int ofs_dram_has(struct ofs_dram *d, uint64_t ino, const struct ofs_dram_version *v);
/* The inos resident, most recent first (malloc'd array; *n entries). */
uint64_t *ofs_dram_list(struct ofs_dram *d, size_t *n);
uint64_t ofs_dram_used(struct ofs_dram *d);

#endif
