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
#define OFS_BATCH_MAGIC 0x6f666232u  /* "ofb2" */
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
/*
 * OFS_BATCH_COMMIT flag: each entry's sums end with one more, the XXH3-64
 * of its whole content (npcs: pages + 1).  The daemon records them as
 * given, reading nothing back, unless OFS_BATCH_VERIFY.  Without it the
 * daemon reads the pages back to hash them (the whole sum is not given).
 */
#define OFS_BATCH_CSUM 2u
/* OFS_BATCH_COMMIT flag: read the pages back and check them against the sums given. */
#define OFS_BATCH_VERIFY 4u

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
 * (of each page's bytes below size; with OFS_BATCH_CSUM, then the whole
 * content's).  size: RESERVE and COMMIT.
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

/* Reply entry of RESERVE, COMMIT and LOOKUP. */
struct ofs_batch_desc {
	int32_t err;      /* 0, or a negative errno for this key */
	int32_t bucket;   /* -1: no pages (an empty object) */
	uint64_t offset;  /* bytes into the bucket file */
	uint64_t size;
	uint64_t csum;    /* COMMIT, LOOKUP: XXH3-64 of the content */
	/*
	 * COMMIT, LOOKUP: the file's inode number, and the epoch table's
	 * generation and the file's slot as they were when this descriptor
	 * was taken (struct ofs_batch_epochs); gen and epoch are 0 when the
	 * daemon has no table.
	 */
	uint64_t ino;
	uint64_t gen;
	uint64_t epoch;
};

/* Reply entry of DELETE and ABORT. */
struct ofs_batch_status {
	int32_t err;
	int32_t pad;
};

/* INFO flags. */
#define OFS_BATCH_INFO_VERIFY 1u  /* the store checks what it reads: so does get_many */
#define OFS_BATCH_INFO_EPOCHS 2u  /* ROOT/OFS_BATCH_EPOCH_NAME is kept */
#define OFS_BATCH_INFO_CSUM 4u    /* COMMIT takes OFS_BATCH_CSUM (older daemons: not sent) */

/* Reply of INFO; the bucket files are ROOT/bucket_XX.data (two lowercase hex digits). */
struct ofs_batch_info {
	uint64_t page_size;
	uint32_t bucket_count;
	uint32_t rootlen;
	uint32_t flags;
	uint32_t pad;
	char root[4096];
};

/*
 * The epoch table, ROOT/OFS_BATCH_EPOCH_NAME, mapped shared by the daemon
 * (read-write) and by clients (read-only).  The daemon adds 1 to
 * slot[ino % OFS_BATCH_EPOCH_SLOTS] whenever a name of file ino goes or
 * moves, or the file gets a new version, before the pages it leaves can
 * be used again; and to gen at every mount and unmount and whenever a
 * directory moves.  A descriptor taken with (gen, epoch) names the key's
 * current content for as long as live is 1 and both still hold: a client
 * may keep it and read with it without asking the daemon, and a read
 * made with it is good if they still hold after the read.
 */
#define OFS_BATCH_EPOCH_NAME "batch-epochs"
#define OFS_BATCH_EPOCH_MAGIC 0x6f66626570636873ull /* "ofbepchs" */
#define OFS_BATCH_EPOCH_SLOTS 4096u
/* How long a client uses a descriptor it kept, from the reply that gave it. */
#define OFS_BATCH_KEEP_S 5

struct ofs_batch_epochs {
	uint64_t magic;
	uint64_t live; /* 1 while a daemon serves the store */
	uint64_t gen;
	uint64_t pad[5];
	uint64_t slot[OFS_BATCH_EPOCH_SLOTS];
};

#endif
