/*
 * store.c: open, recover and close a store.  See store.h and DESIGN.md.
 */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* prev_bucket of a durable previous version that was empty (no pages). */
#define STORE_PREV_EMPTY (-2)

int ofs_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default:
		return -EINVAL;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* a and b (paths that exist, or their directories) are on one filesystem. */
static int store_same_fs(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev;
}

int ofs_geom_valid(const struct meta_geom *g, char *err, size_t errlen)
{
	uint64_t ps = g->page_size;

	if (ps < OFS_PAGE_SIZE_MIN || ps > OFS_PAGE_SIZE_MAX || (ps & (ps - 1))) {
		snprintf(err, errlen, "invalid page_size %llu: a power of two from 4096 to 1G",
			 (unsigned long long)ps);
		return -EINVAL;
	}
	if (g->bucket_count < 1 || g->bucket_count > 256) {
		snprintf(err, errlen, "invalid bucket_count %u: 1..256", g->bucket_count);
		return -EINVAL;
	}
	if (g->bucket_size < ps || g->bucket_size % ps) {
		snprintf(err, errlen, "invalid bucket_size %llu: a multiple of page_size %llu",
			 (unsigned long long)g->bucket_size, (unsigned long long)ps);
		return -EINVAL;
	}
	return 0;
}

static int store_is_bucket_name(const char *n)
{
	return strlen(n) == 14 && !strncmp(n, "bucket_", 7) && !strcmp(n + 9, ".data") &&
	       strchr("0123456789abcdef", n[7]) && strchr("0123456789abcdef", n[8]) && n[7] &&
	       n[8];
}

/*
 * Only our own files may be in ROOT: bucket files, our database and its
 * sqlite side files, and lost+found (the root of a fresh ext4).
 */
static int store_scan_root(const char *root, const char *dbpath, int *buckets, char *err,
			   size_t errlen)
{
	char dbdir[PATH_MAX], *slash;
	const char *dbbase = NULL;
	struct dirent *de;
	DIR *d;
	int foreign = 0;
	char first[NAME_MAX + 1] = "";

	*buckets = 0;
	/* The database counts as ours only when it lives in ROOT itself. */
	snprintf(dbdir, sizeof(dbdir), "%s", dbpath);
	slash = strrchr(dbdir, '/');
	if (slash) {
		char a[PATH_MAX], b[PATH_MAX];

		*slash = '\0';
		if (realpath(dbdir[0] ? dbdir : "/", a) && realpath(root, b) && !strcmp(a, b))
			dbbase = slash + 1 - dbdir + dbpath;
	}
	d = opendir(root);
	if (!d) {
		snprintf(err, errlen, "cannot read ROOT %s: %s", root, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		size_t bl = dbbase ? strlen(dbbase) : 0;
		struct stat st;

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		/* Followed, a link would send object bytes or the database elsewhere. */
		if (!fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode)) {
			snprintf(err, errlen, "ROOT %s holds a symbolic link '%s'; refusing to use "
				 "it: the store's files must be regular files in ROOT itself",
				 root, n);
			closedir(d);
			return -ELOOP;
		}
		if (!strcmp(n, "lost+found"))
			continue;
		if (store_is_bucket_name(n)) {
			(*buckets)++;
			continue;
		}
		if (!strcmp(n, KVB_UBSIO_JOURNAL))
			continue;
		if (dbbase && !strncmp(n, dbbase, bl) &&
		    (!n[bl] || !strcmp(n + bl, "-wal") || !strcmp(n + bl, "-shm") ||
		     !strcmp(n + bl, "-journal") || !strcmp(n + bl, OFS_RESERVE_SUFFIX)))
			continue;
		if (!foreign++)
			snprintf(first, sizeof(first), "%s", n);
	}
	closedir(d);
	if (foreign) {
		snprintf(err, errlen,
			 "ROOT %s holds %d file(s) offloadfs did not create (first: '%s'); "
			 "refusing to use it: give an empty directory or an offloadfs store",
			 root, foreign, first);
		return -EEXIST;
	}
	return 0;
}

/*
 * ROOT 0700 and its files 0600; with a data group, ROOT 0750 and the
 * bucket files 0640 in that group, so its members can pread objects
 * (the database, with every tenant's keys, stays 0600).  Applied to an
 * existing store too, so a mount without data_group takes the access back.
 */
static int store_set_mode(int fd, const char *what, mode_t mode, gid_t gid, int set_gid,
			  char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st)) {
		snprintf(err, errlen, "%s: %s", what, strerror(errno));
		return -errno;
	}
	if (set_gid && st.st_gid != gid && fchown(fd, (uid_t)-1, gid)) {
		snprintf(err, errlen, "cannot give %s to group %u: %s", what, (unsigned)gid,
			 strerror(errno));
		return -errno;
	}
	if ((st.st_mode & 07777) != mode && fchmod(fd, mode)) {
		snprintf(err, errlen, "cannot set the mode of %s to %04o: %s", what, (unsigned)mode,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

static int store_set_modes(struct ofs_store *s, const struct ofs_config *cfg, char *err,
			   size_t errlen)
{
	const char *sfx[] = { "", "-wal", "-shm", "-journal" };
	char path[PATH_MAX + 16];
	struct dirent *de;
	DIR *d;
	int fd, ret = 0;
	size_t i;

	fd = dup(s->lock_fd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "cannot read ROOT %s: %s", s->root, strerror(errno));
		return -errno;
	}
	rewinddir(d);
	while (!ret && (de = readdir(d))) {
		int bucket = store_is_bucket_name(de->d_name);

		fd = openat(s->lock_fd, de->d_name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->root, de->d_name);
		{
			struct stat st;

			/* Directories (lost+found) are not ours to change. */
			if (!fstat(fd, &st) && S_ISREG(st.st_mode))
				ret = store_set_mode(fd, path,
						     bucket && cfg->has_data_gid ? 0640 : 0600,
						     cfg->data_gid, bucket && cfg->has_data_gid,
						     err, errlen);
		}
		close(fd);
	}
	closedir(d);
	/* A database elsewhere (meta=) is as private as one in ROOT. */
	for (i = 0; !ret && i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", s->meta_path, sfx[i]);
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		ret = store_set_mode(fd, path, 0600, 0, 0, err, errlen);
		close(fd);
	}
	return ret;
}

int ofs_store_lock(const char *root, int *lock_fd, char *err, size_t errlen)
{
	struct stat st;
	int i, fd;

	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open ROOT %s: %s", root, strerror(errno));
		return -errno;
	}
	/*
	 * A daemon unmounted a moment ago still saves its snapshot, holding
	 * the lock: wait for it rather than fail a remount.
	 */
	for (i = 0; flock(fd, LOCK_EX | LOCK_NB); i++) {
		int e = errno;

		if (e != EWOULDBLOCK || i == 300) {
			close(fd);
			if (e == EWOULDBLOCK)
				snprintf(err, errlen,
					 "ROOT %s is in use by another offloadfs process "
					 "(a mounted daemon or offloadctl fsck)", root);
			else
				snprintf(err, errlen, "cannot lock ROOT %s: %s", root, strerror(e));
			return e == EWOULDBLOCK ? -EBUSY : -e;
		}
		usleep(10000);
	}
	/* Checked here so that sqlite does not report it as a damaged database. */
	if (fstat(fd, &st) || faccessat(fd, ".", R_OK | W_OK | X_OK, AT_EACCESS)) {
		int e = errno;

		close(fd);
		snprintf(err, errlen, "ROOT %s is not %s: %s", root,
			 e == EROFS ? "writable" : "readable and writable", strerror(e));
		return -e;
	}
	*lock_fd = fd;
	return 0;
}

/* 1 when root holds a bucket file (or cannot be read: assume it does). */
static int store_has_buckets(const char *root)
{
	struct dirent *de;
	DIR *d = root ? opendir(root) : NULL;
	int found = 0;

	if (!d)
		return 1;
	while (!found && (de = readdir(d)))
		found = store_is_bucket_name(de->d_name);
	closedir(d);
	return found;
}

static int store_geom_check(const struct ofs_config *cfg, const struct meta_geom *have,
			    char *err, size_t errlen)
{
	if (cfg->set_page_size && cfg->geom.page_size != have->page_size) {
		snprintf(err, errlen, "geometry mismatch: page_size=%llu requested, store has %llu",
			 (unsigned long long)cfg->geom.page_size,
			 (unsigned long long)have->page_size);
		return -EINVAL;
	}
	if (cfg->set_bucket_size && cfg->geom.bucket_size != have->bucket_size) {
		snprintf(err, errlen,
			 "geometry mismatch: bucket_size=%llu requested, store has %llu",
			 (unsigned long long)cfg->geom.bucket_size,
			 (unsigned long long)have->bucket_size);
		return -EINVAL;
	}
	if (cfg->set_bucket_count && cfg->geom.bucket_count != have->bucket_count) {
		snprintf(err, errlen, "geometry mismatch: bucket_count=%u requested, store has %u",
			 cfg->geom.bucket_count, have->bucket_count);
		return -EINVAL;
	}
	return 0;
}

/* Bytes available to us on the filesystem holding the metadata; -1 when unknown. */
static int64_t store_meta_avail(const struct ofs_store *s)
{
	struct statvfs v;

	if (statvfs(s->meta_path, &v))
		return -1;
	return (int64_t)((uint64_t)v.f_bavail * v.f_frsize);
}

/* Give the reserve's blocks back; any thread (meta's full hook holds the metadata lock). */
static int store_reserve_release(struct ofs_store *s)
{
	if (s->reserve_fd < 0 || !__atomic_exchange_n(&s->reserve_held, 0, __ATOMIC_ACQ_REL))
		return 0;
	return ftruncate(s->reserve_fd, 0) == 0;
}

static int store_full_hook(void *arg)
{
	return store_reserve_release(arg);
}

/* Take the reserve's blocks, all or none.  Under sync_lock. */
static int store_reserve_arm(struct ofs_store *s)
{
	if (s->reserve_fd < 0 || s->reserve_held)
		return 0;
	if (fallocate(s->reserve_fd, 0, 0, (off_t)s->reserve_size)) {
		/* No fallocate on this filesystem: no reserve (and no checks for one). */
		if (errno == EOPNOTSUPP) {
			close(s->reserve_fd);
			s->reserve_fd = -1;
		} else if (ftruncate(s->reserve_fd, 0)) {
			/* nothing more to give back */
		}
		return 0;
	}
	__atomic_store_n(&s->reserve_held, 1, __ATOMIC_RELEASE);
	return 1;
}

/*
 * Open DB-reserve (create: make it) and size the reserve.  On a disk
 * already short of space the file is emptied before anything else writes:
 * recovery and the snapshot of this open may need those blocks.  Nothing
 * fails here: a filesystem without fallocate simply has no reserve.
 */
static void store_reserve_open(struct ofs_store *s, int create)
{
	char path[PATH_MAX + 16], dir[PATH_MAX], *slash;
	struct statvfs v;
	struct stat st;
	int64_t avail;

	snprintf(path, sizeof(path), "%s" OFS_RESERVE_SUFFIX, s->meta_path);
	/* A new store's database does not exist yet: its directory then. */
	snprintf(dir, sizeof(dir), "%s", s->meta_path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (statvfs(s->meta_path, &v) && statvfs(slash && dir[0] ? dir : slash ? "/" : ".", &v))
		return;
	s->reserve_size = (uint64_t)v.f_blocks * v.f_frsize / 8;
	if (s->reserve_size > OFS_RESERVE_MAX)
		s->reserve_size = OFS_RESERVE_MAX;
	s->reserve_size &= ~4095ULL;
	if (!s->reserve_size)
		return;
	s->reserve_fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
	if (s->reserve_fd < 0)
		return;
	s->reserve_held = fstat(s->reserve_fd, &st) == 0 &&
			  (uint64_t)st.st_blocks * 512 >= s->reserve_size;
	avail = store_meta_avail(s);
	if (avail >= 0 && (uint64_t)avail < s->reserve_size) {
		s->reserve_held = 1;
		store_reserve_release(s);
	}
}

int ofs_store_space(struct ofs_store *s, pthread_mutex_t *meta_lock, int full)
{
	int64_t avail;
	int did = 0;

	pthread_mutex_lock(&s->sync_lock);
	avail = store_meta_avail(s);
	if (s->reserve_fd >= 0 && avail >= 0) {
		if (full || (uint64_t)avail < s->reserve_size) {
			if (store_reserve_release(s))
				did |= OFS_SPACE_RELEASED;
			/* The log's blocks too: a truncating checkpoint empties it. */
			if (meta_lock)
				pthread_mutex_lock(meta_lock);
			if (meta_checkpoint(s->meta) == 0)
				did |= OFS_SPACE_CHECKPOINTED;
			if (meta_lock)
				pthread_mutex_unlock(meta_lock);
		} else if (!__atomic_load_n(&s->reserve_held, __ATOMIC_ACQUIRE) &&
			   (uint64_t)avail >= 3 * s->reserve_size &&
			   store_reserve_arm(s)) {
			did |= OFS_SPACE_ARMED;
		}
	}
	pthread_mutex_unlock(&s->sync_lock);
	return did;
}

void ofs_reserve_give_back(const char *meta_path)
{
	char path[PATH_MAX + 16];
	struct statvfs v;
	struct stat st;

	snprintf(path, sizeof(path), "%s" OFS_RESERVE_SUFFIX, meta_path);
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && statvfs(meta_path, &v) == 0 &&
	    (uint64_t)v.f_bavail * v.f_frsize < (uint64_t)st.st_blocks * 512 && truncate(path, 0)) {
		/* nothing to give back */
	}
}

int ofs_store_meta_low(struct ofs_store *s)
{
	int64_t avail;

	if (s->reserve_fd < 0 || __atomic_load_n(&s->reserve_held, __ATOMIC_ACQUIRE))
		return 0;
	avail = store_meta_avail(s);
	return avail >= 0 && (uint64_t)avail < s->reserve_size / 2;
}

int ofs_store_sync(struct ofs_store *s, pthread_mutex_t *meta_lock, uint64_t *released)
{
	uint64_t g, mark, n = 0;
	int ret;

	pthread_mutex_lock(&s->sync_lock);
	/* Commits from here on get a newer generation: this barrier may miss their data. */
	if (meta_lock)
		pthread_mutex_lock(meta_lock);
	g = s->gen++;
	if (meta_lock)
		pthread_mutex_unlock(meta_lock);
	/* Data first: a durable record must never point at bytes that are not. */
	ret = kvb_barrier(&s->kvb, &mark);
	if (!ret) {
		if (meta_lock)
			pthread_mutex_lock(meta_lock);
		ret = meta_sync_begin(s->meta, g);
		/*
		 * Set now, before the log's fsync: the data of generation <= g is
		 * durable already, and a commit that sees it keeps its old version
		 * for recovery, which is never wrong.  Set after, a commit in
		 * between would let go of a version the fsync then makes durable.
		 */
		if (!ret)
			s->synced_gen = g;
		if (meta_lock)
			pthread_mutex_unlock(meta_lock);
	}
	/* Outside the lock: on a shared ROOT this fsync is a network round trip. */
	if (!ret)
		ret = meta_sync_end(s->meta);
	/*
	 * A checkpoint inside a commit meanwhile syncs the same file, and the
	 * kernel reports a write error once: it may have taken ours.  Under
	 * the lock, so a checkpoint that failed has said so.
	 */
	if (!ret) {
		if (meta_lock)
			pthread_mutex_lock(meta_lock);
		if (meta_log_failed(s->meta))
			ret = -EIO;
		if (meta_lock)
			pthread_mutex_unlock(meta_lock);
	}
	if (!ret)
		n = kvb_release_freed(&s->kvb, mark);
	pthread_mutex_unlock(&s->sync_lock);
	if (released)
		*released = n;
	return ret;
}

int ofs_store_commit(struct ofs_store *s, pthread_mutex_t *meta_lock, struct meta_inode *cur,
		     struct kvb_obj *obj)
{
	const uint64_t *pcsums = NULL;
	struct meta_inode m;
	struct kvb_map map = { 0 };
	enum meta_skey_op op;
	uint64_t csum;
	int ret;

	ret = kvb_obj_commit_prepare(&s->kvb, obj, 0, &map, &csum, &pcsums);
	if (ret)
		return ret;
	if (meta_lock)
		pthread_mutex_lock(meta_lock);
	m = *cur;
	op = META_SKEY_SET;
	/* Keep the last version a barrier made durable, for recovery after a power cut. */
	if (cur->state == META_COMMITTED && cur->gen <= s->synced_gen) {
		op = META_SKEY_KEEP_PREV;
		m.prev_bucket = cur->bucket >= 0 ? cur->bucket : STORE_PREV_EMPTY;
		m.prev_page = cur->page;
		m.prev_npages = cur->npages;
		m.prev_size = cur->size;
		m.prev_csum = cur->csum;
	}
	m.size = map.size;
	m.bucket = map.bucket;
	m.page = map.page;
	m.npages = map.npages;
	m.csum = csum;
	m.state = META_COMMITTED;
	m.gen = s->gen;
	ret = meta_commit_object(s->meta, &m, pcsums, map.bucket >= 0 ? map.npages : 0,
				 map.bucket >= 0 ? map.skey : NULL, op);
	if (!ret)
		*cur = m;
	if (meta_lock)
		pthread_mutex_unlock(meta_lock);
	kvb_obj_commit_done(&s->kvb, obj, ret == 0);
	return ret;
}

struct store_unsynced {
	struct meta_inode *v;
	size_t n, cap;
};

static int store_collect(void *ctx, const struct meta_inode *in)
{
	struct store_unsynced *u = ctx;

	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 64;
		struct meta_inode *v = realloc(u->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		u->v = v;
		u->cap = cap;
	}
	u->v[u->n++] = *in;
	return 0;
}

/*
 * After an unclean stop, a version committed after the last barrier may
 * have lost its data to a power cut while its record survived.  Check each
 * one against its checksum; fall back to the last durable version, or drop
 * the file when it had none.  After a daemon kill every check passes.
 */
static int store_verify_unsynced(struct ofs_store *s)
{
	struct store_unsynced u = { 0 };
	size_t i;
	int ret;

	ret = meta_foreach_unsynced(s->meta, s->synced_gen, store_collect, &u);
	for (i = 0; !ret && i < u.n; i++) {
		struct meta_inode *in = &u.v[i];
		struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };
		uint64_t csum;

		if (kvb_checksum(&s->kvb, &map, &csum) == 0 && csum == in->csum)
			continue;
		if (in->prev_bucket >= 0 || in->prev_bucket == STORE_PREV_EMPTY) {
			in->bucket = in->prev_bucket >= 0 ? in->prev_bucket : -1;
			in->page = in->prev_page;
			in->npages = in->prev_npages;
			in->size = in->prev_size;
			in->csum = in->prev_csum;
			in->prev_bucket = -1;
			ret = meta_commit_object(s->meta, in, NULL, 0, NULL, META_SKEY_REVERT);
			s->reverted++;
		} else {
			ret = meta_delete(s->meta, in->ino);
			s->dropped_corrupt++;
		}
	}
	free(u.v);
	if (!ret)
		ret = meta_prev_clear(s->meta);
	return ret;
}

/*
 * Values a KV store has lost without a power cut: the library keeps the
 * newest ones in a write-back cache inside this process, and evicts by
 * itself.  The ones the backend says are missing, as inode numbers.
 */
struct store_missing {
	struct ofs_store *s;
	struct kvb_map *maps;
	uint64_t *inos, *gone;
	int *res;
	size_t n, ngone, capgone;
};

#define STORE_PROBE_BATCH 16384

static int store_missing_flush(struct store_missing *m)
{
	size_t i;
	int ret = m->n ? kvb_probe(&m->s->kvb, m->maps, m->n, m->res) : 0;

	for (i = 0; !ret && i < m->n; i++) {
		if (m->res[i] != -ENOENT)
			continue;
		if (m->ngone == m->capgone) {
			size_t cap = m->capgone ? m->capgone * 2 : 64;
			uint64_t *g = realloc(m->gone, cap * sizeof(*g));

			if (!g)
				return -ENOMEM;
			m->gone = g;
			m->capgone = cap;
		}
		m->gone[m->ngone++] = m->inos[i];
	}
	m->n = 0;
	return ret;
}

static int store_missing_add(void *ctx, const struct meta_inode *in)
{
	struct store_missing *m = ctx;

	if (in->bucket < 0)
		return 0;
	m->maps[m->n] = (struct kvb_map){ in->bucket, in->page, in->npages, in->size, NULL };
	m->inos[m->n++] = in->ino;
	return m->n == STORE_PROBE_BATCH ? store_missing_flush(m) : 0;
}

/*
 * After an unclean stop, ask the backend for every recorded value (in
 * batches) and drop the files whose value is gone, as a cache miss: their
 * values are deleted (a no-op for a missing key) at the next barrier.
 */
static int store_drop_missing(struct ofs_store *s)
{
	struct store_missing m = { .s = s };
	size_t i;
	int ret = 0;

	if (!kvb_has_probe(&s->kvb))
		return 0;
	m.maps = calloc(STORE_PROBE_BATCH, sizeof(*m.maps));
	m.inos = calloc(STORE_PROBE_BATCH, sizeof(*m.inos));
	m.res = calloc(STORE_PROBE_BATCH, sizeof(*m.res));
	if (!m.maps || !m.inos || !m.res)
		ret = -ENOMEM;
	if (!ret)
		ret = meta_foreach_mapping(s->meta, store_missing_add, &m);
	if (!ret)
		ret = store_missing_flush(&m);
	for (i = 0; !ret && i < m.ngone; i++) {
		struct meta_inode in;

		ret = meta_get(s->meta, m.gone[i], &in);
		if (ret == -ENOENT) {
			ret = 0;
			continue;
		}
		if (!ret && in.bucket >= 0) {
			struct kvb_map map = { in.bucket, in.page, in.npages, in.size, NULL };

			ret = kvb_remove_prepare(&s->kvb, &map);
		}
		if (!ret)
			ret = meta_delete(s->meta, in.ino);
		if (!ret && in.bucket >= 0) {
			struct kvb_map map = { in.bucket, in.page, in.npages, in.size, NULL };

			kvb_remove(&s->kvb, &map);
			s->dropped_missing++;
		}
	}
	free(m.maps);
	free(m.inos);
	free(m.res);
	free(m.gone);
	return ret;
}

void ofs_ubsio_defaults(struct meta *m, struct kvb_ubsio_config *uc, char *libbuf,
			size_t liblen)
{
	char v[64];

	if (!uc->lib && meta_setting_get(m, "ubsio_lib", libbuf, liblen) == 0 && libbuf[0])
		uc->lib = libbuf;
	if (uc->new_init < 0) {
		uc->new_init = 0;
		if (meta_setting_get(m, "ubsio_init", v, sizeof(v)) == 0 && strcmp(v, "old") &&
		    ofs_parse_size(v, &uc->ssd_size) == 0)
			uc->new_init = 1;
	}
	if (uc->device_id == KVB_UBSIO_DEVICE_UNSET) {
		/* No Ascend device unless one was chosen: the library then needs no ACL. */
		uc->device_id = -1;
		if (meta_setting_get(m, "ubsio_device", v, sizeof(v)) == 0)
			uc->device_id = atoi(v);
		if (uc->device_id < -1)
			uc->device_id = -1;
	}
}

int ofs_ubsio_lib_abs(const char *lib, char *out, size_t outlen, char *err, size_t errlen)
{
	char real[PATH_MAX];

	/* A bare name goes to dlopen's search path, which is not the working directory. */
	if (!strchr(lib, '/') || lib[0] == '/') {
		if (strlen(lib) >= outlen) {
			snprintf(err, errlen, "ubsio_lib '%s': %s", lib, strerror(ENAMETOOLONG));
			return -ENAMETOOLONG;
		}
		snprintf(out, outlen, "%s", lib);
		return 0;
	}
	if (!realpath(lib, real)) {
		snprintf(err, errlen, "ubsio_lib '%s': %s", lib, strerror(errno));
		return -errno;
	}
	if (strlen(real) >= outlen) {
		snprintf(err, errlen, "ubsio_lib '%s': %s", lib, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	snprintf(out, outlen, "%s", real);
	return 0;
}

int ofs_ubsio_record(struct meta *m, const struct kvb_ubsio_config *uc)
{
	char v[64];
	int ret;

	ret = meta_setting_set(m, "ubsio_lib", uc->lib ? uc->lib : "");
	if (!ret) {
		if (uc->new_init > 0)
			snprintf(v, sizeof(v), "%llu", (unsigned long long)uc->ssd_size);
		else
			snprintf(v, sizeof(v), "old");
		ret = meta_setting_set(m, "ubsio_init", v);
	}
	if (!ret) {
		snprintf(v, sizeof(v), "%d", uc->device_id);
		ret = meta_setting_set(m, "ubsio_device", v);
	}
	return ret;
}

int ofs_store_open(struct ofs_store *s, const struct ofs_config *cfg, char *err, size_t errlen)
{
	char ubsio_lib[PATH_MAX];
	struct kvb_ubsio_config uc = cfg->ubsio;
	struct kvb_pages_geom pg;
	char backend[32] = "", *db = NULL, *journal = NULL, *s_root = NULL;
	int created;
	struct stat st;
	int ret, buckets;

	memset(s, 0, sizeof(*s));
	s->lock_fd = -1;
	s->reserve_fd = -1;
	pthread_mutex_init(&s->sync_lock, NULL);
	if (!cfg->root) {
		snprintf(err, errlen, "no ROOT given");
		return -EINVAL;
	}
	if (stat(cfg->root, &st)) {
		ret = -errno;
		snprintf(err, errlen, "ROOT %s: %s", cfg->root, strerror(errno));
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "ROOT %s: not a directory", cfg->root);
		return -ENOTDIR;
	}
	s->root = realpath(cfg->root, NULL);
	if (cfg->meta_path) {
		s->meta_path = strdup(cfg->meta_path);
	} else if (s->root && asprintf(&s->meta_path, "%s/%s", s->root, OFS_DB_NAME) < 0) {
		s->meta_path = NULL;
	}
	if (!s->root || !s->meta_path) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* One daemon (or fsck) per store: everything below writes. */
	ret = ofs_store_lock(s->root, &s->lock_fd, err, errlen);
	if (ret)
		goto out;
	ret = store_scan_root(s->root, s->meta_path, &buckets, err, errlen);
	if (ret)
		goto out;
	/* Before anything is created in it: nobody else may reach what follows. */
	ret = store_set_mode(s->lock_fd, s->root, cfg->has_data_gid ? 0750 : 0700,
			     cfg->data_gid, cfg->has_data_gid, err, errlen);
	if (ret)
		goto out;
	if (access(s->meta_path, F_OK) && buckets) {
		ret = -EEXIST;
		snprintf(err, errlen,
			 "ROOT %s holds %d bucket file(s) but there is no metadata at %s; "
			 "refusing to overwrite them",
			 s->root, buckets, s->meta_path);
		goto out;
	}
	store_reserve_open(s, 0);
	ret = meta_open(s->meta_path, 1, &s->meta, err, errlen);
	if (ret < 0)
		goto out;
	meta_set_full_hook(s->meta, store_full_hook, s);
	ret = meta_geom_get(s->meta, &s->geom, backend, sizeof(backend));
	if (ret == -ENOENT) {
		/* New (or never finished formatting): the requested geometry. */
		s->created = 1;
		s->geom = cfg->geom;
	} else if (ret) {
		snprintf(err, errlen, "%s: cannot read geometry: %s", s->meta_path,
			 strerror(-ret));
		goto out;
	} else if ((ret = ofs_geom_valid(&s->geom, err, errlen))) {
		/* Damaged, not ours to guess at: offloadctl fsck says the same. */
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " recorded in %s", s->meta_path);
		ret = -EUCLEAN;
		goto out;
	} else {
		if (cfg->backend && strcmp(backend, cfg->backend)) {
			ret = -EINVAL;
			snprintf(err, errlen, "store uses backend '%s', this mount asked for '%s'",
				 backend, cfg->backend);
			goto out;
		}
		if (strcmp(backend, "pages") && strcmp(backend, "ubsio")) {
			ret = -EINVAL;
			snprintf(err, errlen, "store uses backend '%s', which this build lacks",
				 backend);
			goto out;
		}
		ret = store_geom_check(cfg, &s->geom, err, errlen);
		if (ret)
			goto out;
	}
	snprintf(s->backend, sizeof(s->backend), "%s",
		 s->created ? (cfg->backend ? cfg->backend : "pages") : backend);
	if (!strcmp(s->backend, "ubsio")) {
		if (s->created && buckets) {
			ret = -EEXIST;
			snprintf(err, errlen, "ROOT %s holds bucket files: not a ubsio store", s->root);
			goto out;
		}
		uc.page_size = s->geom.page_size;
		ofs_ubsio_defaults(s->meta, &uc, ubsio_lib, sizeof(ubsio_lib));
		if (uc.lib && strchr(uc.lib, '/') && uc.lib[0] != '/') {
			/* Resolved against whatever directory this process runs in: never. */
			ret = -EINVAL;
			snprintf(err, errlen, "ubsio_lib '%s' is a relative path: give it as an "
				 "absolute one", uc.lib);
			goto out;
		}
		ret = kvb_ubsio_init(&s->kvb, s->root, &uc, s->meta, err, errlen);
	} else if (!strcmp(s->backend, "pages")) {
		pg.page_size = s->geom.page_size;
		pg.bucket_size = s->geom.bucket_size;
		pg.bucket_count = s->geom.bucket_count;
		pg.keep_free = store_same_fs(s->root, s->meta_path) ? s->reserve_size : 0;
		ret = kvb_pages_init(&s->kvb, s->root, &pg, s->created, err, errlen);
	} else {
		ret = -EINVAL;
		snprintf(err, errlen, "unknown backend '%s' (pages or ubsio)", s->backend);
	}
	if (ret)
		goto out;
	if (s->created) {
		ret = meta_format(s->meta, &s->geom, s->backend, 040755, getuid(), getgid());
		if (ret) {
			snprintf(err, errlen, "cannot format %s: %s", s->meta_path,
				 meta_errmsg(s->meta));
			goto out;
		}
	}
	if (!strcmp(s->backend, "ubsio")) {
		/* For the metrics, so that offloadctl scrub reaches the library the same way. */
		s->ubsio = uc;
		snprintf(s->ubsio_lib, sizeof(s->ubsio_lib), "%s", uc.lib ? uc.lib : "");
		s->ubsio.lib = s->ubsio_lib[0] ? s->ubsio_lib : NULL;
	}
	if (!strcmp(s->backend, "ubsio") && ofs_ubsio_record(s->meta, &uc)) {
		ret = -EIO;
		snprintf(err, errlen, "%s: %s", s->meta_path, meta_errmsg(s->meta));
		goto out;
	}
	ret = store_set_modes(s, cfg, err, errlen);
	if (ret)
		goto out;
	ret = meta_clean_get(s->meta, &s->was_clean);
	if (!ret)
		ret = meta_synced_gen(s->meta, &s->synced_gen);
	s->gen = s->synced_gen + 1;
	if (!ret)
		ret = meta_recover(s->meta, &s->dropped_new, &s->dropped_orphans);
	if (!ret && !s->was_clean)
		ret = store_verify_unsynced(s);
	if (ret) {
		snprintf(err, errlen, "recovery failed: %s", meta_errmsg(s->meta));
		goto out;
	}
	/*
	 * Recovery's changes durable before the backend acts on them: a KV
	 * backend deletes the values recovery let go of, which a power cut
	 * must not bring back as records.
	 */
	if (!s->was_clean && meta_sync(s->meta, s->synced_gen)) {
		snprintf(err, errlen, "recovery failed: %s", meta_errmsg(s->meta));
		ret = -EIO;
		goto out;
	}
	ret = kvb_start(&s->kvb, s->meta, s->was_clean, s->start_msg,
				sizeof(s->start_msg));
	if (ret) {
		snprintf(err, errlen, "cannot start the %s backend: %s", s->backend, s->start_msg);
		goto out;
	}
	if (!s->was_clean) {
		ret = store_drop_missing(s);
		if (ret) {
			snprintf(err, errlen, "cannot check the values in the %s backend: %s",
				 s->backend, strerror(-ret));
			goto out;
		}
	}
	ret = meta_clean_set(s->meta, 0);
	if (!ret)
		ret = meta_count_files(s->meta, &s->nfiles);
	if (ret) {
		snprintf(err, errlen, "%s: %s", s->meta_path, meta_errmsg(s->meta));
		goto out;
	}
	/* Made only now: a refused ROOT is left as it was. */
	if (s->reserve_fd < 0)
		store_reserve_open(s, 1);
	ofs_store_space(s, NULL, 0);
	return 0;

out:
	created = s->created && s->meta_path && s->root;
	if (created) {
		s_root = strdup(s->root);
		db = strdup(s->meta_path);
		if (asprintf(&journal, "%s/%s", s->root, KVB_UBSIO_JOURNAL) < 0)
			journal = NULL;
	}
	ofs_store_crash(s);
	/*
	 * A store this call set out to create and could not (a missing
	 * library, a bad geometry): leave ROOT as it was.  Its database holds
	 * no object yet.  Once bucket files exist the database stays with
	 * them: bucket files without one are refused as foreign.
	 */
	if (created && db && !store_has_buckets(s_root)) {
		char aux[PATH_MAX + 8];

		unlink(db);
		snprintf(aux, sizeof(aux), "%s-wal", db);
		unlink(aux);
		snprintf(aux, sizeof(aux), "%s-shm", db);
		unlink(aux);
		snprintf(aux, sizeof(aux), "%s" OFS_RESERVE_SUFFIX, db);
		unlink(aux);
		if (journal)
			unlink(journal);
	}
	free(db);
	free(journal);
	free(s_root);
	return ret;
}

/* Everything let go, nothing saved: the end of a failed open, or a simulated crash. */
void ofs_store_crash(struct ofs_store *s)
{
	meta_close(s->meta);
	s->meta = NULL;
	kvb_release(&s->kvb);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	s->lock_fd = -1;
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	s->reserve_fd = -1;
	free(s->root);
	free(s->meta_path);
	s->root = s->meta_path = NULL;
}

int ofs_store_close(struct ofs_store *s)
{
	int ret = 0, r;

	if (!s->meta)
		return 0;
	/* On a disk short of space, the snapshot and the checkpoint get the reserve. */
	ofs_store_space(s, NULL, 0);
	/* Every freed run reusable, every record durable, before the snapshot. */
	ret = ofs_store_sync(s, NULL, NULL);
	if (!ret)
		ret = meta_prev_clear(s->meta);
	/* Bitmaps and the clean flag in one transaction: both or neither. */
	if (!ret)
		ret = meta_begin(s->meta);
	if (!ret)
		ret = kvb_stop(&s->kvb, s->meta);
	if (!ret)
		ret = meta_clean_set(s->meta, 1);
	if (!ret)
		ret = meta_commit(s->meta);
	else
		meta_rollback(s->meta);
	r = meta_checkpoint(s->meta);
	if (!ret)
		ret = r;
	/* Held again if there is room: the next mount's recovery and snapshot may need it. */
	if (s->reserve_fd >= 0 && !s->reserve_held)
		store_reserve_arm(s);
	ofs_store_crash(s);
	return ret;
}
