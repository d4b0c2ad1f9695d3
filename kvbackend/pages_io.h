/*
 * pages_io.h: where the pages backend keeps its buckets' bytes.  A mount
 * keeps them in bucket files (kvbackend/pages/io.c, behind kvb_pages_init);
 * the unit tests keep them in memory that can lose power and fail writes
 * (tests/bd/mem_buckets.c), as littlefs keeps its emulated block devices
 * apart from the filesystem.  Nothing else needs this header.
 */
#ifndef OFFLOADFS_PAGES_IO_H
#define OFFLOADFS_PAGES_IO_H

#include <stdint.h>
#include <sys/types.h>

#include "kvb.h"

/*
 * Byte I/O on bucket b, 0 <= b < bucket_count, each bucket bucket_size
 * bytes; dev is what kvb_pages_init_io was given.  Negative errno.
 */
struct kvb_pages_io {
	ssize_t (*pread)(void *dev, uint32_t b, void *buf, size_t len, uint64_t off);
	ssize_t (*pwrite)(void *dev, uint32_t b, const void *buf, size_t len, uint64_t off);
	int (*zero)(void *dev, uint32_t b, uint64_t off, uint64_t len);
	/* Make everything written to b so far survive a power cut. */
	int (*sync)(void *dev, uint32_t b);
	/*
	 * Optional.  reserve: give bytes [off, off + len) real blocks, so that
	 * writing them later cannot fail for want of space (-ENOSPC now
	 * instead); punch: give their blocks back (they then read as zeros).
	 */
	int (*reserve)(void *dev, uint32_t b, uint64_t off, uint64_t len);
	int (*punch)(void *dev, uint32_t b, uint64_t off, uint64_t len);
	/*
	 * Optional: copy up to len bytes from (fb, from) to (tb, to), ranges
	 * that never overlap, without passing them through the caller (the
	 * backing filesystem may share the blocks).  Bytes copied (> 0), or
	 * negative errno; -EXDEV, -EOPNOTSUPP, -ENOSYS, -EINVAL (or 0 bytes)
	 * mean it cannot here: the backend then reads and writes them itself.
	 */
	ssize_t (*copy)(void *dev, uint32_t fb, uint64_t from, uint32_t tb, uint64_t to,
			size_t len);
	/*
	 * Optional: bytes [off, off + len) will be synced soon: start writing
	 * them to stable storage now (a hint; it cannot fail).
	 */
	void (*writeback)(void *dev, uint32_t b, uint64_t off, uint64_t len);
	/* Optional: bytes about to be read (a hint; it cannot fail). */
	void (*willneed)(void *dev, uint32_t b, uint64_t off, uint64_t len);
	/* Optional: called once when the backend is released, the last call on dev. */
	void (*release)(void *dev);
};

/*
 * The pages backend over io: the geometry checked (-EINVAL, err set), the
 * allocator's state made; nothing is read or written yet.  On failure
 * io->release is not called: dev is still the caller's.
 */
int kvb_pages_init_io(struct kvb *kvb, const struct kvb_pages_geom *g,
		      const struct kvb_pages_io *io, void *dev, char *err, size_t errlen);
/* The dev of a pages backend made by kvb_pages_init_io. */
void *kvb_pages_io_dev(const struct kvb *kvb);
/*
 * A freed run keeps its blocks until it has stayed free delay_ms, or while
 * free runs holding blocks are at most max_bytes (kvbackend/pages/runs.c;
 * defaults PAGES_WARM_DELAY_MS and PAGES_WARM_MAX).  For tests.
 */
void kvb_pages_set_warm(struct kvb *kvb, uint64_t delay_ms, uint64_t max_bytes);

#endif
