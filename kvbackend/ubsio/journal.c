/*
 * journal.c: the journal of keys that may need deleting, in ROOT, the puts
 * it covers, and the doomed values it records.  Nothing can list the KV
 * store, so every value that might outlive its record is written down
 * before it can: "P vid key" before a put, "D vid key" before a record
 * change lets a value go (both synced first), "V vid" after a reset (vids
 * are never reused).  A doomed value is deleted at the release after the
 * record change that let it go is durable; start replays the journal and
 * deletes every value it names that no record points at.
 */
#include "ubsio_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ubs_hex(const char *s, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (; *s; s++) {
		*out++ = hx[(unsigned char)*s >> 4];
		*out++ = hx[(unsigned char)*s & 15];
	}
	*out = '\0';
}

/*
 * A torn append that could not be cut back: take the length from the file
 * and end the torn line with the next append.  Under u->lock.
 */
static void ubs_journal_lost_length(struct ubs *u)
{
	off_t end = lseek(u->jfd, 0, SEEK_END);

	if (end >= 0)
		u->jlen = end;
	u->jtorn = 1;
}

/*
 * Append one line per value: "<tag> <vid> <hex key>\n", tag tags[i] (or
 * tags[0] for all when tags is one letter).  Each value remembers the
 * journal generation its line went into.  Under u->lock or single-threaded.
 */
int ubs_journal(struct ubs *u, const char *tags, struct ubs_val *const *v, size_t n)
{
	size_t i, len = 0, cap = 0;
	char *buf = NULL;
	ssize_t w;
	int ret = 0;

	for (i = 0; i < n; i++)
		cap += 2 * strlen(v[i]->skey) + 32;
	buf = malloc(cap + 2);
	if (!buf)
		return -ENOMEM;
	if (u->jtorn)
		buf[len++] = '\n'; /* ends a torn line that could not be cut back */
	for (i = 0; i < n; i++) {
		len += (size_t)sprintf(buf + len, "%c %" PRIu64 " ", tags[tags[1] ? i : 0],
				       v[i]->vid);
		ubs_hex(v[i]->skey, buf + len);
		len += strlen(buf + len);
		buf[len++] = '\n';
	}
	w = write(u->jfd, buf, len);
	if (w != (ssize_t)len) {
		ret = w < 0 ? -errno : -EIO;
		/* A torn line would swallow the next append's first line at replay. */
		if (w > 0 && ftruncate(u->jfd, u->jlen)) {
			ubs_journal_lost_length(u);
			ret = -EIO;
		}
	} else {
		u->jlen += (off_t)len;
		u->jdirty = 1;
		u->jtorn = 0;
		for (i = 0; i < n; i++) {
			v[i]->jgen = u->jgen;
			v[i]->jend = u->jlen;
		}
	}
	free(buf);
	return ret;
}

static int ubs_unhex(const char *h, size_t n, char *out)
{
	size_t i;

	if (n % 2)
		return -EINVAL;
	for (i = 0; i < n; i += 2) {
		int a = h[i] >= 'a' ? h[i] - 'a' + 10 : h[i] - '0';
		int b = h[i + 1] >= 'a' ? h[i + 1] - 'a' + 10 : h[i + 1] - '0';

		if (a < 0 || a > 15 || b < 0 || b > 15 || (a == 0 && b == 0))
			return -EINVAL;
		out[i / 2] = (char)(a << 4 | b);
	}
	out[n / 2] = '\0';
	return 0;
}


/* A D line for every doomed value, synced.  Single-threaded (start). */
int ubs_journal_doomed(struct ubs *u)
{
	struct ubs_val *d[UBS_BATCH], *v;
	size_t n = 0;
	int ret = 0;

	for (v = u->doomed_head; !ret && v; v = v->dnext) {
		assert(v->state == UBS_DOOMED);
		d[n++] = v;
		if (n == UBS_BATCH) {
			ret = ubs_journal(u, "D", d, n);
			n = 0;
		}
	}
	if (!ret && n)
		ret = ubs_journal(u, "D", d, n);
	if (!ret && fdatasync(u->jfd))
		ret = -errno;
	return ret;
}

/*
 * Replay the journal at start, after the table was loaded from the
 * records: every value it names that no record points at is doomed (a put
 * whose commit never happened, a delete that never ran).  Counts the lines
 * and the values doomed; msg says what failed.  Single-threaded.
 */
int ubs_journal_replay(struct ubs *u, uint64_t *lines, uint64_t *orphans, char *msg,
		       size_t msglen)
{
	char *line = NULL, *key = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *f;
	int ret = 0, fd;

	fd = dup(u->jfd);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		snprintf(msg, msglen, "cannot read %s: %s", u->jpath, strerror(errno));
		return -errno;
	}
	rewind(f);
	while ((len = getline(&line, &cap, f)) > 0) {
		char tag, *sp;
		unsigned long long vid;
		struct ubs_val *v;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (line[0] == 'V' && sscanf(line, "V %llu", &vid) == 1) {
			/* The vid high-water mark a reset left: never reuse a vid. */
			if (vid > u->next_vid)
				u->next_vid = vid;
			continue;
		}
		(*lines)++;
		sp = len > 2 ? strchr(line + 2, ' ') : NULL;
		tag = line[0];
		if ((tag != 'P' && tag != 'D') || line[1] != ' ' || !sp ||
		    sscanf(line + 2, "%llu", &vid) != 1) {
			/* A torn last line: its put was never issued (the sync comes first). */
			continue;
		}
		free(key);
		key = malloc((size_t)(len / 2) + 1);
		if (!key || ubs_unhex(sp + 1, strlen(sp + 1), key))
			continue;
		if (vid >= u->next_vid)
			u->next_vid = vid + 1;
		v = ubs_find(u, vid);
		if (v && v->state == UBS_DOOMED && v->skey && strlen(key) > strlen(v->skey) &&
		    strncmp(key, v->skey, strlen(v->skey)) == 0) {
			/*
			 * An earlier line for this vid was torn (its key cut short) and
			 * this one is whole: delete under the whole key.
			 */
			char *k = strdup(key);

			if (!k) {
				ret = -ENOMEM;
				break;
			}
			free(v->skey);
			v->skey = k;
			continue;
		}
		if (v)
			continue; /* a record points at it, or an earlier line named it */
		v = ubs_val_new(u, vid, 0, key, UBS_DOOMED);
		if (!v) {
			ret = -ENOMEM;
			break;
		}
		ubs_doom_quiet(u, v);
		u->stored_keys++;
		(*orphans)++;
	}
	free(line);
	free(key);
	fclose(f);
	if (ret)
		snprintf(msg, msglen, "cannot replay %s: %s", u->jpath, strerror(-ret));
	return ret;
}

/* ---- doomed values ---- */

/*
 * v's value is to be deleted once the record change that let go of it is
 * durable.  Its key is normally in the journal already (written, synced,
 * before the record change: its P line, or the D line of commit_prepare or
 * remove_prepare); only when the journal has been reset since is a line
 * added, synced by the next barrier.
 */
int ubs_doom(struct ubs *u, struct ubs_val *v)
{
	ubs_doom_quiet(u, v);
	return v->jgen == u->jgen ? 0 : ubs_journal(u, "D", &v, 1);
}

/*
 * Delete doomed values with doom_seq < mark (every one when mark is
 * UINT64_MAX).  Values whose delete fails stay doomed for the next round.
 * Returns the checksum pages freed.
 */
uint64_t ubs_delete_doomed(struct ubs *u, uint64_t mark)
{
	struct ubs_val *batch[UBS_BATCH], *v;
	const char *keys[UBS_BATCH];
	int32_t res[UBS_BATCH];
	uint64_t freed = 0, ps = u->c.page_size, sweep;
	unsigned calls;
	size_t i, n;

	pthread_mutex_lock(&u->lock);
	sweep = ++u->sweep;
	pthread_mutex_unlock(&u->lock);
	for (;;) {
		n = 0;
		pthread_mutex_lock(&u->lock);
		/* Oldest first; each value tried once per pass; never one a reader holds. */
		for (v = u->doomed_head; v && v->doom_seq < mark && n < UBS_BATCH; v = v->dnext) {
			if (v->refs || v->sweep == sweep)
				continue;
			v->sweep = sweep;
			v->deleting = 1;
			v->refs++; /* ours until the delete returns */
			batch[n] = v;
			keys[n++] = v->skey;
		}
		pthread_mutex_unlock(&u->lock);
		if (!n)
			break;
		for (i = 0; i < n; i++)
			res[i] = UBS_NO_RESULT;
		calls = ubs_batch_call(ubs_bdel_call, keys, NULL, NULL, res, (uint32_t)n);
		pthread_mutex_lock(&u->lock);
		u->st.calls[KVB_CALL_ZERO] += calls;
		for (i = 0; i < n; i++) {
			struct ubs_val *d = batch[i];

			assert(d->refs > 0);
			d->refs--;
			d->deleting = 0;
			/*
			 * Deleting a missing key succeeds (and not found would mean gone
			 * already: a put that failed, a replayed journal line).
			 */
			if (res[i] == UBS_OK || res[i] == UBS_ENOTFOUND) {
				assert(u->stored_bytes >= d->size && u->stored_keys > 0);
				u->stored_bytes -= d->size;
				u->stored_keys--;
				u->st.frees++;
				freed += (d->size + ps - 1) / ps;
				ubs_doom_remove(u, d);
				ubs_unlink(u, d);
				ubs_val_free(u, d);
			} else {
				u->st.errors[KVB_CALL_ZERO]++;
				if (!u->logged_delete_fail++)
					fprintf(stderr,
						"offloadfs: ubsio: cannot delete value '%s' (%d); "
						"kept in the journal, retried at the next sync\n",
						d->skey, res[i]);
			}
		}
		pthread_mutex_unlock(&u->lock);
	}
	return freed;
}

/*
 * A journal sync failed.  Linux reports a writeback error to one sync
 * only, so a later sync that succeeds says nothing of the lines written
 * before: count every line as gone (a new generation, without truncating),
 * so that each key is journalled and synced again before it is relied on.
 * Under u->lock.
 */
static void ubs_jsync_failed(struct ubs *u)
{
	struct ubs_val *d[UBS_BATCH], *v;
	size_t n = 0;

	u->jgen++;
	u->jsynced = u->jlen;
	/* Doomed values' lines are counted lost with the rest: write them again. */
	for (v = u->doomed_head; v; v = v->dnext) {
		if (!v->skey)
			continue;
		d[n++] = v;
		if (n == UBS_BATCH) {
			(void)ubs_journal(u, "D", d, n);
			n = 0;
		}
	}
	if (n)
		(void)ubs_journal(u, "D", d, n);
}

/*
 * Make the journal durable up to len in generation gen.  0 when it is;
 * -ESTALE when the generation changed (a reset emptied the journal, or a
 * failed sync counted its lines lost): journal them again; -EIO when the
 * sync failed.  A caller whose lines an earlier sync covered does not sync
 * again.  Called without u->lock.
 */
int ubs_jsync(struct ubs *u, uint64_t gen, off_t len)
{
	int ret = 0;

	pthread_mutex_lock(&u->jslock);
	pthread_mutex_lock(&u->lock);
	if (u->jgen != gen)
		ret = -ESTALE;
	else if (u->jsynced >= len)
		ret = 1;
	else
		len = u->jlen; /* everything appended so far */
	pthread_mutex_unlock(&u->lock);
	if (!ret) {
		int failed = fdatasync(u->jfd) != 0;

		pthread_mutex_lock(&u->lock);
		if (failed) {
			ubs_jsync_failed(u);
			ret = -EIO;
		} else if (u->jsynced < len) {
			u->jsynced = len; /* gen cannot have changed: resets take jslock */
		}
		pthread_mutex_unlock(&u->lock);
	}
	pthread_mutex_unlock(&u->jslock);
	return ret < 0 ? ret : 0;
}

/*
 * Start the journal afresh: truncate it and write the next vid, so that
 * vids are never reused even after every line naming them is gone.
 * Under u->lock or single-threaded.
 */
int ubs_journal_reset(struct ubs *u)
{
	char line[40];
	int n = snprintf(line, sizeof(line), "V %" PRIu64 "\n", u->next_vid);

	ssize_t w;

	if (ftruncate(u->jfd, 0))
		return -errno;
	u->jlen = 0;
	u->jsynced = 0;
	u->jgen++;
	w = write(u->jfd, line, (size_t)n);
	if (w != n) {
		/* A torn V line would swallow the next append's first line at replay. */
		if (w > 0 && ftruncate(u->jfd, 0))
			ubs_journal_lost_length(u);
		return -EIO;
	}
	/* The file holds it now, synced or not: appends (and cut-backs) go after it. */
	u->jlen = n;
	u->jtorn = 0;
	if (fdatasync(u->jfd))
		return -EIO;
	u->jsynced = n;
	u->jdirty = 0;
	return 0;
}

/* Empty the journal when nothing in it can still need a delete. */
void ubs_journal_trim(struct ubs *u)
{
	pthread_mutex_lock(&u->jslock);
	pthread_mutex_lock(&u->lock);
	if (u->jdirty && !u->ndoomed && !u->nputting && u->commit_epoch < u->barrier_epoch) {
		if (ubs_journal_reset(u) == 0) {
			u->logged_delete_fail = 0;
		} else {
			ubs_jsync_failed(u);
			u->jdirty = 1; /* try again at the next release */
		}
	}
	pthread_mutex_unlock(&u->lock);
	pthread_mutex_unlock(&u->jslock);
}

/* ---- puts ---- */

/*
 * Put a batch: journal every key and sync the journal (a crash after the
 * put must find the key to delete it), then the batch calls.
 */
static void ubs_put_batch(struct ubs *u, struct ubs_req *list)
{
	const char *keys[UBS_BATCH];
	void *bufs[UBS_BATCH];
	size_t lens[UBS_BATCH];
	int res[UBS_BATCH];
	struct ubs_put *p[UBS_BATCH], *q[UBS_BATCH];
	struct ubs_req *it = list;
	uint32_t i, n, m;
	unsigned calls;

	while (it) {
		for (n = 0; it && n < UBS_BATCH; it = it->next, n++)
			p[n] = (struct ubs_put *)it;
		/*
		 * Each key's line durable first (one sync covers the batch); a put
		 * whose line a failed sync counted lost is not issued (-EIO).
		 */
		for (i = 0, m = 0; i < n; i++) {
			p[i]->rc = ubs_jsync(u, p[i]->jgen, p[i]->jend);
			if (p[i]->rc == -ESTALE)
				p[i]->rc = -EIO;
			/* The library stores no empty value and no key it cannot take. */
			if (!p[i]->rc && (!ubs_key_ok(p[i]->key) || !p[i]->len || !p[i]->buf))
				p[i]->rc = -EINVAL;
			if (p[i]->rc)
				continue;
			q[m] = p[i];
			keys[m] = p[i]->key;
			bufs[m] = p[i]->buf;
			lens[m] = p[i]->len;
			res[m++] = UBS_NO_RESULT;
		}
		if (!m)
			continue;
		calls = ubs_batch_call(ubs_bput_call, keys, bufs, lens, res, m);
		pthread_mutex_lock(&u->lock);
		u->st.calls[KVB_CALL_WRITE] += calls;
		for (i = 0; i < m; i++) {
			/*
			 * A full cache answers a put with "retry" once the storage
			 * SDK's own retries are spent (boostio's sdk/bio.cpp maps
			 * nothing to "no space"); a put is never of a missing value.
			 */
			q[i]->rc = res[i] == UBS_ERETRY ? -ENOSPC : ubs_errno(res[i]);
			if (q[i]->rc == -ENOENT)
				q[i]->rc = -EIO;
			if (q[i]->rc)
				u->st.errors[KVB_CALL_WRITE]++;
		}
		pthread_mutex_unlock(&u->lock);
	}
}

/* Put one value, batched with every put that arrives while a batch is in flight. */
int ubs_put(struct ubs *u, struct ubs_put *p)
{
	ubs_queue_run(u, &u->puts, &p->r, ubs_put_batch);
	return p->rc;
}
