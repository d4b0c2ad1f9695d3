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
#include <time.h>
#include <unistd.h>

/*
 * Filesystems where a write into blocks a file already has may still need
 * space (copy-on-write): a store into the mapping would raise SIGBUS there
 * on a full disk, so no table is kept on them.
 */
static int epoch_cow_fs(int fd)
{
	struct statfs f;

	if (fstatfs(fd, &f))
		return 1;
	switch ((unsigned long)f.f_type) {
	case 0x9123683eUL: /* btrfs */
	case 0x2fc12fc1UL: /* zfs */
	case 0xca451a4eUL: /* bcachefs */
		return 1;
	}
	return 0;
}

/* Through fd: not live, a new generation (no kept descriptor holds). */
static void epoch_retire_fd(int fd)
{
	uint64_t h[3];

	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || h[0] != OFS_BATCH_EPOCH_MAGIC)
		return;
	h[1] = 0;
	h[2]++;
	if (pwrite(fd, &h[1], 2 * sizeof(h[1]), sizeof(h[0])) != (ssize_t)(2 * sizeof(h[1])))
		ofs_log("%s: cannot retire it: %s", OFS_BATCH_EPOCH_NAME, strerror(errno));
}

void ofs_epochs_retire(int root_fd)
{
	int fd = openat(root_fd, OFS_BATCH_EPOCH_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0) {
		epoch_retire_fd(fd);
		close(fd);
	}
}

/* A new table, every block written (a store into it never needs space later). */
static int epoch_format(int fd, uint64_t gen)
{
	struct ofs_batch_epochs *t = calloc(1, sizeof(*t));
	ssize_t n;

	if (!t)
		return -ENOMEM;
	t->magic = OFS_BATCH_EPOCH_MAGIC;
	t->gen = gen;
	n = pwrite(fd, t, sizeof(*t), 0);
	free(t);
	if (n == (ssize_t)sizeof(*t) && ftruncate(fd, sizeof(*t)) == 0)
		return 0;
	n = n < 0 ? -errno : -ENOSPC;
	/* Too short for a client to map. */
	if (ftruncate(fd, 0))
		ofs_log("%s: cannot empty it: %s", OFS_BATCH_EPOCH_NAME, strerror(errno));
	return (int)n;
}

int ofs_epochs_open(struct ofs_store *s, const struct ofs_config *cfg, char *err, size_t errlen)
{
	struct ofs_batch_epochs *t;
	uint64_t h[3] = { 0, 0, 0 };
	struct stat st;
	int fd, ret = 0;

	(void)cfg; /* its mode is set with the bucket files' (store_set_modes) */
	s->epochs = NULL;
	fd = openat(s->lock_fd, OFS_BATCH_EPOCH_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		snprintf(err, errlen, "%s/%s: %s", s->root, OFS_BATCH_EPOCH_NAME, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s/%s: not a regular file", s->root, OFS_BATCH_EPOCH_NAME);
		goto out;
	}
	/* First of all: whatever follows, descriptors of the last mount no longer hold. */
	epoch_retire_fd(fd);
	if (epoch_cow_fs(fd)) {
		ret = -EOPNOTSUPP;
		snprintf(err, errlen, "%s: a copy-on-write filesystem (a store into the table "
			 "could fail on a full disk)", s->root);
		goto out;
	}
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
		h[0] = 0;
	if ((size_t)st.st_size != sizeof(*t) || h[0] != OFS_BATCH_EPOCH_MAGIC) {
		struct timespec now;

		/* A generation no client of an earlier table of this file can hold. */
		clock_gettime(CLOCK_REALTIME, &now);
		ret = epoch_format(fd, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
		if (ret) {
			snprintf(err, errlen, "%s/%s: cannot write it: %s", s->root,
				 OFS_BATCH_EPOCH_NAME, strerror(-ret));
			goto out;
		}
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
	munmap(t, sizeof(*t));
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
