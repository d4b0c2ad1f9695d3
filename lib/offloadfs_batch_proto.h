/*
 * The batch control file's wire format, shared by the daemon (fuse/batch.c)
 * and the client library (lib/batch.c).  Host byte order: the control file
 * is local to the mount.
 *
 * A client opens TENANT/.offload-batch read-write, writes one request at
 * offset 0 (one write(2), at most OFS_BATCH_REQ_MAX bytes) and reads the
 * reply at offset 0: two FUSE round trips per batch, whatever the number
 * of keys.  Reservations belong to the open file description and are
 * freed when it is released (the client closed it, or died).
 */
#ifndef OFFLOADFS_BATCH_PROTO_H
#define OFFLOADFS_BATCH_PROTO_H

#include <stdint.h>

#define OFS_BATCH_NAME ".offload-batch"
#define OFS_BATCH_MAGIC 0x6f666231u  /* "ofb1" */
#define OFS_BATCH_REQ_MAX (1u << 20) /* one FUSE WRITE (the daemon's max_write) */
#define OFS_BATCH_KEYS_MAX 4096u

enum ofs_batch_op {
	OFS_BATCH_INFO = 1,    /* no entries; reply: struct ofs_batch_info */
	OFS_BATCH_RESERVE = 2, /* key + size -> struct ofs_batch_desc (a reserved run) */
	OFS_BATCH_COMMIT = 3,  /* key + page checksums -> struct ofs_batch_status */
	OFS_BATCH_LOOKUP = 4,  /* key -> struct ofs_batch_desc (err -ENOENT: missing) */
	OFS_BATCH_DELETE = 5,  /* key -> struct ofs_batch_status */
	OFS_BATCH_ABORT = 6,   /* key -> struct ofs_batch_status: free a reservation */
};

/* OFS_BATCH_COMMIT flag: run the durability barrier before replying (fsync). */
#define OFS_BATCH_SYNC 1u

struct ofs_batch_hdr {
	uint32_t magic;
	uint16_t op;
	uint16_t flags;
	uint32_t n;     /* entries */
	uint32_t len;   /* bytes of the whole request or reply, this header included */
	int32_t status; /* reply: 0, or a negative errno for the whole batch */
	uint32_t pad;
};

/*
 * A request entry, 8-byte aligned: klen bytes of key (the path below the
 * tenant, no NUL), padded to 8, then for COMMIT npcs XXH3-64 page sums
 * (of each page's bytes below size).  size: RESERVE and COMMIT.
 */
struct ofs_batch_ent {
	uint32_t klen;
	uint32_t npcs;
	uint64_t size;
};

static inline uint32_t ofs_batch_pad8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

/* Reply entry of RESERVE and LOOKUP. */
struct ofs_batch_desc {
	int32_t err;      /* 0, or a negative errno for this key */
	int32_t bucket;   /* -1: no pages (an empty object) */
	uint64_t offset;  /* bytes into the bucket file */
	uint64_t size;
	uint64_t csum;    /* LOOKUP: XXH3-64 of the content */
};

/* Reply entry of COMMIT, DELETE and ABORT. */
struct ofs_batch_status {
	int32_t err;
	int32_t pad;
};

/* Reply of INFO; the bucket files are ROOT/bucket_XX.data (two lowercase hex digits). */
struct ofs_batch_info {
	uint64_t page_size;
	uint32_t bucket_count;
	uint32_t rootlen;
	char root[4096];
};

#endif
