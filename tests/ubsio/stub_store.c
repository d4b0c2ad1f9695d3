/*
 * stub_store.c: the UBSIO stand-in's value store, under the API in
 * ubsio_stub.c (whose header comment says how it behaves): the values'
 * files in $UBSIO_STUB_DIR, the index of them, the write-back flusher,
 * eviction, injected faults and BatchGet's pool blocks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "stub.h"

pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;

struct stub_state st = { .dirfd = -1, .logfd = -1 };


static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- keys and files ---- */

static void key_path(const char *key, size_t klen, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i, o = 0, hlen = 2 * klen;

	for (i = 0; i < hlen; i++) {
		unsigned char c = (unsigned char)key[i / 2];

		if (i && i % STUB_SEG == 0) {
			out[o++] = '+';
			out[o++] = '/';
		}
		out[o++] = hx[i % 2 ? c & 15 : c >> 4];
	}
	out[o] = '\0';
}

/* Create the "+" directories above rel: 0 or an errno. */
static int make_parents(const char *rel)
{
	char path[STUB_REL_MAX];
	char *p;

	strcpy(path, rel);
	for (p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdirat(st.dirfd, path, 0755) && errno != EEXIST)
			return errno;
		*p = '/';
	}
	return 0;
}

/* Remove the "+" directories above rel that are now empty. */
static void remove_parents(const char *rel)
{
	char path[STUB_REL_MAX];
	char *p;

	strcpy(path, rel);
	while ((p = strrchr(path, '/'))) {
		*p = '\0';
		if (unlinkat(st.dirfd, path, AT_REMOVEDIR))
			break;
	}
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write a value's file (temporary, then rename): 0 or an errno. */
static int file_write(const char *key, size_t klen, const void *buf, size_t len)
{
	char rel[STUB_REL_MAX], tmp[64];
	int fd, e;

	key_path(key, klen, rel);
	e = make_parents(rel);
	if (e)
		return e;
	snprintf(tmp, sizeof(tmp), ".tmp-%ld-%" PRIu64, (long)getpid(), ++st.tmpseq);
	fd = openat(st.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno;
	if (write_all(fd, buf, len) || (st.fsync && fsync(fd))) {
		e = errno;
		close(fd);
		unlinkat(st.dirfd, tmp, 0);
		return e;
	}
	if (close(fd) || renameat(st.dirfd, tmp, st.dirfd, rel)) {
		e = errno;
		unlinkat(st.dirfd, tmp, 0);
		return e;
	}
	return 0;
}

/* Remove a value's file: 0 (also when there was none) or an errno. */
static int file_remove(const char *key, size_t klen)
{
	char rel[STUB_REL_MAX];

	key_path(key, klen, rel);
	if (unlinkat(st.dirfd, rel, 0)) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return errno;
	}
	if (strchr(rel, '/'))
		remove_parents(rel);
	return 0;
}

/* ---- the index ---- */

static uint64_t key_hash(const char *key, size_t klen)
{
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < klen; i++) {
		h ^= (unsigned char)key[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static struct entry *idx_find(const char *key, size_t klen)
{
	struct entry *e;

	if (!st.nbuckets)
		return NULL;
	for (e = st.buckets[key_hash(key, klen) & (st.nbuckets - 1)]; e; e = e->hnext)
		if (e->klen == klen && !memcmp(e->key, key, klen))
			return e;
	return NULL;
}

static void age_unlink(struct entry *e)
{
	if (e->aprev)
		e->aprev->anext = e->anext;
	else
		st.ahead = e->anext;
	if (e->anext)
		e->anext->aprev = e->aprev;
	else
		st.atail = e->aprev;
	e->aprev = e->anext = NULL;
}

static void age_append(struct entry *e)
{
	e->aprev = st.atail;
	e->anext = NULL;
	if (st.atail)
		st.atail->anext = e;
	else
		st.ahead = e;
	st.atail = e;
}

static bool pending(const struct entry *e)
{
	return e->data != NULL;
}

static void pend_unlink(struct entry *e)
{
	if (e->pprev)
		e->pprev->pnext = e->pnext;
	else
		st.phead = e->pnext;
	if (e->pnext)
		e->pnext->pprev = e->pprev;
	else
		st.ptail = e->pprev;
	e->pprev = e->pnext = NULL;
}

static void pend_append(struct entry *e)
{
	e->pprev = st.ptail;
	e->pnext = NULL;
	if (st.ptail)
		st.ptail->pnext = e;
	else
		st.phead = e;
	st.ptail = e;
}

/* Drop e's pending copy (written or discarded). */
static void unpend(struct entry *e)
{
	if (!pending(e))
		return;
	pend_unlink(e);
	free(e->data);
	e->data = NULL;
}

static int idx_grow(void)
{
	size_t nb = st.nbuckets ? st.nbuckets * 2 : 1024, i;
	struct entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return -1;
	for (i = 0; i < st.nbuckets; i++) {
		struct entry *e = st.buckets[i], *next;

		for (; e; e = next) {
			size_t h = key_hash(e->key, e->klen) & (nb - 1);

			next = e->hnext;
			e->hnext = b[h];
			b[h] = e;
		}
	}
	free(st.buckets);
	st.buckets = b;
	st.nbuckets = nb;
	return 0;
}

/* A new, empty entry for key at the young end, or NULL. */
static struct entry *idx_add(const char *key, size_t klen)
{
	struct entry *e;
	size_t h;

	if (st.nentries >= st.nbuckets && idx_grow())
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = malloc(klen + 1);
	if (!e->key) {
		free(e);
		return NULL;
	}
	memcpy(e->key, key, klen);
	e->key[klen] = '\0';
	e->klen = klen;
	h = key_hash(key, klen) & (st.nbuckets - 1);
	e->hnext = st.buckets[h];
	st.buckets[h] = e;
	st.nentries++;
	age_append(e);
	return e;
}

static void idx_remove(struct entry *e)
{
	struct entry **pp = &st.buckets[key_hash(e->key, e->klen) & (st.nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	st.nentries--;
	age_unlink(e);
	unpend(e);
	st.used = st.used >= e->size ? st.used - e->size : 0;
	free(e->key);
	free(e);
}

void idx_clear(void)
{
	while (st.ahead)
		idx_remove(st.ahead);
	free(st.buckets);
	st.buckets = NULL;
	st.nbuckets = 0;
	st.used = 0;
}

/* Write every pending value due by now (all when all is set). */
void flush_due(bool all)
{
	uint64_t now = now_ms();

	while (st.phead && (all || st.phead->due_ms <= now)) {
		struct entry *e = st.phead;
		int err = file_write(e->key, e->klen, e->data, (size_t)e->size);

		if (err) {
			/* Keep it in memory and try again at the next round. */
			fprintf(stderr, "ubsio_stub: writing a value: %s\n", strerror(err));
			pend_unlink(e);
			e->due_ms = now + (st.flush_ms ? st.flush_ms : 1000);
			pend_append(e);
			if (!all)
				break;
			continue;
		}
		unpend(e);
	}
}

void *flusher_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&stub_lock);
	while (!st.flusher_stop) {
		struct timespec ts;
		uint64_t due;

		flush_due(false);
		due = st.phead ? st.phead->due_ms : now_ms() + 60000;
		ts.tv_sec = (time_t)(due / 1000);
		ts.tv_nsec = (long)(due % 1000) * 1000000;
		pthread_cond_timedwait(&st.cond, &stub_lock, &ts);
	}
	pthread_mutex_unlock(&stub_lock);
	return NULL;
}

/* Stop the flusher; called with the lock held, returns with it held. */
void flusher_stop(void)
{
	if (!st.flusher_on)
		return;
	st.flusher_stop = true;
	pthread_cond_signal(&st.cond);
	pthread_mutex_unlock(&stub_lock);
	pthread_join(st.flusher, NULL);
	pthread_mutex_lock(&stub_lock);
	st.flusher_on = false;
	st.flusher_stop = false;
}

/* ---- values ---- */

/* Discard the oldest values until the total is under the eviction mark. */
static void evict(void)
{
	char esc[STUB_ESC_MAX];

	while (st.evict_at && st.used > st.evict_at && st.ahead) {
		struct entry *e = st.ahead;

		if (file_remove(e->key, e->klen))
			break;
		if (st.logfd >= 0) {
			key_escape(e->key, e->klen, esc);
			stub_log("Evict %s", esc);
		}
		idx_remove(e);
	}
}

static int value_put(const char *key, size_t klen, const void *buf, size_t len)
{
	struct entry *e = idx_find(key, klen);
	uint64_t old = e ? e->size : 0, base = st.used >= old ? st.used - old : 0;
	unsigned char *copy = NULL;
	int err;

	if (st.capacity && ((uint64_t)len > st.capacity || base > st.capacity - len))
		return C_NEED_RETRY;
	if (st.flush_ms) {
		copy = malloc(len);
		if (!copy)
			return C_NEED_RETRY;
		memcpy(copy, buf, len);
	} else {
		err = file_write(key, klen, buf, len);
		if (err)
			return err == ENOSPC || err == EDQUOT ? C_NEED_RETRY : C_DISK_FAULT;
	}
	if (!e) {
		e = idx_add(key, klen);
		if (!e) {
			free(copy);
			return C_NEED_RETRY;
		}
	} else {
		unpend(e);
		age_unlink(e);
		age_append(e);
	}
	e->size = len;
	st.used = base + len;
	if (copy) {
		e->data = copy;
		e->due_ms = now_ms() + st.flush_ms;
		pend_append(e);
		/* The flusher sleeps until the oldest is due, or for long when none is. */
		if (st.phead == e)
			pthread_cond_signal(&st.cond);
	}
	evict();
	return 0;
}

/*
 * Read key's value: *size gets its size; copies min(size, len) bytes to buf
 * (buf NULL: nothing).  With exact, a value shorter than len is V_SHORT and
 * nothing is copied.  A value indexed whose file is gone is dropped.
 */
int value_read(const char *key, size_t klen, void *buf, size_t len, bool exact,
	       uint64_t *size)
{
	struct entry *e = idx_find(key, klen);
	char rel[STUB_REL_MAX];
	struct stat sb;
	size_t want, done = 0;
	int fd;

	if (e && pending(e)) {
		*size = e->size;
		if (exact && len > e->size)
			return V_SHORT;
		if (buf)
			memcpy(buf, e->data, len < e->size ? len : (size_t)e->size);
		return V_OK;
	}
	key_path(key, klen, rel);
	fd = openat(st.dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return V_IOERR;
		if (e)
			idx_remove(e);
		return V_MISSING;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return V_IOERR;
	}
	*size = (uint64_t)sb.st_size;
	if (e && e->size != *size) {
		/* Changed behind the library's back: take the file's word. */
		st.used = st.used - e->size + *size;
		e->size = *size;
	}
	if (sb.st_size == 0) {
		/* Stat size 0 is "missing" to the library (K/kvc/kv_operation.cpp:97,114). */
		close(fd);
		return V_MISSING;
	}
	if (exact && len > *size) {
		close(fd);
		return V_SHORT;
	}
	want = buf ? (len < *size ? len : (size_t)*size) : 0;
	while (done < want) {
		ssize_t n = read(fd, (char *)buf + done, want - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return V_IOERR;
		}
		done += (size_t)n;
	}
	close(fd);
	return V_OK;
}

#ifndef UBSIO_STUB_OMIT_DELETE
static int value_delete(const char *key, size_t klen)
{
	struct entry *e = idx_find(key, klen);

	if (file_remove(key, klen))
		return C_DISK_FAULT;
	if (e)
		idx_remove(e);
	return 0;
}
#endif

/* ---- faults ---- */

/*
 * A batch of several keys, one of which contains UBSIO_STUB_FAIL_BATCH_KEYS,
 * fails as a whole: an SDK-level failure of the call, which the library
 * returns as 1 without copying any result (dev:K/kvc/ubsio_kvc.cpp:99-103).
 * Under the lock.
 */
bool batch_faulty(const char *op, const char **keys, uint32_t n)
{
	uint32_t i;

	if (!st.fail_batch_keys || n < 2)
		return false;
	for (i = 0; i < n; i++)
		if (strstr(keys[i], st.fail_batch_keys)) {
			stub_log("%s %" PRIu32 " 1", op, n);
			return true;
		}
	return false;
}

static bool key_faulty(const char *key)
{
	return st.fail_keys && strstr(key, st.fail_keys);
}

/* Count one call of a kind and say whether it is to fail. */
bool count_fault(uint64_t *count, uint64_t fail_at, const char *key)
{
	++*count;
	return (fail_at && *count == fail_at) || key_faulty(key);
}

/* ---- one key, checked, with the lock held and the library initialised ---- */

int do_put(const char *key, const void *buf, size_t len)
{
	if (count_fault(&st.puts, st.fail_put, key))
		return (int)st.fault_rc;
	return value_put(key, strlen(key), buf, len);
}

int do_get(const char *key, void *buf, size_t len)
{
	uint64_t size;

	if (count_fault(&st.gets, st.fail_get, key))
		return (int)st.fault_rc;
	switch (value_read(key, strlen(key), buf, len, false, &size)) {
	case V_OK:
		return 0;
	case V_MISSING:
		return C_NOT_FOUND;
	default:
		return C_DISK_FAULT;
	}
}

/* The value's size, or false when missing or failing. */
bool do_stat(const char *key, uint64_t *size)
{
	if (key_faulty(key))
		return false;
	return value_read(key, strlen(key), NULL, 0, false, size) == V_OK;
}

#ifndef UBSIO_STUB_OMIT_DELETE
int do_delete(const char *key)
{
	if (count_fault(&st.deletes, st.fail_delete, key))
		return (int)st.fault_rc;
	return value_delete(key, strlen(key));
}
#endif

/* ---- the pool of BatchGet blocks ---- */

static size_t pool_hash(const void *p)
{
	return ((uintptr_t)p >> 12) % POOL_BUCKETS;
}

void *pool_alloc(void)
{
	struct pblock *b;

	if (st.pool_max && st.pool_out >= st.pool_max)
		return NULL;
	b = malloc(sizeof(*b));
	if (!b)
		return NULL;
	b->p = malloc(STUB_POOL_BLOCK);
	if (!b->p) {
		free(b);
		return NULL;
	}
	b->next = st.pool[pool_hash(b->p)];
	st.pool[pool_hash(b->p)] = b;
	st.pool_out++;
	return b->p;
}

/* Free p if it is a pool block; say whether it was. */
bool pool_free(void *p)
{
	struct pblock **pp, *b;

	if (!p)
		return false;
	for (pp = &st.pool[pool_hash(p)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->p == p) {
			b = *pp;
			*pp = b->next;
			free(b->p);
			free(b);
			st.pool_out--;
			return true;
		}
	}
	return false;
}

void pool_clear(void)
{
	size_t i;

	for (i = 0; i < POOL_BUCKETS; i++)
		while (st.pool[i])
			pool_free(st.pool[i]->p);
}

/* ---- indexing the directory at Init ---- */

/* Decode a hex name of n characters into out; false when it is not hex. */
static bool unhex(const char *s, size_t n, char *out)
{
	size_t i;

	if (n % 2)
		return false;
	for (i = 0; i < n; i++) {
		int v = s[i] >= '0' && s[i] <= '9' ? s[i] - '0' :
			s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10 : -1;

		if (v < 0)
			return false;
		if (i % 2)
			out[i / 2] = (char)((out[i / 2] << 4) | v);
		else
			out[i / 2] = (char)v;
	}
	return n > 0;
}

/* A leftover ".tmp-<pid>-<seq>" whose process is gone. */
static bool stale_tmp(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, ".tmp-", 5))
		return false;
	errno = 0;
	pid = strtol(name + 5, &end, 10);
	if (errno || end == name + 5 || *end != '-' || pid <= 0)
		return false;
	return kill((pid_t)pid, 0) && errno == ESRCH;
}

struct found {
	char *key;
	size_t klen;
	uint64_t size;
	struct timespec mtime;
};

struct found_list {
	struct found *v;
	size_t n, cap;
};

static int found_add(struct found_list *l, const char *key, size_t klen, const struct stat *sb)
{
	struct found *f;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct found *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	f = &l->v[l->n];
	f->key = malloc(klen + 1);
	if (!f->key)
		return -1;
	memcpy(f->key, key, klen);
	f->key[klen] = '\0';
	f->klen = klen;
	f->size = (uint64_t)sb->st_size;
	f->mtime = sb->st_mtim;
	l->n++;
	return 0;
}

static int found_cmp(const void *a, const void *b)
{
	const struct found *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return 0;
}

/*
 * Collect the values under fd (which this takes over); prefix holds the key
 * bytes of the "+" directories above, plen of them.
 */
static int scan(int fd, char *prefix, size_t plen, struct found_list *l)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(fd);
		return -1;
	}
	while (!rc && (de = readdir(d))) {
		const char *name = de->d_name;
		size_t n = strlen(name);
		struct stat sb;

		if (name[0] == '.') {
			if (plen == 0 && stale_tmp(name))
				unlinkat(dirfd(d), name, 0);
			continue;
		}
		if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISDIR(sb.st_mode) && n == STUB_SEG + 1 && name[n - 1] == '+' &&
		    plen + STUB_SEG / 2 < STUB_KEY_MAX && unhex(name, n - 1, prefix + plen)) {
			int sub = openat(dirfd(d), name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			rc = sub < 0 ? -1 : scan(sub, prefix, plen + STUB_SEG / 2, l);
		} else if (S_ISREG(sb.st_mode) && n <= STUB_SEG && plen + n / 2 <= STUB_KEY_MAX &&
			   unhex(name, n, prefix + plen)) {
			rc = found_add(l, prefix, plen + n / 2, &sb);
		}
	}
	closedir(d);
	return rc;
}

/* Index the values in the directory, oldest first. */
int index_dir(void)
{
	struct found_list l = { 0 };
	char prefix[STUB_KEY_MAX + 1];
	size_t i;
	int fd, rc;

	fd = openat(st.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = fd < 0 ? -1 : scan(fd, prefix, 0, &l);
	if (!rc && l.n)
		qsort(l.v, l.n, sizeof(*l.v), found_cmp);
	for (i = 0; i < l.n; i++) {
		struct entry *e = rc ? NULL : idx_add(l.v[i].key, l.v[i].klen);

		if (e) {
			e->size = l.v[i].size;
			st.used += e->size;
		} else {
			rc = -1;
		}
		free(l.v[i].key);
	}
	free(l.v);
	return rc;
}
