/*
 * open.c: open and close a store: the lock on ROOT, the foreign-file check,
 * modes, geometry, recovery after an unclean stop.  See store.h and
 * DESIGN.md.
 */
#include "extent.h"
#include "store_int.h"

#include "htab.h"
#include "epoch.h"
#include "offloadfs_batch_proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <sys/file.h>

/* a and b (paths that exist, or their directories) are on one filesystem. */
static int store_same_fs(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev;
}

static int store_is_bucket_name(const char *n)
{
	return strlen(n) == 14 && !strncmp(n, "bucket_", 7) && !strcmp(n + 9, ".data") &&
	       strchr("0123456789abcdef", n[7]) && strchr("0123456789abcdef", n[8]) && n[7] &&
	       n[8];
}

/*
 * Only our own files may be in ROOT: bucket files, our database and its
 * sqlite side files, the store's id, and lost+found (the root of a fresh
 * ext4).
 */
static int store_scan_root(const char *root, const char *dbpath, int *buckets, int *last,
			   char *err, size_t errlen)
{
	char dbdir[PATH_MAX], *slash;
	const char *dbbase = NULL;
	struct dirent *de;
	DIR *d;
	int foreign = 0, sqlite_store = 0;
	char first[NAME_MAX + 1] = "";

	*buckets = 0;
	*last = -1;
	/* The database counts as ours only when it lives in ROOT itself (NULL: on a server). */
	snprintf(dbdir, sizeof(dbdir), "%s", dbpath ? dbpath : "");
	slash = dbpath ? strrchr(dbdir, '/') : NULL;
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
			int idx = (int)strtol(n + 7, NULL, 16);

			(*buckets)++;
			if (idx > *last)
				*last = idx;
			continue;
		}
		if (!strcmp(n, KVB_UBSIO_JOURNAL) || !strcmp(n, OFS_BATCH_EPOCH_NAME) ||
		    !strcmp(n, OFS_ID_NAME))
			continue;
		if (dbbase && !strncmp(n, dbbase, bl) &&
		    (!n[bl] || !strcmp(n + bl, "-wal") || !strcmp(n + bl, "-shm") ||
		     !strcmp(n + bl, "-journal") || !strcmp(n + bl, OFS_RESERVE_SUFFIX)))
			continue;
		if (!strcmp(n, OFS_DB_NAME))
			sqlite_store = 1;
		if (!foreign++)
			snprintf(first, sizeof(first), "%s", n);
	}
	closedir(d);
	if (sqlite_store) {
		/* Another metadata than the store's own would take its pages for free. */
		snprintf(err, errlen,
			 "ROOT %s is a store whose metadata is the sqlite file %s/%s, not %s; "
			 "refusing to use it: mount it with that file's metadata (no -o meta=, "
			 "or -o meta=%s/%s)",
			 root, root, OFS_DB_NAME, dbpath ? dbpath : "a database on a server", root,
			 OFS_DB_NAME);
		return -EEXIST;
	}
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

/* Whether ROOT's entry name is one of the database's files (by inode). */
static int store_is_meta_file(int dirfd, const char *name, const struct stat *files, size_t n)
{
	struct stat st;
	size_t i;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return 0;
	for (i = 0; i < n; i++)
		if (files[i].st_dev == st.st_dev && files[i].st_ino == st.st_ino)
			return 1;
	return 0;
}

static int store_set_modes(struct ofs_store *s, const struct ofs_config *cfg, char *err,
			   size_t errlen)
{
	const char *sfx[] = { "", "-wal", "-shm", "-journal" };
	struct stat meta_files[sizeof(sfx) / sizeof(sfx[0])];
	char path[PATH_MAX + 16];
	struct dirent *de;
	size_t i, nmeta = 0;
	DIR *d;
	int fd, ret = 0;

	/* The database's files, which the loop over ROOT leaves to the one below. */
	for (i = 0; !s->meta_remote && i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", s->meta_path, sfx[i]);
		if (!lstat(path, &meta_files[nmeta]))
			nmeta++;
	}
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
		/* The epoch table is read by the clients that read the buckets. */
		int bucket = store_is_bucket_name(de->d_name) ||
			     !strcmp(de->d_name, OFS_BATCH_EPOCH_NAME);

		snprintf(path, sizeof(path), "%s/%s", s->root, de->d_name);
		if (store_is_meta_file(dirfd(d), de->d_name, meta_files, nmeta))
			continue; /* below, without opening it */
		fd = openat(s->lock_fd, de->d_name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			continue;
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
	/* A database elsewhere (meta=) is as private as one in ROOT; a server's is its own. */
	for (i = 0; !ret && !s->meta_remote && i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		struct stat st;

		/*
		 * By name, never opened: closing any descriptor of the database
		 * would drop the POSIX lock sqlite holds on it for the whole
		 * mount, and another process (a sqlite3 shell) could then take
		 * the database and delete its log under us.
		 */
		snprintf(path, sizeof(path), "%s%s", s->meta_path, sfx[i]);
		if (lstat(path, &st) || !S_ISREG(st.st_mode) || (st.st_mode & 07777) == 0600)
			continue;
		if (chmod(path, 0600)) {
			snprintf(err, errlen, "cannot set the mode of %s to 0600: %s", path,
				 strerror(errno));
			ret = -errno;
		}
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
	/* A value from the environment is named so: the command line shows none. */
	if (cfg->set_page_size && cfg->geom.page_size != have->page_size) {
		snprintf(err, errlen, "geometry mismatch: page_size=%llu requested%s, store has %llu",
			 (unsigned long long)cfg->geom.page_size,
			 cfg->env_page_size ? " (by MOONCAKE_DISTRIBUTED_PAGE_SIZE)" : "",
			 (unsigned long long)have->page_size);
		return -EINVAL;
	}
	if (cfg->set_bucket_size && cfg->geom.bucket_size != have->bucket_size) {
		snprintf(err, errlen,
			 "geometry mismatch: bucket_size=%llu requested%s, store has %llu",
			 (unsigned long long)cfg->geom.bucket_size,
			 cfg->env_bucket_size ? " (by MOONCAKE_DISTRIBUTED_BUCKET_SIZE)" : "",
			 (unsigned long long)have->bucket_size);
		return -EINVAL;
	}
	if (cfg->set_bucket_count && cfg->geom.bucket_count != have->bucket_count) {
		snprintf(err, errlen, "geometry mismatch: bucket_count=%u requested%s, store has %u",
			 cfg->geom.bucket_count,
			 cfg->env_bucket_count ? " (by MOONCAKE_DISTRIBUTED_BUCKET_COUNT)" : "",
			 have->bucket_count);
		return -EINVAL;
	}
	return 0;
}

/*
 * The extent size: recorded when the store is made (-o extent_size, else
 * the smaller of OFS_EXTENT_SIZE_DEFAULT, or on ubsio the library's
 * longest value KVB_UBSIO_VALUE_MAX, and the bucket size); a
 * store made before extents has bucket_size, which every file it holds
 * fits in one.
 */
static int store_extent_size(struct ofs_store *s, const struct ofs_config *cfg, char *err,
			     size_t errlen)
{
	char buf[32];
	uint64_t v;
	int ret = meta_setting_get(s->meta, OFS_EXTENT_SETTING, buf, sizeof(buf));

	if (ret == 0) {
		if (ofs_parse_size(buf, &v) || v == 0 || v % s->geom.page_size ||
		    v > s->geom.bucket_size) {
			snprintf(err, errlen, "%s: extent_size '%s' is not a multiple of the page "
				 "size up to the bucket size", s->meta_shown, buf);
			return -EUCLEAN;
		}
		if (cfg->extent_size && cfg->extent_size != v) {
			snprintf(err, errlen, "extent_size=%llu asked, but the store has %llu "
				 "(fixed when it was made)",
				 (unsigned long long)cfg->extent_size, (unsigned long long)v);
			return -EINVAL;
		}
		s->esize = v;
		return 0;
	}
	if (ret != -ENOENT) {
		snprintf(err, errlen, "%s: %s", s->meta_shown, meta_errmsg(s->meta));
		return ret;
	}
	if (s->created && cfg->extent_size) {
		v = cfg->extent_size;
		if (v % s->geom.page_size || v > s->geom.bucket_size) {
			snprintf(err, errlen, "extent_size=%llu is not a multiple of the page size "
				 "up to the bucket size", (unsigned long long)v);
			return -EINVAL;
		}
	} else if (s->created) {
		uint64_t def = strcmp(s->backend, "ubsio") ? OFS_EXTENT_SIZE_DEFAULT
							   : KVB_UBSIO_VALUE_MAX;

		v = s->geom.bucket_size < def ? s->geom.bucket_size : def;
		v = v < s->geom.page_size ? s->geom.page_size : v / s->geom.page_size * s->geom.page_size;
	} else {
		v = s->geom.bucket_size;
	}
	s->esize = v;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	ret = meta_setting_set(s->meta, OFS_EXTENT_SETTING, buf);
	if (ret)
		snprintf(err, errlen, "%s: %s", s->meta_shown, meta_errmsg(s->meta));
	return ret;
}

int ofs_store_open(struct ofs_store *s, const struct ofs_config *cfg, char *err, size_t errlen)
{
	char ubsio_lib[PATH_MAX];
	struct kvb_ubsio_config uc = cfg->ubsio;
	struct kvb_pages_geom pg;
	char backend[32] = "", *db = NULL, *journal = NULL, *s_root = NULL;
	int created, remote, db_new, id_pending = 0, id_recorded = 0;
	struct stat st;
	int ret, buckets, last_bucket;

	memset(s, 0, sizeof(*s));
	s->lock_fd = -1;
	s->reserve_fd = -1;
	pthread_mutex_init(&s->sync_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	for (int i = 0; i < OFS_NLOCKS; i++)
		pthread_rwlock_init(&s->rw[i], NULL);
	s->verify = cfg->verify;
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
	if (s->meta_path) {
		s->meta_remote = meta_is_remote(s->meta_path);
		s->meta_shown = malloc(strlen(s->meta_path) + 1);
		if (s->meta_shown)
			meta_target_show(s->meta_path, s->meta_shown, strlen(s->meta_path) + 1);
	}
	if (!s->root || !s->meta_path || !s->meta_shown) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* One daemon (or fsck) per store: everything below writes. */
	ret = ofs_store_lock(s->root, &s->lock_fd, err, errlen);
	if (ret)
		goto out;
	ret = store_scan_root(s->root, s->meta_remote ? NULL : s->meta_path, &buckets,
			      &last_bucket, err, errlen);
	if (ret)
		goto out;
	/* Before anything is created in it: nobody else may reach what follows. */
	ret = store_set_mode(s->lock_fd, s->root, cfg->has_data_gid ? 0750 : 0700,
			     cfg->data_gid, cfg->has_data_gid, err, errlen);
	if (ret)
		goto out;
	if (!s->meta_remote && access(s->meta_path, F_OK) && buckets) {
		ret = -EEXIST;
		snprintf(err, errlen,
			 "ROOT %s holds %d bucket file(s) but there is no metadata at %s; "
			 "refusing to overwrite them",
			 s->root, buckets, s->meta_path);
		goto out;
	}
	store_reserve_open(s, 0);
	/* A server's database is made only for a ROOT without buckets, as a file would be. */
	ret = meta_open(s->meta_path, !s->meta_remote || !buckets, &s->meta, err, errlen);
	if (ret == -ENOENT && s->meta_remote) {
		ret = -EEXIST;
		snprintf(err, errlen,
			 "ROOT %s holds %d bucket file(s) but %s holds no store; refusing to "
			 "overwrite them",
			 s->root, buckets, s->meta_shown);
	}
	if (ret < 0)
		goto out;
	db_new = ret == 1;
	meta_set_full_hook(s->meta, store_full_hook, s);
	meta_set_timeout(s->meta, cfg->meta_timeout);
	meta_set_log(s->meta, ofs_log);
	ret = meta_geom_get(s->meta, &s->geom, backend, sizeof(backend));
	if (ret == -ENOENT) {
		/* New (or never finished formatting): the requested geometry. */
		s->created = 1;
		s->geom = cfg->geom;
	} else if (ret) {
		snprintf(err, errlen, "%s: cannot read geometry: %s", s->meta_shown,
			 strerror(-ret));
		goto out;
	} else if ((ret = ofs_geom_valid(&s->geom, err, errlen))) {
		/* Damaged, not ours to guess at: offloadctl fsck says the same. */
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " recorded in %s", s->meta_shown);
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
	/* Before the backend opens ROOT's files against this database. */
	/*
	 * A server's schema outlives a creation that failed before its format
	 * (nothing removes it, as a file is): a store with no geometry is new.
	 */
	ret = ofs_identity_check(s->root, s->meta, s->meta_shown,
				 db_new || (s->meta_remote && s->created), &id_pending, err,
				 errlen);
	if (ret)
		goto out;
	/*
	 * A bucket file past the store's count was made by another store
	 * (one of more buckets, whose database this is not): nothing here
	 * would ever read it, nor say it is there.
	 */
	if (!strcmp(s->backend, "pages") && last_bucket >= (int)s->geom.bucket_count) {
		ret = -EEXIST;
		snprintf(err, errlen, "ROOT %s holds bucket_%02x.data, past the store's %u bucket "
			 "file(s): not this store's; refusing to use it (move it out of ROOT)",
			 s->root, (unsigned)last_bucket, s->geom.bucket_count);
		goto out;
	}
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
		/* The reserve is the database disk's: ROOT's only when they are one. */
		pg.keep_free = !s->meta_remote && store_same_fs(s->root, s->meta_path)
				       ? s->reserve_size
				       : 0;
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
			snprintf(err, errlen, "cannot format %s: %s", s->meta_shown,
				 meta_errmsg(s->meta));
			goto out;
		}
	}
	ret = store_extent_size(s, cfg, err, errlen);
	if (ret)
		goto out;
	/* Once the store is made: a creation that fails leaves no id behind. */
	if (id_pending) {
		ret = ofs_identity_record(s->root, s->meta, err, errlen);
		if (ret)
			goto out;
		id_recorded = 1;
	}
	if (!strcmp(s->backend, "ubsio")) {
		/* For the metrics, so that offloadctl scrub reaches the library the same way. */
		s->ubsio = uc;
		snprintf(s->ubsio_lib, sizeof(s->ubsio_lib), "%s", uc.lib ? uc.lib : "");
		s->ubsio.lib = s->ubsio_lib[0] ? s->ubsio_lib : NULL;
	}
	if (!strcmp(s->backend, "ubsio") && ofs_ubsio_record(s->meta, &uc)) {
		ret = -EIO;
		snprintf(err, errlen, "%s: %s", s->meta_shown, meta_errmsg(s->meta));
		goto out;
	}
	/* Before recovery changes any record: descriptors taken before are stale from here. */
	if (!cfg->epochs || strcmp(s->backend, "pages"))
		ofs_epochs_retire(s->lock_fd, s->root);
	else if (ofs_epochs_open(s, err, errlen))
		ofs_log("no epoch table: batch clients look every key up and check what they "
			"read (%s)", err);
	err[0] = '\0';
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
		snprintf(err, errlen, "%s: %s", s->meta_shown, meta_errmsg(s->meta));
		goto out;
	}
	/* Made only now: a refused ROOT is left as it was. */
	if (s->reserve_fd < 0)
		store_reserve_open(s, 1);
	ofs_store_space(s, NULL, 0);
	if (cfg->dram_capacity) {
		ret = ofs_dram_init(&s->dram, cfg->dram_capacity);
		if (ret) {
			snprintf(err, errlen, "the DRAM tier: %s", strerror(-ret));
			goto out;
		}
		s->dram_capacity = cfg->dram_capacity;
	}
	return 0;

out:
	created = s->created && s->meta_path && s->root;
	remote = s->meta_remote;
	if (created) {
		s_root = strdup(s->root);
		db = strdup(s->meta_path);
		if (asprintf(&journal, "%s/%s", s->root, KVB_UBSIO_JOURNAL) < 0)
			journal = NULL;
	}
	/* Live only while a daemon serves the store. */
	ofs_epochs_close(s);
	ofs_store_crash(s);
	/*
	 * A store this call set out to create and could not (a missing
	 * library, a bad geometry): leave ROOT as it was.  Its database holds
	 * no object yet.  Once bucket files exist the database stays with
	 * them: bucket files without one are refused as foreign.
	 */
	if (created && db && !store_has_buckets(s_root)) {
		char aux[PATH_MAX + 8];

		/* A server's schema is not a file: the next mount makes its store again. */
		if (!remote) {
			unlink(db);
			snprintf(aux, sizeof(aux), "%s-wal", db);
			unlink(aux);
			snprintf(aux, sizeof(aux), "%s-shm", db);
			unlink(aux);
			snprintf(aux, sizeof(aux), "%s" OFS_RESERVE_SUFFIX, db);
			unlink(aux);
		}
		if (journal)
			unlink(journal);
		snprintf(aux, sizeof(aux), "%s/%s", s_root, OFS_BATCH_EPOCH_NAME);
		unlink(aux);
		/* Only an id this open wrote: a refused ROOT keeps its own. */
		if (id_recorded) {
			snprintf(aux, sizeof(aux), "%s/%s", s_root, OFS_ID_NAME);
			unlink(aux);
		}
	}
	free(db);
	free(journal);
	free(s_root);
	return ret;
}

/* Everything let go, nothing saved: the end of a failed open, or a simulated crash. */
void ofs_store_crash(struct ofs_store *s)
{
	ofs_epochs_forget(s);
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
	free(s->meta_shown);
	s->root = s->meta_path = s->meta_shown = NULL;
	free(s->xtaken);
	s->xtaken = NULL;
	s->nxtaken = s->capxtaken = 0;
	if (s->dram_capacity)
		ofs_dram_release(&s->dram);
	s->dram_capacity = 0;
	/* The objects are the caller's (it has emptied the table). */
	if (s->objects)
		htab_release(s->objects);
	free(s->objects);
	s->objects = NULL;
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
	ofs_epochs_close(s);
	ofs_store_crash(s);
	return ret;
}
