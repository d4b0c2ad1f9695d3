/*
 * fsck_kv.c: fsck of a store of a KV backend (ubsio): every object's
 * bytes are one value under its key.  The bitmap and bucket file checks
 * do not apply (the KV store allocates); every committed value is probed
 * for presence and length, then checksummed.  Values no record points at
 * cannot be found (nothing lists a KV store): the journal names those
 * that may exist, and the next mount deletes them.
 */
#include "fsck_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "vec.h"

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
	if (vec_u64_push(&f->keyed, &f->nkeyed, &f->capkeyed, in->ino))
		return -ENOMEM;
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

	ofs_progress_clear(&f->prog);
	fsck_fullpath(f->meta, v->in.ino, path, sizeof(path));
	if (fsck_kv_reverts(f, &v->in)) {
		fprintf(f->out, "inode %" PRIu64 " '%s': unsynced version: %s (key '%s'); the next mount "
		       "falls back to the last synced version\n",
		       v->in.ino, path, what, v->skey);
		f->unsynced_bad++;
		return;
	}
	fprintf(f->out, "inode %" PRIu64 " '%s': %s (key '%s', size %" PRIu64 ")\n", v->in.ino, path, what,
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
		ofs_progress_show(&f->prog, 0);
		if (r == -ENOENT) {
			fsck_kv_bad(f, v, "value missing from the KV store", &f->missing);
		} else if (r == -EBADMSG) {
			fsck_kv_bad(f, v, "value has the wrong length", &f->bad_length);
		} else if (r) {
			/* The store could not tell: not a verdict on the value. */
			ofs_progress_clear(&f->prog);
			fsck_fullpath(f->meta, v->in.ino, path, sizeof(path));
			fprintf(f->out, "inode %" PRIu64 " '%s': cannot probe key '%s': %s\n", v->in.ino,
			       path, v->skey, strerror(-r));
			f->io_errors++;
		} else if ((r = kvb_checksum(&f->kvb, &maps[i], &csum))) {
			ofs_progress_clear(&f->prog);
			fsck_fullpath(f->meta, v->in.ino, path, sizeof(path));
			fprintf(f->out, "inode %" PRIu64 " '%s': cannot read key '%s': %s\n", v->in.ino, path,
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
	fprintf(f->out, "inode %" PRIu64 " '%s': records a value (id %" PRIu64 ", %" PRIu64
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

int fsck_kv(struct fsck *f, const struct ofs_config *cfg, int repair)
{
	struct kvb_ubsio_config uc = cfg->ubsio;
	char libbuf[PATH_MAX];
	char err[1024];
	int problems = 0, ret;
	long lines;

	lines = fsck_kv_journal(cfg->root);
	if (lines > 0)
		fprintf(f->out, "%s: %ld line(s); the next mount deletes the values they name that no "
		       "record points at\n",
		       KVB_UBSIO_JOURNAL, lines);
	else if (lines < 0)
		fprintf(f->out, "%s: cannot read: %s\n", KVB_UBSIO_JOURNAL, strerror((int)-lines));
	/* Before loading the library: a record that cannot be read needs no KV store to tell. */
	ret = meta_foreach_value(f->meta, fsck_kv_scan, f);
	if (ret) {
		fsck_err(f, "%s: cannot read the value keys: %s\n", cfg->root,
			ret == -ENOMEM ? strerror(ENOMEM) : meta_errmsg(f->meta));
		return 2;
	}
	uc.page_size = f->geom.page_size;
	/* Options not given: the library and Init the last mount used (store settings). */
	ofs_ubsio_defaults(f->meta, &uc, libbuf, sizeof(libbuf));
	if (uc.lib && strchr(uc.lib, '/') && uc.lib[0] != '/') {
		fsck_err(f, "%s: the store records a relative ubsio_lib '%s': "
				"give --ubsio-lib with an absolute path\n", cfg->root, uc.lib);
		return 2;
	}
	/* Without --repair fsck writes nothing, not even an empty journal. */
	uc.readonly = !repair;
	ret = kvb_ubsio_init(&f->kvb, cfg->root, &uc, f->meta, err, sizeof(err));
	if (ret) {
		fsck_err(f, "%s: %s%s\n", cfg->root, err,
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
		fsck_err(f, "out of memory\n");
		return 2;
	}
	ofs_progress_start(&f->prog, "fsck", f->values, f->err, f->out);
	ret = meta_foreach_value(f->meta, fsck_kv_value, f);
	if (!ret)
		fsck_kv_batch(f);
	ofs_progress_show(&f->prog, 1);
	if (!ret)
		ret = meta_foreach_mapping(f->meta, fsck_kv_map, f);
	if (ret) {
		fprintf(f->out, "cannot read the mappings: %s\n",
		       ret == -ENOMEM ? strerror(ENOMEM) : meta_errmsg(f->meta));
		problems++;
	}
	while (f->nbatch)
		free(f->batch[--f->nbatch].skey);
	problems += (int)(f->missing + f->bad_length + f->bad_csum + f->keyless + f->io_errors);
	fprintf(f->out, "objects %" PRIu64 ", missing values %" PRIu64 ", wrong length %" PRIu64
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
			fprintf(f->out, "repair failed: %s; nothing changed\n", meta_errmsg(f->meta));
			fixed = 0;
		}
		/* A value the store could not answer for may be intact: left where it is. */
		if (f->io_errors)
			fprintf(f->out, "repair: objects the KV store could not answer for are left in "
			       "place; run fsck again once it can\n");
		if (fixed && !f->io_errors && problems == (int)f->ncorrupt)
			problems = 0;
	}
	fprintf(f->out, "%s\n", problems ? "fsck: PROBLEMS FOUND" : "fsck: clean");
	return problems ? 1 : 0;
}
