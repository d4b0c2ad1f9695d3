/*
 * backend.c: the ubsio KV backend.  Each object's content is one value in a
 * distributed KV store reached through Huawei's UBSIO KV-cache client
 * library (libubsio_kvc.so), loaded with dlopen.
 *
 * Values are immutable: every committed version is put under a key of its
 * own, "<tenant>/<key>#<vid>.<store id>", where vid is a number never
 * reused (it is the mapping's page column) and the store id a random
 * number drawn when the store first starts, so that stores sharing one KV
 * store (one per node, each with its own ROOT) never write or delete each
 * other's values.  So an overwrite never touches the value a
 * reader or the committed record points at; the old value is deleted only
 * after the record that replaced it is durable, as the pages backend frees
 * pages (DESIGN.md, "The ubsio backend").
 *
 * Nothing can list the KV store, so every value that might outlive its
 * record is written down first, in a journal in ROOT (journal.c).  Start
 * deletes every journalled value no record points at, then resets the
 * journal; at run time it is reset whenever nothing in it is still
 * pending.
 *
 * The files of the backend, and the lock order, are listed in ubsio_int.h.
 */
#include "ubsio_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "kvb_hash.h"

#include "meta.h"

static int ubs_remove(void *arg, const struct kvb_map *m)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	int ret = -ENOENT;

	if (m->bucket < 0)
		return 0;
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	if (v && v->state == UBS_COMMITTED)
		ret = ubs_doom(u, v);
	pthread_mutex_unlock(&u->lock);
	return ret;
}

/*
 * Before a record naming m is deleted: its key goes to the journal, synced,
 * so that no crash can keep the deletion and lose the key.
 */
static int ubs_remove_prepare(void *arg, const struct kvb_map *m)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	uint64_t gen = 0;
	off_t len = 0;
	int ret = 0, sync = 0, tries = 0;

	if (m->bucket < 0)
		return 0;
	pthread_mutex_lock(&u->lock);
again:
	v = ubs_find(u, m->page);
	/*
	 * Any line of this generation names the key for the start's sweep;
	 * once a sync covers it there is nothing to do.  That makes the call
	 * cheap the second time: fuse/ prepares before it takes its metadata
	 * lock, then again under it, in case a journal reset came between.
	 */
	sync = 0;
	/*
	 * No reset by a barrier that has already begun (its release may be
	 * running now), from before the line is written.  A later barrier's
	 * release comes after its metadata sync, which waits for the metadata
	 * lock the caller holds until the record is deleted and the value
	 * doomed (no reset while anything is doomed).
	 */
	if (u->commit_epoch < u->barrier_epoch)
		u->commit_epoch = u->barrier_epoch;
	if (v && v->skey && (v->jgen != u->jgen || v->jend > u->jsynced)) {
		if (v->jgen != u->jgen)
			ret = ubs_journal(u, "D", &v, 1);
		sync = 1;
		gen = u->jgen;
		len = u->jlen;
	}
	if (sync && !ret) {
		pthread_mutex_unlock(&u->lock);
		ret = ubs_jsync(u, gen, len);
		pthread_mutex_lock(&u->lock);
		/* A failed sync elsewhere counted the line lost: write it again. */
		if (ret == -ESTALE && ++tries < 3) {
			ret = 0;
			goto again;
		}
		if (ret == -ESTALE)
			ret = -EIO;
	}
	if (!ret && u->commit_epoch < u->barrier_epoch)
		u->commit_epoch = u->barrier_epoch; /* and counted from now */
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static uint64_t ubs_barrier_begin(void *arg)
{
	struct ubs *u = arg;
	uint64_t mark;

	pthread_mutex_lock(&u->lock);
	/* Commits done before this point are in the metadata the caller syncs next. */
	u->barrier_epoch++;
	mark = u->doom_seq;
	/* The lines of the values doomed so far, all of them below the mark. */
	u->barrier_jgen = u->jgen;
	u->barrier_jlen = u->jlen;
	pthread_mutex_unlock(&u->lock);
	return mark;
}

static int ubs_barrier_sync(void *arg)
{
	struct ubs *u = arg;
	int ret = 0;
	uint64_t gen;
	off_t len;

	pthread_mutex_lock(&u->lock);
	gen = u->barrier_jgen;
	len = u->barrier_jlen;
	pthread_mutex_unlock(&u->lock);
	/*
	 * The D lines of what the records being synced let go of.  After a
	 * failed sync the doomed values' lines were written again: sync those.
	 */
	ret = ubs_jsync(u, gen, len);
	if (ret == -ESTALE) {
		pthread_mutex_lock(&u->lock);
		gen = u->jgen;
		len = u->jlen;
		pthread_mutex_unlock(&u->lock);
		ret = ubs_jsync(u, gen, len);
		if (ret == -ESTALE)
			ret = -EIO;
	}
	pthread_mutex_lock(&u->lock);
	u->st.calls[KVB_CALL_SYNC]++;
	if (ret)
		u->st.errors[KVB_CALL_SYNC]++;
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static uint64_t ubs_release(void *arg, uint64_t mark)
{
	struct ubs *u = arg;
	uint64_t n = ubs_delete_doomed(u, mark);

	ubs_journal_trim(u);
	return n;
}

static int ubs_statfs(void *arg, struct kvb_statfs *st)
{
	struct ubs *u = arg;
	uint64_t ps = u->c.page_size, total, used;

	pthread_mutex_lock(&u->lock);
	/*
	 * A KV store holds bytes, not pages: statfs shows the bytes the
	 * values take (in blocks of page_size), the same count kv_max_bytes
	 * is checked against, so df and ENOSPC agree.
	 */
	used = u->stored_bytes + u->working_bytes;
	/* Without a limit: the ssd size given to Init, else a nominal 1 PiB. */
	total = u->c.max_bytes ? u->c.max_bytes : u->c.ssd_size ? u->c.ssd_size : UBS_NOMINAL_BYTES;
	st->block_size = ps;
	st->blocks = total / ps;
	st->blocks_free = used < total ? (total - used) / ps : 0;
	st->files = u->c.max_keys;
	st->files_free = 0;
	if (u->c.max_keys && u->stored_keys + u->working_keys < u->c.max_keys)
		st->files_free = u->c.max_keys - u->stored_keys - u->working_keys;
	pthread_mutex_unlock(&u->lock);
	return 0;
}

/* The descriptor of a value: its key escaped, so that a name cannot add a line. */
static int ubs_describe_key(char *buf, size_t len, const char *skey, uint64_t size)
{
	static const char pre[] = "store=ubsio\nkey=";
	size_t kl;
	int n;

	if (len < sizeof(pre))
		return -ERANGE;
	memcpy(buf, pre, sizeof(pre));
	kl = kvb_desc_escape(buf + sizeof(pre) - 1, len - sizeof(pre) + 1, skey);
	if (kl >= len - sizeof(pre) + 1)
		return -ERANGE;
	kl += sizeof(pre) - 1;
	n = snprintf(buf + kl, len - kl, "\nobject_size=%" PRIu64 "\n", size);
	return n < 0 || (size_t)n >= len - kl ? -ERANGE : (int)kl + n;
}

static int ubs_describe(void *arg, const struct kvb_map *m, char *buf, size_t len)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	int n;

	if (m->bucket < 0) {
		n = snprintf(buf, len, "store=ubsio\nkey=\nobject_size=0\n");
		return n < 0 || (size_t)n >= len ? -ERANGE : n;
	}
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	/* Lines as the pages backend's: what another client needs to Get the value. */
	n = v && v->skey ? ubs_describe_key(buf, len, v->skey, m->size) : -EIO;
	pthread_mutex_unlock(&u->lock);
	return n;
}


static int ubs_checksum(void *arg, const struct kvb_map *m, uint64_t *csum)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	uint64_t bad;
	int ret;

	if (m->bucket < 0) {
		*csum = XXH3_64bits(NULL, 0);
		return 0;
	}
	/* Recovery checks values before start: read the records now. */
	if (!u->loaded && (ret = ubs_load(u)))
		return ret;
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	ret = v && v->skey && v->size == m->size ? ubs_hold(u, v, NULL, &bad) : -EIO;
	if (!ret) {
		*csum = XXH3_64bits(v->data, v->size);
		ubs_unhold(u, v);
		/* A one-off pass (fsck, scrub, recovery) need not stay cached. */
		if (!v->refs && v->state != UBS_WORKING)
			ubs_uncache(u, v);
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

/*
 * Whether each value is there, UBS_EXIST_BATCH keys a call.  BatchExist
 * tells missing from present; BatchGetLength's lengths are read only for
 * keys it succeeded on (it leaves the others' unset: ubsio_kvc.cpp,
 * UbsioKvCacheBatchGetLength).
 */
static int ubs_probe(void *arg, const struct kvb_map *maps, size_t n, int *res)
{
	struct ubs *u = arg;
	size_t chunk = n < UBS_EXIST_BATCH ? n : UBS_EXIST_BATCH;
	const char **keys = calloc(chunk ? chunk : 1, sizeof(*keys));
	char **owned = calloc(chunk ? chunk : 1, sizeof(*owned));
	bool *ex = calloc(chunk ? chunk : 1, sizeof(*ex));
	size_t *lens = calloc(chunk ? chunk : 1, sizeof(*lens));
	int32_t *lres = calloc(chunk ? chunk : 1, sizeof(*lres));
	size_t i, j, k;
	int ret = 0;

	if (!keys || !owned || !ex || !lens || !lres) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i += k) {
		size_t m = 0;
		int32_t rc, lrc;

		k = n - i < chunk ? n - i : chunk;
		pthread_mutex_lock(&u->lock);
		for (j = 0; j < k; j++) {
			struct ubs_val *v = maps[i + j].bucket >= 0 ? ubs_find(u, maps[i + j].page)
								    : NULL;

			/* A record with no key we could ask for is reported missing. */
			owned[j] = v && v->skey && ubs_key_ok(v->skey) ? strdup(v->skey) : NULL;
			res[i + j] = owned[j] ? -EIO : -ENOENT;
			if (owned[j])
				keys[m++] = owned[j];
		}
		pthread_mutex_unlock(&u->lock);
		if (m) {
			memset(ex, 0, m * sizeof(*ex));
			for (j = 0; j < m; j++)
				lres[j] = UBS_NO_RESULT;
			rc = ubs_bexist_call(keys, (uint32_t)m, ex);
			lrc = ubs_bgetlen_call(keys, (uint32_t)m, lens, lres);
			pthread_mutex_lock(&u->lock);
			u->st.calls[KVB_CALL_READ] += 2;
			pthread_mutex_unlock(&u->lock);
			for (j = 0, m = 0; j < k; j++) {
				if (!owned[j])
					continue;
				if (rc)
					res[i + j] = ubs_errno(rc) == -ENOENT ? -EIO : ubs_errno(rc);
				else if (!ex[m])
					res[i + j] = -ENOENT;
				else if (!lrc && lres[m] == UBS_OK)
					res[i + j] = lens[m] == maps[i + j].size ? 0 : -EBADMSG;
				else
					res[i + j] = 0; /* there; its length could not be read */
				m++;
			}
		}
		for (j = 0; j < k; j++)
			free(owned[j]);
	}
out:
	free(keys);
	free(owned);
	free(ex);
	free(lens);
	free(lres);
	return ret;
}

static void ubs_stats(void *arg, struct kvb_stats *st)
{
	struct ubs *u = arg;

	pthread_mutex_lock(&u->lock);
	*st = u->st;
	pthread_mutex_unlock(&u->lock);
}

/*
 * The store id in every key this store puts: read from the store's
 * settings, or drawn and recorded at the first start.  Only its uniqueness
 * matters (each record keeps its whole key), so a store whose record of it
 * was lost draws a new one.
 */
static int ubs_store_id(struct ubs *u, struct meta *m)
{
	char buf[32] = "";
	uint64_t r;
	ssize_t n;

	if (meta_setting_get(m, "ubsio_store_id", buf, sizeof(buf)) == 0 && strlen(buf) == 16 &&
	    strspn(buf, "0123456789abcdef") == 16) {
		memcpy(u->sid, buf, sizeof(u->sid));
		return 0;
	}
	n = getrandom(&r, sizeof(r), 0); /* 8 bytes never come back short */
	if (n != (ssize_t)sizeof(r))
		return n < 0 ? -errno : -EIO;
	snprintf(u->sid, sizeof(u->sid), "%016llx", (unsigned long long)r);
	return meta_setting_set(m, "ubsio_store_id", u->sid);
}

/*
 * Mount: the table from the records, then the journal: every value it
 * names that no record points at is deleted (a put whose commit never
 * happened, a delete that never ran).  Then the journal is emptied.
 */
static int ubs_start(void *arg, struct meta *m, int clean, char *msg, size_t msglen)
{
	struct ubs *u = arg;
	uint64_t orphans = 0, lines = 0, dropped = 0;
	int ret;

	u->m = m;
	ret = ubs_store_id(u, m);
	if (ret) {
		snprintf(msg, msglen, "cannot record the store id: %s", strerror(-ret));
		return ret;
	}
	/* After a clean unmount recovery changed nothing: the table read at init stands. */
	ret = clean && u->loaded ? 0 : ubs_reload(u, &dropped);
	if (ret) {
		snprintf(msg, msglen, "cannot read the value keys: %s", strerror(-ret));
		return ret;
	}
	ret = ubs_journal_replay(u, &lines, &orphans, msg, msglen);
	if (ret)
		return ret;
	/* What recovery dropped is in no journal line yet: write them before deleting. */
	if (dropped && (ret = ubs_journal_doomed(u))) {
		snprintf(msg, msglen, "cannot replay %s: %s", u->jpath, strerror(-ret));
		return ret;
	}
	ubs_delete_doomed(u, UINT64_MAX);
	if (u->ndoomed) {
		/* Deletes that failed: the journal keeps a line for each, for the next try. */
		snprintf(msg, msglen,
			 "ubsio %s: %" PRIu64 " values (%" PRIu64 " bytes); %" PRIu64
			 " of %" PRIu64 " orphaned values could not be deleted yet",
			 ubs_lib_path(), u->stored_keys - u->ndoomed, u->stored_bytes, u->ndoomed,
			 orphans + dropped);
		return 0;
	}
	ret = ubs_journal_reset(u);
	if (ret) {
		snprintf(msg, msglen, "cannot empty %s: %s", u->jpath, strerror(-ret));
		return ret;
	}
	snprintf(msg, msglen,
		 "ubsio %s: %" PRIu64 " values (%" PRIu64 " bytes) %s; journal: %" PRIu64
		 " lines; %" PRIu64 " orphaned values deleted (%" PRIu64 " journalled, %" PRIu64
		 " dropped by recovery)",
		 ubs_lib_path(), u->stored_keys, u->stored_bytes,
		 clean ? "from a clean unmount"
		       : u->stored_keys || lines ? "rebuilt after an unclean stop" : "(none yet)",
		 lines,
		 orphans + dropped, orphans, dropped);
	return 0;
}

static int ubs_stop(void *arg, struct meta *m)
{
	struct ubs *u = arg;

	(void)m;
	/* The caller's barrier made every record durable: every doomed value can go. */
	ubs_delete_doomed(u, UINT64_MAX);
	ubs_journal_trim(u);
	return 0;
}

static void ubs_free(void *arg)
{
	struct ubs *u = arg;

	if (!u)
		return;
	if (u->tab.slots) {
		ubs_table_clear(u);
		htab_release(&u->tab);
	}
	if (u->jfd >= 0)
		close(u->jfd);
	free(u->jpath);
	pthread_mutex_destroy(&u->lock);
	ubs_queue_destroy(&u->puts);
	ubs_queue_destroy(&u->gets);
	pthread_mutex_destroy(&u->jslock);
	free(u);
	ubs_lib_unload();
}

/* A value is in no file and a put is durable when it returns: no read_fd, no sync. */
static const struct kvb_ops ubs_ops = {
	.obj_open = ubs_obj_open,
	.obj_write = ubs_obj_write,
	.obj_truncate = ubs_obj_truncate,
	.obj_view = ubs_obj_view,
	.obj_dirty = ubs_obj_dirty,
	.obj_commit_prepare = ubs_obj_commit_prepare,
	.obj_commit_done = ubs_obj_commit_done,
	.obj_close = ubs_obj_close,
	.obj_stage = ubs_obj_stage,
	.read = ubs_read,
	.read_verified = ubs_read_verified,
	.read_ref = ubs_read_ref,
	.read_unref = ubs_read_unref,
	.remove = ubs_remove,
	.remove_prepare = ubs_remove_prepare,
	.barrier_begin = ubs_barrier_begin,
	.barrier_sync = ubs_barrier_sync,
	.release = ubs_release,
};

/* No buckets: no bucket_usage. */
static const struct kvb_admin_ops ubs_admin = {
	.name = "ubsio",
	.start = ubs_start,
	.stop = ubs_stop,
	.statfs = ubs_statfs,
	.describe = ubs_describe,
	.checksum = ubs_checksum,
	.stats = ubs_stats,
	.probe = ubs_probe,
	.free = ubs_free,
};

int kvb_ubsio_init(struct kvb *kvb, const char *root, const struct kvb_ubsio_config *c,
		   struct meta *m, char *err, size_t errlen)
{
	struct ubs *u;
	int ret;

	if (!c->page_size || !c->buffer_max || c->key_max < UBS_KEY_MAX_MIN ||
	    c->key_max > UBS_KEY_MAX) {
		snprintf(err, errlen, "ubsio: page_size, kv_buffer_max and a key_max of %d..%d "
				      "are required", UBS_KEY_MAX_MIN, UBS_KEY_MAX);
		return -EINVAL;
	}
	ret = ubs_lib_load(c, err, errlen);
	if (ret)
		return ret;
	u = calloc(1, sizeof(*u));
	if (!u) {
		ubs_lib_unload();
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	u->c = *c;
	u->m = m;
	u->jfd = -1;
	u->next_vid = 1;
	u->jgen = 1;
	ubs_queue_init(&u->puts);
	ubs_queue_init(&u->gets);
	pthread_mutex_init(&u->lock, NULL);
	pthread_mutex_init(&u->jslock, NULL);
	if (htab_init(&u->tab) || asprintf(&u->jpath, "%s/%s", root, KVB_UBSIO_JOURNAL) < 0) {
		u->jpath = NULL;
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* A read-only user (fsck without --repair) must not create the journal. */
	u->jfd = c->readonly ? open(u->jpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
			     : open(u->jpath, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
				    0600);
	if (u->jfd < 0 && c->readonly && errno == ENOENT) {
		u->jfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (u->jfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot open %s: %s", u->jpath, strerror(errno));
		goto fail;
	}
	u->jlen = lseek(u->jfd, 0, SEEK_END);
	if (u->jlen < 0)
		u->jlen = 0;
	if (u->jlen > 0) {
		char last = '\n';

		/* A crash left a torn last line: the next append ends it first. */
		if (pread(u->jfd, &last, 1, u->jlen - 1) == 1 && last != '\n')
			u->jtorn = 1;
	}
	/* The records as they stand before recovery: start frees what it drops. */
	ret = ubs_load(u);
	if (ret) {
		snprintf(err, errlen, "cannot read the value keys: %s", strerror(-ret));
		goto fail;
	}
	kvb_init(kvb, &ubs_ops, &ubs_admin, u);
	return 0;

fail:
	ubs_free(u);
	return ret;
}

