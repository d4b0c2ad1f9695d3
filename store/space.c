/*
 * space.c: the metadata disk's reserve (DB-reserve), given back when the
 * disk runs short so that deletes, renames and the unmount still commit,
 * and taken again when space is back.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Bytes available to us on the filesystem holding the metadata; -1 when unknown. */
static int64_t store_meta_avail(const struct ofs_store *s)
{
	struct statvfs v;

	/* A server's disk is not ours to see: its own full-disk errors say it. */
	if (s->meta_remote || statvfs(s->meta_path, &v))
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

int store_full_hook(void *arg)
{
	return store_reserve_release(arg);
}

/* Take the reserve's blocks, all or none.  Under sync_lock. */
int store_reserve_arm(struct ofs_store *s)
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
void store_reserve_open(struct ofs_store *s, int create)
{
	char path[PATH_MAX + 16], dir[PATH_MAX], *slash;
	struct statvfs v;
	struct stat st;
	int64_t avail;

	/* The reserve is for a database file's disk; a server keeps its own. */
	if (s->meta_remote)
		return;
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

	if (meta_is_remote(meta_path))
		return;
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
	if (avail >= 0 && (uint64_t)avail < s->reserve_size / 2) {
		/*
		 * Freed runs the backend keeps warm hold blocks of this disk
		 * (pages: it punches them all when the disk is short): back
		 * first, or a write would get ENOSPC for want of blocks the
		 * store holds, until the next tick.
		 */
		kvb_tick(&s->kvb);
		avail = store_meta_avail(s);
	}
	return avail >= 0 && (uint64_t)avail < s->reserve_size / 2;
}
