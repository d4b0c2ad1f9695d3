/*
 * offloadctl: operator commands for an offloadfs store.
 *
 *   offloadctl fsck ROOT [--meta PATH] [--repair] [--ubsio-lib PATH]
 *                   [--ubsio-ssd-size N] [--ubsio-device N]
 *                                                    check an unmounted store
 *   offloadctl scrub MOUNTPOINT [--ubsio-*]          checksum pass on a mounted store
 *   offloadctl stats MOUNTPOINT [--buckets] [--json] live metrics of a mounted store
 *   offloadctl promote MOUNTPOINT FILE...            queue promotions to the DRAM tier
 *
 * fsck takes the same exclusive lock on ROOT as the daemon (so it refuses a
 * mounted store), never touches a database that is not ours, and without
 * --repair writes nothing.  It checks invariant 1 (committed runs disjoint,
 * in range and inside their bucket files; the clean snapshot equal to the
 * bitmaps rebuilt from the mappings, i.e. no leaked pages) and invariant 2
 * (every committed object's checksum), plus the schema version, the
 * geometry (the daemon's check), the bucket file sizes and that every
 * object is reachable.  --repair quarantines, frees leaked pages, deletes
 * objects no tenant holds and restores missing or truncated bucket files.  On a store of a KV backend (ubsio)
 * there are no pages or bucket files: it checks instead that every
 * committed value is in the KV store with its recorded length, and its
 * checksum (invariant 2); the library is loaded as the daemon loads it.
 * Exit 0 only when clean, 1 when problems were found, 2 when the check
 * could not run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "alloc.h"
#include "kvb.h"
#include "meta.h"
#include "store.h"

#define LOST_FOUND "lost+found"
#define FSCK_BATCH 256 /* values per probe of a KV store */

/* ---- progress: a bar on a terminal, a line every few seconds otherwise ---- */

struct progress {
	const char *what;
	uint64_t total, done;
	int tty;
	time_t last;
};

static void progress_show(struct progress *p, int final)
{
	time_t now = time(NULL);

	if (p->tty) {
		int width = 40, fill = p->total ? (int)(p->done * (uint64_t)width / p->total) : width;

		if (!final && now == p->last && p->done != p->total)
			return;
		fprintf(stderr, "\r%s [%.*s%*s] %" PRIu64 "/%" PRIu64 "%s", p->what, fill,
			"########################################", width - fill, "", p->done,
			p->total, final ? "\n" : "");
	} else {
		if (!final && now - p->last < 5)
			return;
		fprintf(stderr, "%s: %" PRIu64 "/%" PRIu64 "\n", p->what, p->done, p->total);
	}
	p->last = now;
	fflush(stderr);
}

/* Before a message: clear the bar, so the message starts a line; redrawn at the next step. */
static void progress_clear(struct progress *p)
{
	if (!p->tty)
		return;
	fflush(stdout);
	fprintf(stderr, "\r\033[K");
	p->last = 0;
}

/* ---- fsck ---- */

/* A value waiting in a batch for its probe. */
struct fsck_val {
	struct meta_inode in;
	char *skey;
};

struct fsck {
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
	struct progress prog;
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

/* The object's key below its tenant, and its tenant's ino, for messages and repair. */
static void fsck_key(struct meta *m, uint64_t ino, char *out, size_t outlen, uint64_t *tenant)
{
	size_t len;

	if (meta_path(m, ino, 0, out, outlen, &len, tenant))
		snprintf(out, outlen, "(inode %llu)", (unsigned long long)ino);
}

static void fsck_note_corrupt(struct fsck *f, uint64_t ino)
{
	if (f->ncorrupt == f->capcorrupt) {
		size_t cap = f->capcorrupt ? f->capcorrupt * 2 : 16;
		uint64_t *v = realloc(f->corrupt, cap * sizeof(*v));

		if (!v)
			return;
		f->corrupt = v;
		f->capcorrupt = cap;
	}
	f->corrupt[f->ncorrupt++] = ino;
}

static void fsck_note(uint64_t **v, size_t *n, size_t *cap, uint64_t ino)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		uint64_t *w = realloc(*v, c * sizeof(*w));

		if (!w)
			return;
		*v = w;
		*cap = c;
	}
	(*v)[(*n)++] = ino;
}

/*
 * 1 when every ancestor of in is a directory up to the top level: what the
 * mount can reach.  *tenant gets the tenant reached, 0 when none is.
 */
static int fsck_reachable(struct fsck *f, const struct meta_inode *in, uint64_t *tenant)
{
	struct meta_inode p;
	uint64_t ino = in->ino, parent = in->parent;
	int depth;

	*tenant = 0;
	for (depth = 0; depth < 4096; depth++) {
		if (parent == META_ROOT_INO) {
			*tenant = ino;
			return 1;
		}
		if (meta_get(f->meta, parent, &p) || !p.parent)
			return 0;
		if (!S_ISDIR(p.mode)) {
			/* Still under a tenant: quarantine can take it there. */
			uint64_t up = p.parent, t = parent;

			for (; depth < 4096 && up != META_ROOT_INO; depth++) {
				if (meta_get(f->meta, up, &p) || !p.parent || !S_ISDIR(p.mode))
					return 0;
				t = up;
				up = p.parent;
			}
			*tenant = up == META_ROOT_INO ? t : 0;
			return 0;
		}
		ino = parent;
		parent = p.parent;
	}
	return 0;
}

/* The object's checksum from the bucket file itself: when a damaged bucket stops kvb. */
static int fsck_csum_fd(struct fsck *f, const struct meta_inode *in, uint64_t *csum)
{
	XXH3_state_t *st = XXH3_createState();
	char *buf = malloc(1 << 20);
	uint64_t done = 0, off = in->page * f->geom.page_size;
	int fd = f->bucket_fd[in->bucket], ret = 0;

	if (!st || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(st);
	while (done < in->size) {
		size_t len = in->size - done < (1 << 20) ? (size_t)(in->size - done) : (1 << 20);
		ssize_t n = fd >= 0 ? pread(fd, buf, len, (off_t)(off + done)) : -1;

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto out;
		}
		XXH3_64bits_update(st, buf, (size_t)n);
		done += (uint64_t)n;
	}
	*csum = XXH3_64bits_digest(st);
out:
	free(buf);
	XXH3_freeState(st);
	return ret;
}

static int fsck_map(void *ctx, const struct meta_inode *in)
{
	struct fsck *f = ctx;
	char key[4096];
	uint64_t tenant;
	int ret;

	f->objects++;
	f->prog.done++;
	progress_show(&f->prog, 0);
	if (!fsck_reachable(f, in, &tenant)) {
		progress_clear(&f->prog);
		printf("inode %" PRIu64 ": unreachable: its parent %" PRIu64 " is gone or not a "
		       "directory; %s\n", in->ino, in->parent,
		       tenant ? "--repair moves it to its tenant's lost+found"
			      : "no tenant holds it: --repair deletes it and frees its pages");
		f->unreachable++;
		if (!tenant) {
			/* Its pages are left out of the rebuild: the repair frees them. */
			fsck_note(&f->orphans, &f->norphans, &f->caporphans, in->ino);
			return 0;
		}
		fsck_note_corrupt(f, in->ino);
	}
	if (in->state == META_QUARANTINED) {
		f->quarantined++;
		/* It yields shared pages to their intact owner, as the mount does. */
		if (in->bucket >= 0 && (uint32_t)in->bucket < f->geom.bucket_count)
			alloc_mark(&f->rebuilt[in->bucket], in->page, in->npages);
		return 0;
	}
	if (in->bucket < 0 || (uint32_t)in->bucket >= f->geom.bucket_count) {
		printf("inode %" PRIu64 ": bucket %d out of range\n", in->ino, in->bucket);
		f->out_of_range++;
		return 0;
	}
	ret = alloc_mark(&f->rebuilt[in->bucket], in->page, in->npages);
	if (ret) {
		fsck_key(f->meta, in->ino, key, sizeof(key), &tenant);
		printf("inode %" PRIu64 " '%s': bucket %d pages %" PRIu64 "+%" PRIu64 " %s\n",
		       in->ino, key, in->bucket, in->page, in->npages,
		       ret == -EEXIST ? "overlap another object" : "are past the end of the bucket");
		if (ret == -EEXIST)
			f->overlaps++;
		else
			f->out_of_range++;
	}
	if ((in->page + in->npages) * f->geom.page_size > f->bucket_bytes[in->bucket]) {
		fsck_key(f->meta, in->ino, key, sizeof(key), &tenant);
		printf("inode %" PRIu64 " '%s': ends past the end of bucket file %02x (%" PRIu64
		       " bytes)\n",
		       in->ino, key, in->bucket, f->bucket_bytes[in->bucket]);
		f->past_eof++;
		fsck_note_corrupt(f, in->ino);
		return 0;
	}
	if ((f->have_kvb || f->bucket_fd) && ret != -EINVAL) {
		struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };
		uint64_t csum;

		if (f->bucket_bytes[in->bucket] == UINT64_MAX)
			return 0; /* not a regular file: not read, reported with the buckets */
		ret = f->have_kvb ? kvb_checksum(&f->kvb, &map, &csum)
				  : fsck_csum_fd(f, in, &csum);
		if (ret) {
			printf("inode %" PRIu64 ": cannot read: %s\n", in->ino, strerror(-ret));
			f->io_errors++;
		} else if (csum != in->csum) {
			fsck_key(f->meta, in->ino, key, sizeof(key), &tenant);
			/* As recovery does: an empty durable version (-2) counts too. */
			if (in->gen > f->synced_gen && (in->prev_bucket >= 0 || in->prev_bucket == -2)) {
				/* Lost to a power cut before its barrier: the mount reverts it. */
				printf("inode %" PRIu64 " '%s': unsynced version does not match its "
				       "checksum; the next mount falls back to the last synced version\n",
				       in->ino, key);
				f->unsynced_bad++;
			} else {
				printf("inode %" PRIu64 " '%s': checksum mismatch (bucket %d offset %" PRIu64
				       " size %" PRIu64 ")\n",
				       in->ino, key, in->bucket, in->page * f->geom.page_size, in->size);
				f->bad_csum++;
				fsck_note_corrupt(f, in->ino);
			}
		}
	}
	return 0;
}

/* Move ino into <tenant>/lost+found as quarantined; never deletes it. */
static int fsck_quarantine(struct fsck *f, uint64_t ino)
{
	struct meta_inode in, lf;
	char key[4096], name[META_NAME_MAX + 1];
	uint64_t tenant;
	int ret;

	char lfname[sizeof(LOST_FOUND) + 16];
	int i;

	fsck_key(f->meta, ino, key, sizeof(key), &tenant);
	if (meta_get(f->meta, ino, &in))
		return -ENOENT;
	if (!tenant) {
		/* Under something that is not a directory: the tenant it still belongs to. */
		fsck_reachable(f, &in, &tenant);
		if (!tenant)
			return -ENOENT;
	}
	/* A user's own file (or anything but a directory) named lost+found: the next free name. */
	for (i = 0;; i++) {
		if (i)
			snprintf(lfname, sizeof(lfname), "%s.%d", LOST_FOUND, i);
		else
			snprintf(lfname, sizeof(lfname), "%s", LOST_FOUND);
		ret = meta_lookup(f->meta, tenant, lfname, strlen(lfname), &lf);
		if (ret || S_ISDIR(lf.mode) || i == 1000)
			break;
	}
	if (ret == -ENOENT) {
		memset(&lf, 0, sizeof(lf));
		lf.parent = tenant;
		lf.mode = 040700;
		lf.atime = lf.mtime = lf.ctime = (int64_t)time(NULL) * 1000000000;
		lf.bucket = -1;
		lf.prev_bucket = -1;
		ret = meta_insert(f->meta, &lf, lfname, strlen(lfname));
	} else if (!ret && !S_ISDIR(lf.mode)) {
		ret = -EEXIST;
	}
	if (ret)
		return ret;
	snprintf(name, sizeof(name), "%" PRIu64, ino);
	in.state = META_QUARANTINED;
	ret = meta_update(f->meta, &in);
	if (!ret)
		ret = meta_move(f->meta, ino, lf.ino, name, strlen(name));
	if (!ret)
		printf("repair: '%s' moved to %s/%s\n", key, lfname, name);
	return ret;
}

static int fsck_open(const char *root, const char *meta_path, int repair, struct fsck *f,
		     int *lock_fd)
{
	char err[1024], path[4096];
	struct stat st;
	int ret;

	if (stat(root, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "offloadctl: ROOT %s: %s\n", root,
			errno && stat(root, &st) ? strerror(errno) : "not a directory");
		return 2;
	}
	ret = ofs_store_lock(root, lock_fd, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "offloadctl: %s%s\n", err,
			ret == -EBUSY ? "; unmount it first" : "");
		return 2;
	}
	if (!meta_path) {
		snprintf(path, sizeof(path), "%s/%s", root, OFS_DB_NAME);
		meta_path = path;
	}
	/* Without --repair nothing is written: not even a schema upgrade. */
	/* On a full disk, the reserve is what lets sqlite replay its log and a repair write. */
	ofs_reserve_give_back(meta_path);
	ret = meta_open(meta_path, repair ? 0 : META_OPEN_NO_MIGRATE, &f->meta, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "offloadctl: %s: %s; not touched\n", meta_path, err);
		return 2;
	}
	ret = meta_geom_get(f->meta, &f->geom, f->backend, sizeof(f->backend));
	if (ret == -ENOENT) {
		fprintf(stderr, "offloadctl: %s: the store was never formatted\n", meta_path);
		return 2;
	}
	/* The daemon's own check: a geometry it refuses to mount is never "clean". */
	if (ret || ofs_geom_valid(&f->geom, err, sizeof(err))) {
		fprintf(stderr, "offloadctl: %s: damaged geometry record: %s; not touched\n",
			meta_path, ret ? "a value is not a positive number in range" : err);
		return 2;
	}
	if (strcmp(f->backend, "pages") && strcmp(f->backend, "ubsio")) {
		fprintf(stderr, "offloadctl: %s: the store uses backend '%s', which this build "
				"lacks; not touched\n", meta_path, f->backend);
		return 2;
	}
	return 0;
}

/* ---- fsck of a KV store (ubsio): every object's bytes are one value under its key ---- */

/*
 * The values the check covers: the current version of a committed object
 * in the namespace.  A new file's or an unlinked-open file's value is the
 * next mount's to drop; a quarantined one already is in lost+found.
 */
static int fsck_kv_wanted(const struct meta_inode *in, const char *skey)
{
	return skey && in->bucket >= 0 && in->parent && in->state != META_NEW;
}

/* First walk: which records name a key (in ino order), and how many values to check. */
static int fsck_kv_scan(void *ctx, const struct meta_inode *in, const char *skey,
			const char *prev_skey)
{
	struct fsck *f = ctx;

	(void)prev_skey;
	if (!fsck_kv_wanted(in, skey))
		return 0;
	if (f->nkeyed == f->capkeyed) {
		size_t cap = f->capkeyed ? f->capkeyed * 2 : 1024;
		uint64_t *v = realloc(f->keyed, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->keyed = v;
		f->capkeyed = cap;
	}
	f->keyed[f->nkeyed++] = in->ino;
	if (in->state == META_COMMITTED)
		f->values++;
	return 0;
}

/* The object's path with its tenant: two tenants may hold the same key. */
static void fsck_fullpath(struct meta *m, uint64_t ino, char *out, size_t outlen)
{
	size_t len;

	if (meta_path(m, ino, 1, out, outlen, &len, NULL))
		snprintf(out, outlen, "(inode %llu)", (unsigned long long)ino);
}

/*
 * A version committed after the last barrier whose value is gone or wrong
 * is what a power cut leaves: the next mount's recovery falls back to the
 * last durable version, empty ones included (prev_bucket -2).
 */
static int fsck_kv_reverts(const struct fsck *f, const struct meta_inode *in)
{
	return in->gen > f->synced_gen && (in->prev_bucket >= 0 || in->prev_bucket == -2);
}

/* A value that is missing, of another length or fails its checksum: what. */
static void fsck_kv_bad(struct fsck *f, const struct fsck_val *v, const char *what,
			uint64_t *count)
{
	char path[4096];

	progress_clear(&f->prog);
	fsck_fullpath(f->meta, v->in.ino, path, sizeof(path));
	if (fsck_kv_reverts(f, &v->in)) {
		printf("inode %" PRIu64 " '%s': unsynced version: %s (key '%s'); the next mount "
		       "falls back to the last synced version\n",
		       v->in.ino, path, what, v->skey);
		f->unsynced_bad++;
		return;
	}
	printf("inode %" PRIu64 " '%s': %s (key '%s', size %" PRIu64 ")\n", v->in.ino, path, what,
	       v->skey, v->in.size);
	(*count)++;
	fsck_note_corrupt(f, v->in.ino);
}

/*
 * Check a batch: one probe (batched existence and length calls) for all,
 * then the checksum of each value that is there with its length.
 */
static void fsck_kv_batch(struct fsck *f)
{
	struct kvb_map maps[FSCK_BATCH];
	int res[FSCK_BATCH], ret = 0;
	char path[4096];
	size_t i, n = f->nbatch;

	for (i = 0; i < n; i++) {
		const struct meta_inode *in = &f->batch[i].in;

		maps[i] = (struct kvb_map){ in->bucket, in->page, in->npages, in->size,
					    f->batch[i].skey };
		res[i] = 0;
	}
	/* Without a probe, the checksum's fetch finds the missing ones (as read errors). */
	if (n && kvb_has_probe(&f->kvb))
		ret = kvb_probe(&f->kvb, maps, n, res);
	for (i = 0; i < n; i++) {
		struct fsck_val *v = &f->batch[i];
		int r = ret ? ret : res[i];
		uint64_t csum;

		f->prog.done++;
		progress_show(&f->prog, 0);
		if (r == -ENOENT) {
			fsck_kv_bad(f, v, "value missing from the KV store", &f->missing);
		} else if (r == -EBADMSG) {
			fsck_kv_bad(f, v, "value has the wrong length", &f->bad_length);
		} else if (r) {
			/* The store could not tell: not a verdict on the value. */
			progress_clear(&f->prog);
			fsck_fullpath(f->meta, v->in.ino, path, sizeof(path));
			printf("inode %" PRIu64 " '%s': cannot probe key '%s': %s\n", v->in.ino,
			       path, v->skey, strerror(-r));
			f->io_errors++;
		} else if ((r = kvb_checksum(&f->kvb, &maps[i], &csum))) {
			progress_clear(&f->prog);
			fsck_fullpath(f->meta, v->in.ino, path, sizeof(path));
			printf("inode %" PRIu64 " '%s': cannot read key '%s': %s\n", v->in.ino, path,
			       v->skey, strerror(-r));
			f->io_errors++;
		} else if (csum != v->in.csum) {
			fsck_kv_bad(f, v, "checksum mismatch", &f->bad_csum);
		}
		free(v->skey);
		v->skey = NULL;
	}
	f->nbatch = 0;
}

/* Second walk: batch up the values to check. */
static int fsck_kv_value(void *ctx, const struct meta_inode *in, const char *skey,
			 const char *prev_skey)
{
	struct fsck *f = ctx;
	struct fsck_val *v;

	(void)prev_skey;
	if (!fsck_kv_wanted(in, skey) || in->state != META_COMMITTED)
		return 0;
	v = &f->batch[f->nbatch];
	v->in = *in;
	/* skey lives in the walk's buffer, rewritten by the next row. */
	v->skey = strdup(skey);
	if (!v->skey)
		return -ENOMEM;
	if (++f->nbatch == FSCK_BATCH)
		fsck_kv_batch(f);
	return 0;
}

/* Third walk, over every object with a value: counts, and records that lost their key. */
static int fsck_kv_map(void *ctx, const struct meta_inode *in)
{
	struct fsck *f = ctx;
	char path[4096];

	f->objects++;
	if (in->state == META_QUARANTINED) {
		f->quarantined++;
		return 0;
	}
	if (in->bucket < 0)
		return 0;
	/* Both walks go in ino order. */
	while (f->kcur < f->nkeyed && f->keyed[f->kcur] < in->ino)
		f->kcur++;
	if (f->kcur < f->nkeyed && f->keyed[f->kcur] == in->ino)
		return 0;
	/* The daemon cannot read it: without its key the value cannot be named. */
	fsck_fullpath(f->meta, in->ino, path, sizeof(path));
	printf("inode %" PRIu64 " '%s': records a value (id %" PRIu64 ", %" PRIu64
	       " bytes) but no key\n",
	       in->ino, path, in->page, in->size);
	f->keyless++;
	fsck_note_corrupt(f, in->ino);
	return 0;
}

/* Lines left in the backend's journal of puts and deletes, or a negative errno. */
static long fsck_kv_journal(const char *root)
{
	char path[4096], buf[65536];
	long lines = 0;
	ssize_t n, i;
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s", root, KVB_UBSIO_JOURNAL);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (i = 0; i < n; i++)
			lines += buf[i] == '\n';
	err = errno;
	close(fd);
	return n < 0 ? -err : lines;
}

/*
 * fsck of a ubsio store, after the header: the bitmap and bucket file
 * checks do not apply (the KV store allocates); every committed value is
 * probed for presence and length, then checksummed.  Values no record
 * points at cannot be found (nothing lists a KV store): the journal names
 * those that may exist, and the next mount deletes them.  Returns the exit
 * status.
 */
static int fsck_kv(struct fsck *f, const struct ofs_config *cfg, int repair)
{
	struct kvb_ubsio_config uc = cfg->ubsio;
	char libbuf[PATH_MAX];
	char err[1024];
	int problems = 0, ret;
	long lines;

	lines = fsck_kv_journal(cfg->root);
	if (lines > 0)
		printf("%s: %ld line(s); the next mount deletes the values they name that no "
		       "record points at\n",
		       KVB_UBSIO_JOURNAL, lines);
	else if (lines < 0)
		printf("%s: cannot read: %s\n", KVB_UBSIO_JOURNAL, strerror((int)-lines));
	/* Before loading the library: a record that cannot be read needs no KV store to tell. */
	ret = meta_foreach_value(f->meta, fsck_kv_scan, f);
	if (ret) {
		fprintf(stderr, "offloadctl: %s: cannot read the value keys: %s\n", cfg->root,
			ret == -ENOMEM ? strerror(ENOMEM) : meta_errmsg(f->meta));
		return 2;
	}
	uc.page_size = f->geom.page_size;
	/* Options not given: the library and Init the last mount used (store settings). */
	ofs_ubsio_defaults(f->meta, &uc, libbuf, sizeof(libbuf));
	if (uc.lib && strchr(uc.lib, '/') && uc.lib[0] != '/') {
		fprintf(stderr, "offloadctl: %s: the store records a relative ubsio_lib '%s': "
				"give --ubsio-lib with an absolute path\n", cfg->root, uc.lib);
		return 2;
	}
	/* Without --repair fsck writes nothing, not even an empty journal. */
	uc.readonly = !repair;
	ret = kvb_ubsio_init(&f->kvb, cfg->root, &uc, f->meta, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "offloadctl: %s: %s%s\n", cfg->root, err,
			ret == -ENOENT && !cfg->ubsio.lib ? " (give its path with --ubsio-lib)" : "");
		return 2;
	}
	/*
	 * Init read the records' keys (the probe looks values up there).
	 * Never start: it replays the journal and deletes values, not what a
	 * check may do.
	 */
	f->have_kvb = 1;
	f->batch = calloc(FSCK_BATCH, sizeof(*f->batch));
	if (!f->batch) {
		fprintf(stderr, "offloadctl: out of memory\n");
		return 2;
	}
	f->prog.what = "fsck";
	f->prog.total = f->values;
	f->prog.tty = isatty(2);
	ret = meta_foreach_value(f->meta, fsck_kv_value, f);
	if (!ret)
		fsck_kv_batch(f);
	progress_show(&f->prog, 1);
	if (!ret)
		ret = meta_foreach_mapping(f->meta, fsck_kv_map, f);
	if (ret) {
		printf("cannot read the mappings: %s\n",
		       ret == -ENOMEM ? strerror(ENOMEM) : meta_errmsg(f->meta));
		problems++;
	}
	while (f->nbatch)
		free(f->batch[--f->nbatch].skey);
	problems += (int)(f->missing + f->bad_length + f->bad_csum + f->keyless + f->io_errors);
	printf("objects %" PRIu64 ", missing values %" PRIu64 ", wrong length %" PRIu64
	       ", checksum mismatches %" PRIu64 ", records without a key %" PRIu64
	       ", read errors %" PRIu64 ", quarantined %" PRIu64 "\n",
	       f->objects, f->missing, f->bad_length, f->bad_csum, f->keyless, f->io_errors,
	       f->quarantined);

	if (repair && problems) {
		int fixed = 1;
		size_t i;

		ret = meta_begin(f->meta);
		for (i = 0; !ret && i < f->ncorrupt; i++)
			ret = fsck_quarantine(f, f->corrupt[i]);
		if (!ret)
			ret = meta_commit(f->meta);
		else
			meta_rollback(f->meta);
		if (ret) {
			printf("repair failed: %s; nothing changed\n", meta_errmsg(f->meta));
			fixed = 0;
		}
		/* A value the store could not answer for may be intact: left where it is. */
		if (f->io_errors)
			printf("repair: objects the KV store could not answer for are left in "
			       "place; run fsck again once it can\n");
		if (fixed && !f->io_errors && problems == (int)f->ncorrupt)
			problems = 0;
	}
	printf("%s\n", problems ? "fsck: PROBLEMS FOUND" : "fsck: clean");
	return problems ? 1 : 0;
}

/*
 * Disk blocks held by pages no object uses (a free whose punch a crash
 * cut short, a store written before frees were punched).  Reported, not a
 * problem; punched with punch set, which the caller allows only for a
 * cleanly unmounted store: after a crash, recovery may still fall back to
 * a previous version in pages no record holds.
 */
static void fsck_free_space(struct fsck *f, const char *root, uint64_t npages, int punch)
{
	uint64_t ps = f->geom.page_size, held = 0, punched = 0;
	char path[4096], name[32];
	uint32_t b;

	for (b = 0; b < f->geom.bucket_count; b++) {
		off_t data = 0, hole;
		int fd;

		kvb_bucket_name(b, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", root, name);
		fd = open(path, (punch ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		while ((data = lseek(fd, data, SEEK_DATA)) >= 0) {
			uint64_t p, start = 0, run = 0;

			hole = lseek(fd, data, SEEK_HOLE);
			if (hole <= data)
				break;
			/* Page by page: a page partly in the extent holds blocks too. */
			for (p = (uint64_t)data / ps; p * ps < (uint64_t)hole && p < npages; p++) {
				int unused = !alloc_test(&f->rebuilt[b], p);
				int last = (p + 1) * ps >= (uint64_t)hole || p + 1 == npages;

				if (unused) {
					if (!run)
						start = p;
					run++;
					held++;
				}
				if (run && (!unused || last)) {
					if (punch && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
							       (off_t)(start * ps), (off_t)(run * ps)) == 0)
						punched += run;
					run = 0;
				}
			}
			data = hole;
		}
		close(fd);
	}
	printf("free pages holding disk blocks: %" PRIu64 " (%" PRIu64 " KiB)%s\n", held,
	       held * ps / 1024,
	       punch ? "" : held ? "; fsck --repair of a cleanly unmounted store gives them back" : "");
	if (punch)
		printf("repair: gave %" PRIu64 " free page(s) back to the filesystem\n", punched);
}

static int cmd_fsck(const struct ofs_config *cfg, int repair)
{
	const char *root = cfg->root;
	struct fsck f = { 0 };
	struct kvb_pages_geom pg;
	char err[1024];
	uint64_t npages, snap_diff = 0, leaked = 0, missing = 0, n_new = 0, n_orphans = 0;
	uint64_t files = 0;
	int lock_fd = -1, clean = 0, problems = 0, ret, have_snapshot = 1, bucket_problems = 0;
	int restorable = 0, unrepairable = 0;
	uint32_t b;

	ret = fsck_open(root, cfg->meta_path, repair, &f, &lock_fd);
	if (ret)
		goto out;
	meta_clean_get(f.meta, &clean);
	meta_synced_gen(f.meta, &f.synced_gen);
	meta_count_files(f.meta, &files);
	if (!strcmp(f.backend, "ubsio"))
		printf("store %s: backend ubsio, page_size %" PRIu64 ", schema %d, %s\n", root,
		       f.geom.page_size, META_SCHEMA_VERSION,
		       clean ? "cleanly unmounted" : "not cleanly unmounted");
	else
		printf("store %s: page_size %" PRIu64 ", bucket_size %" PRIu64 ", bucket_count %u, "
		       "schema %d, %s\n",
		       root, f.geom.page_size, f.geom.bucket_size, f.geom.bucket_count,
		       META_SCHEMA_VERSION, clean ? "cleanly unmounted" : "not cleanly unmounted");
	if (!clean && meta_count_unsettled(f.meta, &n_new, &n_orphans) == 0 && (n_new || n_orphans))
		printf("unfinished writes %" PRIu64 ", unlinked-open files %" PRIu64
		       ": the next mount drops them\n",
		       n_new, n_orphans);
	if (!strcmp(f.backend, "ubsio")) {
		ret = fsck_kv(&f, cfg, repair);
		goto out;
	}
	if (cfg->ubsio.lib || cfg->ubsio.new_init >= 0 ||
	    cfg->ubsio.device_id != KVB_UBSIO_DEVICE_UNSET)
		fprintf(stderr, "offloadctl: the store uses the pages backend: --ubsio-* ignored\n");

	/*
	 * Bucket files: present, regular, at least bucket_size.  Never through
	 * a symbolic link.  A missing or truncated one is what --repair
	 * restores: objects past its end are quarantined, the rest checked.
	 */
	f.bucket_bytes = calloc(f.geom.bucket_count, sizeof(*f.bucket_bytes));
	for (b = 0; b < f.geom.bucket_count; b++) {
		struct stat st;
		char name[32];

		kvb_bucket_name(b, name, sizeof(name));
		if (fstatat(lock_fd, name, &st, AT_SYMLINK_NOFOLLOW)) {
			printf("%s: missing\n", name);
			bucket_problems++;
			restorable++;
		} else if (!S_ISREG(st.st_mode)) {
			printf("%s: %s, not a regular file; remove it (objects in it are not "
			       "checked)\n", name, S_ISLNK(st.st_mode) ? "a symbolic link" : "not a file");
			f.bucket_bytes[b] = UINT64_MAX;
			bucket_problems++;
			unrepairable++;
		} else {
			f.bucket_bytes[b] = (uint64_t)st.st_size;
			if ((uint64_t)st.st_size < f.geom.bucket_size) {
				printf("%s: %lld bytes, expected %" PRIu64 " (truncated)\n", name,
				       (long long)st.st_size, f.geom.bucket_size);
				bucket_problems++;
				restorable++;
			}
		}
	}
	problems += bucket_problems;
	pg.page_size = f.geom.page_size;
	pg.bucket_size = f.geom.bucket_size;
	pg.bucket_count = f.geom.bucket_count;
	pg.keep_free = 0;
	if (!bucket_problems) {
		if (kvb_pages_init(&f.kvb, root, &pg, 0, err, sizeof(err)) == 0) {
			f.have_kvb = 1;
		} else {
			printf("cannot open the bucket files: %s\n", err);
			problems++;
		}
	} else {
		/* The intact bytes are still checked, straight from the files. */
		f.bucket_fd = malloc(f.geom.bucket_count * sizeof(*f.bucket_fd));
		for (b = 0; f.bucket_fd && b < f.geom.bucket_count; b++) {
			char name[32];

			kvb_bucket_name(b, name, sizeof(name));
			f.bucket_fd[b] = f.bucket_bytes[b] == UINT64_MAX ? -1
				: openat(lock_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		}
	}

	npages = f.geom.bucket_size / f.geom.page_size;
	f.rebuilt = calloc(f.geom.bucket_count, sizeof(*f.rebuilt));
	for (b = 0; b < f.geom.bucket_count; b++)
		alloc_init(&f.rebuilt[b], npages);
	f.prog.what = "fsck";
	f.prog.total = files;
	f.prog.tty = isatty(2);
	ret = meta_foreach_mapping(f.meta, fsck_map, &f);
	progress_show(&f.prog, 1);
	if (ret) {
		printf("cannot read the mappings: %s\n", meta_errmsg(f.meta));
		problems++;
	}

	/* The snapshot a clean unmount left must equal the rebuild, bit for bit. */
	if (clean) {
		uint64_t *w = malloc(f.rebuilt[0].nwords * sizeof(uint64_t));

		for (b = 0; b < f.geom.bucket_count && w; b++) {
			struct alloc snap;
			uint64_t p;

			if (meta_bitmap_load(f.meta, b, npages, w, f.rebuilt[b].nwords) ||
			    alloc_init(&snap, npages)) {
				have_snapshot = 0;
				break;
			}
			if (alloc_load(&snap, w, f.rebuilt[b].nwords)) {
				have_snapshot = 0;
				alloc_release(&snap);
				break;
			}
			if (!alloc_equal(&snap, &f.rebuilt[b])) {
				snap_diff++;
				for (p = 0; p < npages; p++) {
					int s = alloc_test(&snap, p), r = alloc_test(&f.rebuilt[b], p);

					leaked += s && !r;
					missing += !s && r;
				}
			}
			alloc_release(&snap);
		}
		free(w);
		if (!have_snapshot) {
			printf("clean flag set but the bitmap snapshot is missing or malformed\n");
			problems++;
		} else if (snap_diff) {
			printf("bitmap snapshot differs from the mappings in %" PRIu64 " bucket(s): %" PRIu64
			       " leaked page(s), %" PRIu64 " page(s) in use but free in the snapshot\n",
			       snap_diff, leaked, missing);
			problems++;
		} else {
			printf("bitmap snapshot: identical to the bitmaps rebuilt from the mappings\n");
		}
	}
	if (!bucket_problems)
		fsck_free_space(&f, root, npages, repair && clean);
	problems += (int)(f.overlaps + f.out_of_range + f.past_eof + f.bad_csum + f.io_errors +
			  f.unreachable);
	printf("objects %" PRIu64 ", overlaps %" PRIu64 ", out of range %" PRIu64
	       ", past end of bucket file %" PRIu64 ", checksum mismatches %" PRIu64
	       ", read errors %" PRIu64 ", unreachable %" PRIu64 ", leaked pages %" PRIu64
	       ", quarantined %" PRIu64 "%s\n",
	       f.objects, f.overlaps, f.out_of_range, f.past_eof, f.bad_csum, f.io_errors,
	       f.unreachable, leaked, f.quarantined,
	       f.have_kvb || f.bucket_fd ? "" : " (checksums not checked)");

	if (repair && problems) {
		size_t i;
		int fixed = 1;

		ret = meta_begin(f.meta);
		for (i = 0; !ret && i < f.ncorrupt; i++)
			ret = fsck_quarantine(&f, f.corrupt[i]);
		/* Nothing can reach them: deleted, their pages (left out of the rebuild) freed. */
		for (i = 0; !ret && i < f.norphans; i++) {
			ret = meta_delete(f.meta, f.orphans[i]);
			if (!ret)
				printf("repair: unreachable inode %" PRIu64 " deleted\n", f.orphans[i]);
		}
		/* Leaked pages: the snapshot is replaced by the rebuild (or the mount rebuilds). */
		if (!ret && clean && (snap_diff || !have_snapshot)) {
			for (b = 0; !ret && b < f.geom.bucket_count; b++)
				ret = meta_bitmap_save(f.meta, b, npages, f.rebuilt[b].words,
						       f.rebuilt[b].nwords);
			if (!ret)
				printf("repair: freed %" PRIu64 " leaked page(s)\n", leaked);
		}
		if (!ret)
			ret = meta_commit(f.meta);
		else
			meta_rollback(f.meta);
		if (ret) {
			printf("repair failed: %s; nothing changed\n", meta_errmsg(f.meta));
			fixed = 0;
		}
		if (f.overlaps && fixed)
			printf("repair: overlapping objects that failed their checksum are in "
			       "lost+found; they yield the shared pages to the intact object\n");
		/* After the quarantine is durable: the zeros it brings back then belong to nobody. */
		for (b = 0; fixed && restorable && b < f.geom.bucket_count; b++) {
			char name[32];
			int fd;

			if (f.bucket_bytes[b] >= f.geom.bucket_size)
				continue;
			kvb_bucket_name(b, name, sizeof(name));
			fd = openat(lock_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 || ftruncate(fd, (off_t)f.geom.bucket_size) || fsync(fd)) {
				printf("repair: cannot restore %s to %" PRIu64 " bytes: %s\n", name,
				       f.geom.bucket_size, strerror(errno));
				unrepairable++;
			} else {
				printf("repair: %s restored to %" PRIu64 " bytes; the objects it lost "
				       "were moved to lost+found\n", name, f.geom.bucket_size);
			}
			if (fd >= 0)
				close(fd);
		}
		if (fixed && restorable)
			fsync(lock_fd);
		if (fixed && !unrepairable && !f.io_errors &&
		    f.overlaps + f.out_of_range <= f.ncorrupt)
			problems = 0;
	}
	printf("%s\n", problems ? "fsck: PROBLEMS FOUND" : "fsck: clean");
	ret = problems ? 1 : 0;
out:
	for (b = 0; f.rebuilt && b < f.geom.bucket_count; b++)
		alloc_release(&f.rebuilt[b]);
	free(f.rebuilt);
	free(f.bucket_bytes);
	for (b = 0; f.bucket_fd && b < f.geom.bucket_count; b++)
		if (f.bucket_fd[b] >= 0)
			close(f.bucket_fd[b]);
	free(f.bucket_fd);
	free(f.orphans);
	free(f.corrupt);
	free(f.keyed);
	free(f.batch);
	kvb_release(&f.kvb);
	meta_close(f.meta);
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}

/*
 * ---- scrub: read every object straight from where it is stored (its
 * bucket file, or its value in the KV store), as another node would ----
 */

struct scrub {
	uint64_t files, bytes, bad, errors, skipped, dropped;
	uint64_t unchecked; /* objects or directories that could not be read (among errors) */
	struct kvb_ubsio_config uc;
	int ubsio;          /* 1: library loaded, -1: could not be */
	struct progress prog;
};

static int scrub_parse(const char *d, char *path, size_t plen, uint64_t *off, uint64_t *size)
{
	const char *fp = strstr(d, "file_path="), *o = strstr(d, "\noffset="),
		   *s = strstr(d, "\nobject_size=");
	size_t n;

	if (!fp || !o || !s)
		return -EINVAL;
	fp += strlen("file_path=");
	n = strcspn(fp, "\n");
	if (n >= plen)
		return -ENAMETOOLONG;
	memcpy(path, fp, n);
	path[n] = '\0';
	if (kvb_desc_unescape(path))
		return -EINVAL;
	*off = strtoull(o + strlen("\noffset="), NULL, 10);
	*size = strtoull(s + strlen("\nobject_size="), NULL, 10);
	return 0;
}

/*
 * A KV store evicts by itself: a value missing from it is a cache miss, and
 * the file goes, through the mount, as the daemon drops it at a read.  Not
 * when a new version was committed meanwhile (its checksum changed).
 */
static void scrub_missing(struct scrub *sc, const char *file, const char *show,
			  const char *key, const char *sumtxt)
{
	char again[64];
	ssize_t m = getxattr(file, "user.offload.checksum", again, sizeof(again) - 1);

	if (m > 0 && (again[m] = '\0', strcmp(again, sumtxt))) {
		sc->files--;
		sc->skipped++;
	} else if (unlink(file) == 0) {
		printf("%s: value '%s' missing from the KV store (evicted): file dropped\n", show,
		       key);
		sc->dropped++;
	} else if (errno != ENOENT) {
		printf("%s: value '%s' missing from the KV store; cannot drop the file: %s\n",
		       show, key, strerror(errno));
		sc->errors++;
	}
}

/* The value under the descriptor's key, fetched through the library. */
static void scrub_value(struct scrub *sc, const char *file, const char *show, const char *desc,
			const char *sumtxt)
{
	const char *k = strstr(desc, "\nkey="), *s = strstr(desc, "\nobject_size=");
	char key[3 * META_SKEY_MAX + 1], err[1024], again[64];
	unsigned char *buf = NULL;
	uint64_t size;
	size_t n;
	ssize_t got;

	if (!k || !s || (n = strcspn(k + 5, "\n")) > 3 * META_SKEY_MAX) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		return;
	}
	memcpy(key, k + 5, n);
	key[n] = '\0';
	if (kvb_desc_unescape(key)) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		return;
	}
	size = strtoull(s + strlen("\nobject_size="), NULL, 10);
	sc->files++;
	if (size == 0)
		return;
	if (!sc->ubsio) {
		sc->ubsio = kvb_ubsio_client_open(&sc->uc, err, sizeof(err)) ? -1 : 1;
		if (sc->ubsio < 0)
			printf("%s: %s%s\n", show, err,
			       sc->uc.lib ? "" : " (give its path with --ubsio-lib)");
	}
	if (sc->ubsio < 0) {
		sc->errors++;
		return;
	}
	got = kvb_ubsio_client_get(key, &buf);
	if (got == -ENOENT) {
		scrub_missing(sc, file, show, key, sumtxt);
	} else if (got < 0) {
		printf("%s: value '%s': %s\n", show, key, strerror((int)-got));
		sc->errors++;
	} else if ((uint64_t)got != size) {
		printf("%s: value '%s' holds %zd bytes, the record says %" PRIu64 "\n", show, key,
		       got, size);
		sc->bad++;
	} else if (XXH3_64bits(buf, (size_t)got) != strtoull(sumtxt, NULL, 16)) {
		/* A new version committed meanwhile is not a mismatch. */
		ssize_t m = getxattr(file, "user.offload.checksum", again, sizeof(again) - 1);

		if (m > 0 && (again[m] = '\0', strcmp(again, sumtxt))) {
			sc->files--;
			sc->skipped++;
		} else {
			printf("%s: checksum mismatch (value '%s', %" PRIu64 " bytes)\n", show, key,
			       size);
			sc->bad++;
		}
	} else {
		sc->bytes += size;
	}
	free(buf);
}

/* file: a path for the xattr calls (short: through a directory descriptor); show: for messages. */
static void scrub_file(struct scrub *sc, const char *file, const char *show)
{
	char desc[3 * 4096 + 128], sumtxt[64], bucket[4096];
	uint64_t off, size, want, done = 0;
	XXH3_state_t *st;
	ssize_t n;
	char *buf;
	int fd;

	n = getxattr(file, "user.offload.descriptor", desc, sizeof(desc) - 1);
	if (n < 0 && errno == ENODATA) {
		/* Being written, or quarantined: nothing committed to check. */
		sc->skipped++;
		return;
	}
	if (n < 0) {
		printf("%s: not checked: cannot read its descriptor: %s\n", show, strerror(errno));
		sc->errors++;
		sc->unchecked++;
		return;
	}
	desc[n] = '\0';
	n = getxattr(file, "user.offload.checksum", sumtxt, sizeof(sumtxt) - 1);
	if (n >= 0 && strstr(desc, "store=ubsio\n") == desc) {
		sumtxt[n] = '\0';
		scrub_value(sc, file, show, desc, sumtxt);
		return;
	}
	if (n < 0 || scrub_parse(desc, bucket, sizeof(bucket), &off, &size)) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		return;
	}
	sumtxt[n] = '\0';
	want = strtoull(sumtxt, NULL, 16);
	sc->files++;
	if (size == 0)
		return;
	fd = open(bucket, O_RDONLY | O_CLOEXEC);
	buf = malloc(1 << 20);
	st = XXH3_createState();
	if (fd < 0 || !buf || !st) {
		printf("%s: cannot open %s: %s\n", show, bucket, strerror(errno));
		sc->errors++;
		goto out;
	}
	XXH3_64bits_reset(st);
	while (done < size) {
		size_t len = size - done < (1 << 20) ? (size_t)(size - done) : (1 << 20);

		n = pread(fd, buf, len, (off_t)(off + done));
		if (n <= 0) {
			printf("%s: read error at %s offset %" PRIu64 "\n", show, bucket, off + done);
			sc->errors++;
			goto out;
		}
		XXH3_64bits_update(st, buf, (size_t)n);
		done += (uint64_t)n;
	}
	sc->bytes += size;
	if (XXH3_64bits_digest(st) != want) {
		/* A writer may have committed a new version meanwhile: check again. */
		char again[64];

		n = getxattr(file, "user.offload.checksum", again, sizeof(again) - 1);
		if (n > 0) {
			again[n] = '\0';
			if (strcmp(again, sumtxt)) {
				sc->files--;
				sc->bytes -= size;
				sc->skipped++;
				goto out;
			}
		}
		printf("%s: checksum mismatch (%s offset %" PRIu64 " size %" PRIu64 ")\n", show,
		       bucket, off, size);
		sc->bad++;
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	XXH3_freeState(st);
}

/*
 * Relative to each directory's descriptor: a path longer than PATH_MAX is
 * checked like any other.  What cannot be checked is an error, named.
 */
static void scrub_dir(struct scrub *sc, int dfd, const char *dir)
{
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d) {
		printf("%s: not checked: %s\n", dir, strerror(errno));
		sc->errors++;
		sc->unchecked++;
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		char xpath[64 + NAME_MAX], *show;
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&show, "%s/%s", dir, de->d_name) < 0) {
			printf("%s: out of memory\n", dir);
			sc->errors++;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			printf("%s: not checked: %s\n", show, strerror(errno));
			sc->errors++;
			sc->unchecked++;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				printf("%s: not checked: %s\n", show, strerror(errno));
				sc->errors++;
				sc->unchecked++;
			} else {
				scrub_dir(sc, sub, show);
			}
		} else if (S_ISREG(st.st_mode)) {
			snprintf(xpath, sizeof(xpath), "/proc/self/fd/%d/%s", dirfd(d), de->d_name);
			scrub_file(sc, xpath, show);
			sc->prog.done++;
			progress_show(&sc->prog, 0);
		}
		free(show);
	}
	closedir(d);
}

/* 0 when mnt is an offloadfs mount point, else a message and 2. */
static int check_mount(const char *mnt)
{
	char real[4096], line[8192];
	int found = 0;
	FILE *mounts;

	if (!realpath(mnt, real)) {
		fprintf(stderr, "offloadctl: %s: %s\n", mnt, strerror(errno));
		return 2;
	}
	mounts = fopen("/proc/mounts", "r");
	while (mounts && fgets(line, sizeof(line), mounts)) {
		char dev[4096], dir[4096], type[256];

		if (sscanf(line, "%4095s %4095s %255s", dev, dir, type) == 3 &&
		    !strcmp(dir, real) && !strcmp(type, "fuse.offloadfs"))
			found = 1;
	}
	if (mounts)
		fclose(mounts);
	if (!found) {
		fprintf(stderr, "offloadctl: %s is not an offloadfs mount point\n", mnt);
		return 2;
	}
	return 0;
}

/*
 * Options scrub was not given default to how the daemon reached the
 * library (offloadfs_ubsio_info in the mount's metrics): the same library,
 * Init variant and device.
 */
static void scrub_ubsio_defaults(const char *mnt, struct kvb_ubsio_config *uc, char *lib,
				 size_t liblen)
{
	static char text[1 << 20];
	const char *p, *q;
	ssize_t len = getxattr(mnt, "user.offload.metrics", text, sizeof(text) - 1);
	size_t n = 0;

	if (len <= 0)
		return;
	text[len] = '\0';
	p = strstr(text, "\noffloadfs_ubsio_info{lib=\"");
	if (!p)
		return;
	for (p += strlen("\noffloadfs_ubsio_info{lib=\""); *p && *p != '"' && n + 1 < liblen; p++) {
		if (*p == '\\' && p[1])
			p++;
		lib[n++] = *p == 'n' && p[-1] == '\\' ? '\n' : *p;
	}
	lib[n] = '\0';
	if (!uc->lib && n)
		uc->lib = lib;
	q = strstr(p, "init=\"");
	if (q && uc->new_init < 0) {
		q += strlen("init=\"");
		uc->new_init = strncmp(q, "old\"", 4) != 0;
		if (uc->new_init)
			uc->ssd_size = strtoull(q, NULL, 10);
	}
	q = strstr(p, "device=\"");
	if (q && uc->device_id == KVB_UBSIO_DEVICE_UNSET)
		uc->device_id = atoi(q + strlen("device=\""));
	if (uc->device_id == KVB_UBSIO_DEVICE_UNSET)
		uc->device_id = -1;
}

static int cmd_scrub(const char *mnt, const struct kvb_ubsio_config *uc)
{
	struct scrub sc = { 0 };
	char lib[PATH_MAX];

	if (check_mount(mnt))
		return 2;
	sc.uc = *uc;
	scrub_ubsio_defaults(mnt, &sc.uc, lib, sizeof(lib));
	sc.prog.what = "scrub";
	sc.prog.tty = isatty(2);
	{
		int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0) {
			fprintf(stderr, "offloadctl: %s: %s\n", mnt, strerror(errno));
			return 2;
		}
		scrub_dir(&sc, fd, mnt);
	}
	progress_show(&sc.prog, 1);
	printf("scrub %s: %" PRIu64 " files, %" PRIu64 " bytes checked, %" PRIu64
	       " checksum mismatches, %" PRIu64 " errors, %" PRIu64 " not checked, %" PRIu64
	       " skipped (being written), %" PRIu64 " dropped (value evicted from the KV store)\n",
	       mnt, sc.files, sc.bytes, sc.bad, sc.errors, sc.unchecked, sc.skipped, sc.dropped);
	printf("%s\n", sc.bad || sc.errors ? "scrub: PROBLEMS FOUND" : "scrub: clean");
	if (sc.ubsio > 0)
		kvb_ubsio_client_close();
	return sc.bad || sc.errors ? 1 : 0;
}

/* ---- stats: the daemon's live metrics (user.offload.metrics on the root) ---- */

struct sample {
	char name[128], labels[128];
	double v;
};

static double find(const struct sample *s, size_t n, const char *name, const char *labels)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(s[i].name, name) && !strcmp(s[i].labels, labels ? labels : ""))
			return s[i].v;
	return 0;
}

static void human(double bytes, char *out, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;

	while (bytes >= 1024 && i < 5) {
		bytes /= 1024;
		i++;
	}
	snprintf(out, len, "%.1f %s", bytes, u[i]);
}

/*
 * The summary first; the per-bucket table (256 rows on a default store) only
 * with --buckets.  --json always has every bucket.
 */
static int cmd_stats(const char *mnt, int json, int buckets)
{
	static char text[1 << 17];
	struct sample *s = NULL;
	size_t n = 0, cap = 0, i;
	ssize_t len;
	char *line, *save = NULL, a[32], b[32], c[32];
	double ps, cap_bytes, used = 0, fr = 0, hits, misses;
	double used_min = 0, used_max = 0, frag_max = 0, run_max = 0;
	unsigned bk, nb, frag_bk = 0, run_bk = 0;

	if (check_mount(mnt))
		return 2;
	len = getxattr(mnt, "user.offload.metrics", text, sizeof(text) - 1);
	if (len < 0) {
		fprintf(stderr, "offloadctl: %s: cannot read the metrics: %s\n", mnt, strerror(errno));
		return 2;
	}
	text[len] = '\0';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp, *br;

		if (line[0] == '#')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			s = realloc(s, cap * sizeof(*s));
			if (!s)
				return 2;
		}
		sp = strrchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		s[n].v = strtod(sp + 1, NULL);
		br = strchr(line, '{');
		if (br) {
			*br = '\0';
			snprintf(s[n].labels, sizeof(s[n].labels), "%.*s", (int)strlen(br + 1) - 1, br + 1);
		} else {
			s[n].labels[0] = '\0';
		}
		snprintf(s[n].name, sizeof(s[n].name), "%s", line);
		n++;
	}
	ps = find(s, n, "offloadfs_page_size_bytes", NULL);
	cap_bytes = find(s, n, "offloadfs_capacity_bytes", NULL);
	for (i = 0; i < n; i++) {
		if (!strcmp(s[i].name, "offloadfs_bucket_pages_allocated"))
			used += s[i].v;
		else if (!strcmp(s[i].name, "offloadfs_bucket_pages_free"))
			fr += s[i].v;
	}
	/* A store without buckets (ubsio): the store-wide statfs figures. */
	if (used + fr == 0) {
		fr = find(s, n, "offloadfs_store_pages_free", NULL);
		used = find(s, n, "offloadfs_store_pages", NULL) - fr;
	}
	hits = find(s, n, "offloadfs_dram_hits_total", NULL);
	misses = find(s, n, "offloadfs_dram_misses_total", NULL);
	if (json) {
		int first = 1;

		printf("{\"mountpoint\": \"%s\", \"capacity_bytes\": %.0f, \"page_size\": %.0f, "
		       "\"used_pages\": %.0f, \"free_pages\": %.0f, \"objects\": %.0f, "
		       "\"dram_hit_rate\": %.4f, \"buckets\": [",
		       mnt, cap_bytes, ps, used, fr, find(s, n, "offloadfs_objects", NULL),
		       hits + misses ? hits / (hits + misses) : 0.0);
		for (i = 0; i < n; i++) {
			double f, l;

			if (strcmp(s[i].name, "offloadfs_bucket_pages_allocated"))
				continue;
			f = find(s, n, "offloadfs_bucket_pages_free", s[i].labels);
			l = find(s, n, "offloadfs_bucket_largest_free_run_pages", s[i].labels);
			printf("%s{\"bucket\": \"%.2s\", \"allocated\": %.0f, \"free\": %.0f, "
			       "\"largest_free_run\": %.0f, \"fragmentation\": %.4f}",
			       first ? "" : ", ", s[i].labels + 8, s[i].v, f, l, f ? 1 - l / f : 0.0);
			first = 0;
		}
		printf("], \"metrics\": {");
		for (i = 0; i < n; i++) {
			const char *p;

			printf("%s\"%s", i ? ", " : "", s[i].name);
			if (s[i].labels[0]) {
				putchar('{');
				for (p = s[i].labels; *p; p++)
					printf(*p == '"' ? "\\\"" : "%c", *p);
				putchar('}');
			}
			printf("\": %.17g", s[i].v);
		}
		printf("}}\n");
		free(s);
		return 0;
	}
	human(cap_bytes, a, sizeof(a));
	printf("offloadfs at %s\n", mnt);
	printf("  capacity   %s (%.0f pages of %.0f KiB)\n", a, used + fr, ps / 1024);
	human(used * ps, a, sizeof(a));
	human(fr * ps, b, sizeof(b));
	printf("  used       %s (%.1f%%)\n  free       %s\n", a,
	       used + fr ? 100 * used / (used + fr) : 0.0, b);
	printf("  objects    %.0f\n", find(s, n, "offloadfs_objects", NULL));
	human(find(s, n, "offloadfs_bytes_written_total", NULL), a, sizeof(a));
	human(find(s, n, "offloadfs_bytes_read_total", NULL), b, sizeof(b));
	printf("  written    %s in %.0f commits; read %s (through the daemon)\n", a,
	       find(s, n, "offloadfs_objects_committed_total", NULL), b);
	printf("  checksum failures %.0f, allocation failures (ENOSPC) %.0f\n",
	       find(s, n, "offloadfs_checksum_failures_total", NULL),
	       find(s, n, "offloadfs_page_allocation_failures_total", NULL));
	human(find(s, n, "offloadfs_dram_bytes", NULL), a, sizeof(a));
	human(find(s, n, "offloadfs_dram_capacity_bytes", NULL), b, sizeof(b));
	printf("  DRAM tier  %s of %s; hit rate %.1f%% (%.0f hits, %.0f misses), %.0f evictions\n",
	       a, b, hits + misses ? 100 * hits / (hits + misses) : 0.0, hits, misses,
	       find(s, n, "offloadfs_dram_evictions_total", NULL));
	printf("  promotions queued %.0f, done %.0f, failed %.0f, dropped %.0f\n",
	       find(s, n, "offloadfs_promotions_queued_total", NULL),
	       find(s, n, "offloadfs_promotions_done_total", NULL),
	       find(s, n, "offloadfs_promotions_failed_total", NULL),
	       find(s, n, "offloadfs_promotions_dropped_total", NULL));
	if (find(s, n, "offloadfs_backend_info", "backend=\"ubsio\"")) {
		printf("  backend    ubsio: %.0f puts, %.0f gets, %.0f deletes (batch calls); "
		       "%.0f failed\n",
		       find(s, n, "offloadfs_backend_calls_total", "backend=\"ubsio\",call=\"write\""),
		       find(s, n, "offloadfs_backend_calls_total", "backend=\"ubsio\",call=\"read\""),
		       find(s, n, "offloadfs_backend_calls_total", "backend=\"ubsio\",call=\"zero\""),
		       find(s, n, "offloadfs_backend_errors_total", "backend=\"ubsio\",call=\"write\"") +
			       find(s, n, "offloadfs_backend_errors_total",
				    "backend=\"ubsio\",call=\"read\"") +
			       find(s, n, "offloadfs_backend_errors_total",
				    "backend=\"ubsio\",call=\"zero\""));
		free(s);
		return 0;
	}
	/* The buckets in two lines: how unevenly they fill, the worst
	 * fragmentation, and the largest object that still fits. */
	nb = 0;
	for (bk = 0; bk < 256; bk++) {
		char lab[32];
		double u, f, l, pct, frag;

		snprintf(lab, sizeof(lab), "bucket=\"%02x\"", bk);
		u = find(s, n, "offloadfs_bucket_pages_allocated", lab);
		f = find(s, n, "offloadfs_bucket_pages_free", lab);
		if (u + f == 0)
			break;
		l = find(s, n, "offloadfs_bucket_largest_free_run_pages", lab);
		pct = 100 * u / (u + f);
		frag = f ? 100 * (1 - l / f) : 0.0;
		if (!nb || pct < used_min)
			used_min = pct;
		if (!nb || pct > used_max)
			used_max = pct;
		if (!nb || frag > frag_max) {
			frag_max = frag;
			frag_bk = bk;
		}
		if (!nb || l > run_max) {
			run_max = l;
			run_bk = bk;
		}
		nb++;
	}
	if (nb) {
		human(run_max * ps, a, sizeof(a));
		if (frag_max > 0)
			snprintf(b, sizeof(b), "bucket %02x, %.1f%%", frag_bk, frag_max);
		else
			snprintf(b, sizeof(b), "none");
		printf("  buckets    %u, each %.1f%% to %.1f%% used; most fragmented: %s\n", nb,
		       used_min, used_max, b);
		printf("             largest free run %.0f pages (%s, bucket %02x)%s\n", run_max, a,
		       run_bk, buckets ? "" : "; --buckets for each bucket");
	}
	if (buckets && nb) {
		printf("  bucket  allocated       free  largest-free  fragmentation\n");
		for (bk = 0; bk < nb; bk++) {
			char lab[32];
			double u, f, l;

			snprintf(lab, sizeof(lab), "bucket=\"%02x\"", bk);
			u = find(s, n, "offloadfs_bucket_pages_allocated", lab);
			f = find(s, n, "offloadfs_bucket_pages_free", lab);
			l = find(s, n, "offloadfs_bucket_largest_free_run_pages", lab);
			snprintf(c, sizeof(c), "%.1f%%", f ? 100 * (1 - l / f) : 0.0);
			printf("  %02x     %10.0f %10.0f %13.0f %14s\n", bk, u, f, l, c);
		}
	}
	free(s);
	return 0;
}

static int cmd_promote(const char *mnt, int nfiles, char **files)
{
	int i, bad = 0;

	if (check_mount(mnt))
		return 2;
	for (i = 0; i < nfiles; i++) {
		if (setxattr(files[i], "user.offload.promote", "1", 1, 0)) {
			fprintf(stderr, "offloadctl: %s: %s\n", files[i],
				errno == EOPNOTSUPP ? "the mount has no DRAM tier (-o dram=SIZE)"
						    : strerror(errno));
			bad++;
		} else {
			printf("queued %s\n", files[i]);
		}
	}
	return bad ? 1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: offloadctl fsck ROOT [--meta PATH] [--repair] [--ubsio-lib PATH]\n"
		     "                        [--ubsio-ssd-size N | --ubsio-old-init] [--ubsio-device N]\n"
		     "       offloadctl scrub MOUNTPOINT [--ubsio-lib PATH] [--ubsio-ssd-size N]\n"
		     "                        [--ubsio-device N]\n"
		     "       offloadctl stats MOUNTPOINT [--buckets] [--json]\n"
		     "       offloadctl promote MOUNTPOINT FILE...\n"
		     "       offloadctl --version\n"
		     "fsck checks an unmounted store (read-only unless --repair, which frees\n"
		     "leaked pages and moves corrupted objects to <tenant>/lost+found); on a\n"
		     "ubsio store it checks every value in the KV store, loading the library\n"
		     "as the daemon's ubsio_lib, ubsio_ssd_size, ubsio_old_init and ubsio_device\n"
		     "options do (by default as the store was last mounted);\n"
		     "scrub re-reads every committed object of a mounted store from its\n"
		     "bucket file, or its value in the KV store (another client of the same\n"
		     "library), and checks its checksum.  Exit 0: clean, 1: problems, 2: error.\n"
		     "stats summarises the live metrics; --buckets adds a row per bucket.\n");
}

/*
 * --ubsio-lib PATH, --ubsio-ssd-size N, --ubsio-old-init, --ubsio-device N at
 * argv[*i]: 1 when
 * taken (*i moves past its value), 0 when argv[*i] is something else, -1
 * (after a message) when malformed.
 */
static int ubsio_opt(int argc, char **argv, int *i, struct kvb_ubsio_config *uc)
{
	const char *a = argv[*i];

	if (!strcmp(a, "--ubsio-old-init")) {
		uc->new_init = 0;
		return 1;
	}
	if (*i + 1 >= argc)
		return 0;
	if (!strcmp(a, "--ubsio-lib")) {
		static char abs[4096];
		char err[PATH_MAX + 64];

		/* As the daemon's ubsio_lib=: a relative path is resolved here, once. */
		if (ofs_ubsio_lib_abs(argv[++*i], abs, sizeof(abs), err, sizeof(err))) {
			fprintf(stderr, "offloadctl: %s\n", err);
			return -1;
		}
		uc->lib = abs;
	} else if (!strcmp(a, "--ubsio-ssd-size")) {
		if (ofs_parse_size(argv[++*i], &uc->ssd_size)) {
			fprintf(stderr, "offloadctl: invalid --ubsio-ssd-size '%s': expected a "
					"number such as 0, 64K or 4G\n",
				argv[*i]);
			return -1;
		}
		/* As the daemon: giving the size is what selects the newer Init. */
		uc->new_init = 1;
	} else if (!strcmp(a, "--ubsio-device")) {
		char *end;
		long d;

		errno = 0;
		d = strtol(argv[++*i], &end, 10);
		if (errno || *end || end == argv[*i] || d < -1 || d > INT32_MAX) {
			fprintf(stderr, "offloadctl: invalid --ubsio-device '%s': a device number, "
				"or -1 for none\n",
				argv[*i]);
			return -1;
		}
		uc->device_id = (int32_t)d;
	} else {
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	int i;

	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		printf("offloadctl 0.1.0 (schema %d)\n", META_SCHEMA_VERSION);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "fsck")) {
		/* The backend stays the one the store records (backend NULL). */
		struct ofs_config cfg = {
			.ubsio = { .device_id = KVB_UBSIO_DEVICE_UNSET,
				   .new_init = -1,
				   .buffer_max = OFS_UBSIO_BUFFER_MAX,
				   .cache_max = OFS_UBSIO_CACHE_MAX,
				   .key_max = OFS_UBSIO_KEY_MAX },
		};
		int repair = 0, r;

		for (i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--repair")) {
				repair = 1;
			} else if (!strcmp(argv[i], "--meta") && i + 1 < argc) {
				cfg.meta_path = argv[++i];
			} else if ((r = ubsio_opt(argc, argv, &i, &cfg.ubsio)) != 0) {
				if (r < 0)
					return 2;
			} else if (argv[i][0] != '-' && !cfg.root) {
				cfg.root = argv[i];
			} else {
				fprintf(stderr, "offloadctl: unknown argument '%s'\n", argv[i]);
				usage(stderr);
				return 2;
			}
		}
		if (!cfg.root) {
			usage(stderr);
			return 2;
		}
		return cmd_fsck(&cfg, repair);
	}
	if (argc >= 3 && !strcmp(argv[1], "scrub")) {
		/* Unset: the daemon's own, from its metrics. */
		struct kvb_ubsio_config uc = { .new_init = -1, .device_id = KVB_UBSIO_DEVICE_UNSET };
		const char *mnt = NULL;
		int r;

		for (i = 2; i < argc; i++) {
			if ((r = ubsio_opt(argc, argv, &i, &uc)) < 0)
				return 2;
			if (r)
				continue;
			if (argv[i][0] == '-' || mnt) {
				fprintf(stderr, "offloadctl: unknown argument '%s'\n", argv[i]);
				usage(stderr);
				return 2;
			}
			mnt = argv[i];
		}
		if (!mnt) {
			usage(stderr);
			return 2;
		}
		return cmd_scrub(mnt, &uc);
	}
	if (argc >= 3 && !strcmp(argv[1], "stats")) {
		const char *mnt = NULL;
		int json = 0, buckets = 0;

		for (i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--json")) {
				json = 1;
			} else if (!strcmp(argv[i], "--buckets")) {
				buckets = 1;
			} else if (argv[i][0] != '-' && !mnt) {
				mnt = argv[i];
			} else {
				fprintf(stderr, "offloadctl: unknown argument '%s'\n", argv[i]);
				usage(stderr);
				return 2;
			}
		}
		if (!mnt) {
			usage(stderr);
			return 2;
		}
		return cmd_stats(mnt, json, buckets);
	}
	if (argc >= 4 && !strcmp(argv[1], "promote"))
		return cmd_promote(argv[2], argc - 3, argv + 3);
	usage(stderr);
	return 2;
}
