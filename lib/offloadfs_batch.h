/*
 * offloadfs_batch: put, get, test and delete many keys of an offloadfs
 * tenant at once (pages backend).  A get, test or delete costs two FUSE
 * round trips (a write and a read) per batch of up to 1,024 keys,
 * whatever their number, a put four (reserve, commit), and gets and tests
 * of keys whose descriptors the process kept none; the bytes move
 * with pwrite/pread on the bucket files, which the process opens once.
 *
 * tenant_dir is a top-level directory of the mount; keys are paths below
 * it ("Qwen/Qwen3-32B/abc_0_k"): -EINVAL for an empty name, "." or "..",
 * -ENAMETOOLONG past 4,095 bytes or for a name past 255.
 * Functions return 0 when every key succeeded, a negative errno for the
 * first failure otherwise; errs (may be NULL) gets 0 or a negative errno
 * per key.  The calling process needs the daemon's access to ROOT (its
 * user, or read access through -o data_group for gets and lookups).
 * Thread-safe; docs/batch.md has the rules.
 */
#ifndef OFFLOADFS_BATCH_H
#define OFFLOADFS_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Store n objects.  A key that exists already keeps its content: its
 * entry is -EEXIST (delete it first to replace it).  Missing directories
 * of a key are made.  All keys of one internal batch become visible at
 * once, durable as a close(2) is (OFFLOADFS_SYNC: as an fsync(2)).
 * The daemon records the sums of what this process wrote without
 * reading it back; OFFLOADFS_VERIFY (or the environment variable
 * OFFLOADFS_VERIFY=1) has it read the pages back and refuse the batch
 * (-EBADMSG) when they differ (docs/batch.md, "Commit").
 */
#define OFFLOADFS_SYNC 1
#define OFFLOADFS_VERIFY 4
int offloadfs_put_many(const char *tenant_dir, const char *const *keys, const void *const *bufs,
		       const size_t *lens, size_t n, int flags, int *errs);
/*
 * Read n objects into bufs (caps: their sizes); lens gets each object's
 * size.  -ENOENT: missing, -EOVERFLOW: larger than its buffer (lens
 * gets the size it needs), -EIO: the bytes read do not match the
 * object's checksum.
 */
int offloadfs_get_many(const char *tenant_dir, const char *const *keys, void *const *bufs,
		       const size_t *caps, size_t n, size_t *lens, int *errs);
/* exists[i] = 1 when keys[i] is a file. */
int offloadfs_exists_many(const char *tenant_dir, const char *const *keys, size_t n,
			  int *exists);
/* Delete n keys (-ENOENT for a missing one). */
int offloadfs_delete_many(const char *tenant_dir, const char *const *keys, size_t n, int *errs);

/*
 * The steps of a put, for clients that write the bytes themselves (tests
 * use them): reserve n runs (bucket file descriptor and offset per key)
 * and commit them with the XXH3-64 of each page.  A description's
 * reservations are freed when it is closed.
 */
struct offloadfs_batch;
struct offloadfs_desc {
	int err;
	int fd;           /* the bucket file, open in this process; -1: empty object */
	uint64_t offset;
	uint64_t size;
	uint64_t csum;    /* lookups */
	/* Lookups: what offloadfs_batch_valid checks (docs/batch.md). */
	uint64_t ino, gen, epoch;
};
struct offloadfs_batch *offloadfs_batch_open(const char *tenant_dir);
void offloadfs_batch_close(struct offloadfs_batch *b);
uint64_t offloadfs_batch_page_size(const struct offloadfs_batch *b);
int offloadfs_batch_reserve(struct offloadfs_batch *b, const char *const *keys,
			    const size_t *lens, size_t n, struct offloadfs_desc *d);
/*
 * pcs[i]: ceil(lens[i] / page size) sums of keys[i]'s pages; with
 * OFFLOADFS_CSUM one more, the XXH3-64 of its whole content, and the
 * daemon records them without reading the pages back (unless
 * OFFLOADFS_VERIFY or OFFLOADFS_VERIFY=1 in the environment).  Without
 * it the daemon reads the pages back to hash them.
 */
#define OFFLOADFS_CSUM 2
int offloadfs_batch_commit(struct offloadfs_batch *b, const char *const *keys,
			   const size_t *lens, const uint64_t *const *pcs, size_t n, int flags,
			   int *errs);
int offloadfs_batch_lookup(struct offloadfs_batch *b, const char *const *keys, size_t n,
			   struct offloadfs_desc *d);
/*
 * 1 while a looked-up descriptor still names its key's content: no
 * delete, rename or new version of it since, and the daemon that gave
 * it still serves the store.  Called after reading with d, it says the
 * bytes read are the key's (the pages were not reused meanwhile); 0
 * without the daemon's epoch table.
 */
int offloadfs_batch_valid(const struct offloadfs_batch *b, const struct offloadfs_desc *d);

#ifdef __cplusplus
}
#endif

#endif
