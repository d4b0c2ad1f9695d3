/*
 * epoch.c: the epoch table (epoch.h).  The bumps run under s->lock, where
 * the change they announce is made, so a descriptor read under that lock
 * with its (gen, epoch) is either current or already stale; the pages a
 * change frees wait for the next barrier, after the bump.
 */
#include "store_int.h"
#include "epoch.h"
#include "offloadfs_batch_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

/*
 * Filesystems where a store into a file's own, written blocks needs no
 * space: the table is written whole at every mount, so the daemon's
 * stores into its mapping cannot fail on a full disk there (on
 * copy-on-write ones, and overlays of them, they could: SIGBUS).  FUSE
 * (a 3FS ROOT): its page_mkwrite allocates nothing.
 */
static int epoch_fs_ok(int fd)
{
	struct statfs f;

	if (fstatfs(fd, &f))
		return 0;
	switch ((unsigned long)f.f_type) {
	case EXT4_SUPER_MAGIC: /* ext2 and ext3 too */
	case XFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case FUSE_SUPER_MAGIC:
		return 1;
	}
	return 0;
}

/*
 * Through fd: not live, a new generation, so no kept descriptor holds.
 * 0, or -errno when a live table could not be retired.
 */
static int epoch_retire_fd(int fd)
{
	uint64_t h[3];

	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || h[0] != OFS_BATCH_EPOCH_MAGIC)
		return 0; /* not a table a client maps */
	if (!h[1])
		return 0; /* not live: its descriptors hold no more */
	h[1] = 0;
	h[2]++;
	if (pwrite(fd, &h[1], 2 * sizeof(h[1]), sizeof(h[0])) == (ssize_t)(2 * sizeof(h[1])))
		return 0;
	return errno ? -errno : -EIO;
}

/*
 * A live table that cannot be retired (a full copy-on-write disk, a file
 * the daemon may not write): whatever clients kept from the last daemon
 * is used for at most OFS_BATCH_KEEP_S seconds after it took it, so that
 * long after the last daemon's end nothing kept holds.
 */
static void epoch_retire_or_wait(int fd, const char *root)
{
	int ret = epoch_retire_fd(fd);

	if (!ret)
		return;
	ofs_log("%s/%s: cannot retire it (%s); waiting %d s for the descriptors batch clients "
		"kept to expire", root, OFS_BATCH_EPOCH_NAME, strerror(-ret), OFS_BATCH_KEEP_S);
	sleep(OFS_BATCH_KEEP_S);
}

void ofs_epochs_retire(int root_fd, const char *root)
{
	int fd = openat(root_fd, OFS_BATCH_EPOCH_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0) {
		epoch_retire_or_wait(fd, root);
		close(fd);
	} else if (errno != ENOENT) {
		ofs_log("%s/%s: %s; waiting %d s for the descriptors batch clients kept to expire",
			root, OFS_BATCH_EPOCH_NAME, strerror(errno), OFS_BATCH_KEEP_S);
		sleep(OFS_BATCH_KEEP_S);
	}
}

/*
 * The whole table written (its content kept when it is one, else a new
 * one): holes filled and shared blocks unshared, so that no store into
 * the mapping needs space later.  On failure a file that was not a table
 * is left too short for a client to map; a table stays as it was
 * (retired: a client of the last daemon may still map it).
 */
static int epoch_write_whole(int fd, const struct stat *st)
{
	struct ofs_batch_epochs *t = calloc(1, sizeof(*t));
	int is_table = 0, ret = 0;
	ssize_t n;

	if (!t)
		return -ENOMEM;
	if ((size_t)st->st_size == sizeof(*t) && pread(fd, t, sizeof(*t), 0) == (ssize_t)sizeof(*t))
		is_table = t->magic == OFS_BATCH_EPOCH_MAGIC;
	if (!is_table) {
		struct timespec now;
		uint64_t gen = t->magic == OFS_BATCH_EPOCH_MAGIC ? t->gen + 1 : 0;

		/* A generation no client of an earlier table of this file can hold. */
		clock_gettime(CLOCK_REALTIME, &now);
		memset(t, 0, sizeof(*t));
		t->magic = OFS_BATCH_EPOCH_MAGIC;
		t->gen = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		if (t->gen < gen)
			t->gen = gen;
	}
	n = pwrite(fd, t, sizeof(*t), 0);
	if (n >= 0 && n != (ssize_t)sizeof(*t))
		ret = -ENOSPC; /* a short write: the disk filled */
	else if (n < 0 || ftruncate(fd, sizeof(*t)))
		ret = -errno;
	if (ret && !is_table && ftruncate(fd, 0))
		ofs_log("%s: cannot empty it: %s", OFS_BATCH_EPOCH_NAME, strerror(errno));
	free(t);
	return ret;
}

int ofs_epochs_open(struct ofs_store *s, char *err, size_t errlen)
{
	struct ofs_batch_epochs *t;
	struct stat st;
	int fd, ret = 0;

	/* Made 0600; store_set_modes gives it the bucket files' mode and group. */
	s->epochs = NULL;
	fd = openat(s->lock_fd, OFS_BATCH_EPOCH_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		snprintf(err, errlen, "%s/%s: %s", s->root, OFS_BATCH_EPOCH_NAME, strerror(errno));
		if (fd < 0)
			ofs_epochs_retire(s->lock_fd, s->root);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s/%s: not a regular file", s->root, OFS_BATCH_EPOCH_NAME);
		goto out;
	}
	/* First of all: whatever follows, descriptors of the last mount no longer hold. */
	epoch_retire_or_wait(fd, s->root);
	if (!epoch_fs_ok(fd)) {
		ret = -EOPNOTSUPP;
		snprintf(err, errlen, "%s: not on ext4, xfs, tmpfs or FUSE (a store into the table "
			 "could fail on a full disk)", s->root);
		goto out;
	}
	ret = epoch_write_whole(fd, &st);
	if (ret) {
		snprintf(err, errlen, "%s/%s: cannot write it: %s", s->root, OFS_BATCH_EPOCH_NAME,
			 strerror(-ret));
		goto out;
	}
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (t == MAP_FAILED) {
		ret = -errno;
		snprintf(err, errlen, "%s/%s: cannot map it: %s", s->root, OFS_BATCH_EPOCH_NAME,
			 strerror(errno));
		goto out;
	}
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&t->live, 1, __ATOMIC_SEQ_CST);
	s->epochs = t;
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

void ofs_epochs_close(struct ofs_store *s)
{
	struct ofs_batch_epochs *t = s->epochs;

	if (!t)
		return;
	__atomic_store_n(&t->live, 0, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_SEQ_CST);
	ofs_epochs_forget(s);
}

void ofs_epochs_forget(struct ofs_store *s)
{
	if (s->epochs)
		munmap(s->epochs, sizeof(*s->epochs));
	s->epochs = NULL;
}

void ofs_epochs_bump(struct ofs_store *s, uint64_t ino)
{
	if (s->epochs)
		__atomic_add_fetch(&s->epochs->slot[ino % OFS_BATCH_EPOCH_SLOTS], 1,
				   __ATOMIC_SEQ_CST);
}

void ofs_epochs_bump_all(struct ofs_store *s)
{
	if (s->epochs)
		__atomic_add_fetch(&s->epochs->gen, 1, __ATOMIC_SEQ_CST);
}

void ofs_epochs_get(const struct ofs_store *s, uint64_t ino, uint64_t *gen, uint64_t *epoch)
{
	*gen = 0;
	*epoch = 0;
	if (!s->epochs)
		return;
	*gen = __atomic_load_n(&s->epochs->gen, __ATOMIC_SEQ_CST);
	*epoch = __atomic_load_n(&s->epochs->slot[ino % OFS_BATCH_EPOCH_SLOTS], __ATOMIC_SEQ_CST);
}
