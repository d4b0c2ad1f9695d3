/*
 * fsck_int.h: what the files of fsck (fsck.c, the driver and the pages
 * backend's checks; fsck_kv.c, a KV backend's; fsck_common.c, what both
 * call) share.  Nothing else includes it.
 */
#ifndef OFFLOADFS_FSCK_INT_H
#define OFFLOADFS_FSCK_INT_H

#include <stdint.h>
#include <stdio.h>

#include "fsck.h"
#include "kvb.h"
#include "meta.h"
#include "progress.h"

#define FSCK_BATCH 256 /* values per probe of a KV store */

/* A value waiting in a batch for its probe. */
struct fsck_val {
	struct meta_inode in;
	char *skey;
};

struct fsck {
	FILE *out, *err;         /* the report; why it cannot run, and progress */
	struct meta *meta;
	struct meta_geom geom;
	char backend[32];
	struct alloc *rebuilt;
	uint64_t *bucket_bytes; /* actual size of each bucket file */
	int *bucket_fd;         /* read-only, when some bucket file is damaged (no kvb) */
	uint64_t unreachable;   /* objects whose parent is gone or not a directory */
	uint64_t *orphans;      /* of those, the ones no tenant holds: deleted on --repair */
	size_t norphans, caporphans;
	struct kvb kvb;
	int have_kvb;
	uint64_t synced_gen;
	struct ofs_progress prog;
	uint64_t objects, overlaps, out_of_range, past_eof, bad_csum, unsynced_bad, io_errors,
		quarantined;
	uint64_t *corrupt;      /* inos to quarantine on --repair */
	size_t ncorrupt, capcorrupt;
	/* A KV store: what its values showed. */
	uint64_t values, missing, bad_length, keyless;
	uint64_t *keyed;        /* inos whose record names a value key, ascending */
	size_t nkeyed, capkeyed, kcur;
	struct fsck_val *batch; /* FSCK_BATCH of them */
	size_t nbatch;
};

/* Why the check cannot run, or a warning: on err after the program's name, as error(3). */
__attribute__((format(printf, 2, 3))) void fsck_err(struct fsck *f, const char *fmt, ...);
/* The object's key below its tenant, and its tenant's ino, for messages and repair. */
void fsck_key(struct meta *m, uint64_t ino, char *out, size_t outlen, uint64_t *tenant);
/*
 * 1 when every ancestor of in is a directory up to the top level: what the
 * mount can reach.  *tenant gets the tenant reached, 0 when none is.
 */
int fsck_reachable(struct fsck *f, const struct meta_inode *in, uint64_t *tenant);
/* ino fails a check: --repair quarantines it. */
void fsck_note_corrupt(struct fsck *f, uint64_t ino);
/* Move ino into <tenant>/lost+found as quarantined; never deletes it. */
int fsck_quarantine(struct fsck *f, uint64_t ino);
/*
 * The check of a KV backend's store, after the header (fsck_kv.c).
 * Returns the exit status.
 */
int fsck_kv(struct fsck *f, const struct ofs_config *cfg, int repair);

#endif
