/*
 * io.c: the bucket I/O of the pages backend.  Every call goes through the
 * io_* functions here, which count it for metrics; the bytes live where
 * the backend's struct kvb_pages_io puts them: in the bucket files
 * (file_io, below) for a mount, elsewhere for tests (pages_io.h).
 */
#include "pages_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

ssize_t io_pread(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	assert(b < p->nbuckets);
	n = p->io->pread(p->dev, b, buf, len, off);
	pages_count(p, KVB_CALL_READ, n < 0);
	return n;
}

ssize_t io_pwrite(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	assert(b < p->nbuckets);
	n = p->io->pwrite(p->dev, b, buf, len, off);
	pages_count(p, KVB_CALL_WRITE, n < 0);
	return n;
}

int io_zero(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	int ret;

	assert(b < p->nbuckets);
	ret = p->io->zero(p->dev, b, off, len);
	pages_count(p, KVB_CALL_ZERO, ret < 0);
	/* Zeros are data too: the next barrier must sync them (see pages_write_all). */
	__atomic_store_n(&p->b[b].dirty, 1, __ATOMIC_RELEASE);
	return ret;
}

int io_sync(struct pages *p, uint32_t b)
{
	int ret;

	assert(b < p->nbuckets);
	ret = p->io->sync(p->dev, b);
	pages_count(p, KVB_CALL_SYNC, ret < 0);
	return ret;
}

/* -ENOSPC when the backing filesystem cannot hold the run; 0 when it can or cannot tell. */
int io_reserve(struct pages *p, uint32_t b, uint64_t page, uint64_t n)
{
	int ret;

	if (!p->io->reserve || n == 0)
		return 0;
	ret = p->io->reserve(p->dev, b, page * p->page_size, n * p->page_size);
	pages_count(p, KVB_CALL_ZERO, ret < 0);
	return ret;
}

void io_punch(struct pages *p, uint32_t b, uint64_t page, uint64_t n)
{
	/* Best effort: a run not punched only costs disk space until fsck --repair. */
	if (p->io->punch && n)
		pages_count(p, KVB_CALL_ZERO,
			    p->io->punch(p->dev, b, page * p->page_size, n * p->page_size) < 0);
}

/*
 * 1 when the filesystem under the buckets has less room (beyond the
 * metadata's keep_free) than the held bytes of warm runs: they are wanted
 * back, by writes and by the metadata.  0 when it has, or cannot tell.
 */
int io_short(struct pages *p, uint64_t held)
{
	struct statvfs v;

	if (p->b[0].fd < 0 || fstatvfs(p->b[0].fd, &v))
		return 0;
	return (uint64_t)v.f_bavail * v.f_frsize < held + p->keep_free;
}

/*
 * The first extent of bucket file b holding blocks at or after byte off:
 * 1 and [*s, *e), or 0 (none, or buckets that are not files).
 */
int io_next_data(struct pages *p, uint32_t b, uint64_t off, uint64_t *s, uint64_t *e)
{
	off_t d, h;

	if (p->b[b].fd < 0 || off >= p->bucket_size)
		return 0;
	d = lseek(p->b[b].fd, (off_t)off, SEEK_DATA);
	if (d < 0)
		return 0;
	h = lseek(p->b[b].fd, d, SEEK_HOLE);
	if (h <= d)
		return 0;
	*s = (uint64_t)d;
	*e = (uint64_t)h < p->bucket_size ? (uint64_t)h : p->bucket_size;
	return *s < *e;
}

/*
 * Copy len bytes between runs inside the storage; 1 when it cannot (no
 * copy method, or it answered that it cannot here), the bytes then still
 * to copy being told by *done.  Marks the target bucket written, as
 * pages_write_all does, after the bytes land.
 */
int io_copy(struct pages *p, uint32_t fb, uint64_t from, uint32_t tb, uint64_t to, uint64_t len,
	    uint64_t *done)
{
	int ret = 0;

	assert(fb < p->nbuckets && tb < p->nbuckets);
	*done = 0;
	if (!p->io->copy || __atomic_load_n(&p->no_copy, __ATOMIC_RELAXED))
		return 1;
	while (*done < len) {
		size_t want = len - *done < PAGES_COPY_CHUNK ? (size_t)(len - *done) : PAGES_COPY_CHUNK;
		ssize_t n = p->io->copy(p->dev, fb, from + *done, tb, to + *done, want);

		if (n == -EXDEV || n == -EOPNOTSUPP || n == -ENOSYS || n == -EINVAL || n == 0) {
			/* The same answer next time: buckets share one filesystem. */
			__atomic_store_n(&p->no_copy, 1, __ATOMIC_RELAXED);
			ret = 1;
			break;
		}
		pages_count(p, KVB_CALL_COPY, n < 0);
		if (n < 0) {
			ret = (int)n;
			break;
		}
		*done += (uint64_t)n;
	}
	if (*done || ret < 0)
		__atomic_store_n(&p->b[tb].dirty, 1, __ATOMIC_RELEASE);
	return ret;
}

/* Advisory: nothing to count, nothing to fail. */
void io_writeback(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	if (p->io->writeback)
		p->io->writeback(p->dev, b, off, len);
}

/* Advisory: nothing to count, nothing to fail. */
void io_willneed(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	if (p->io->willneed)
		p->io->willneed(p->dev, b, off, len);
}

/* ---- whole reads and writes ---- */

/*
 * The bucket is marked dirty after the bytes are written, not before: a
 * barrier that cleared the mark between the two would otherwise miss bytes
 * that landed after its fsync, while a commit made after this returns gets
 * a generation only a later barrier covers.
 */
int pages_write_all(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	int ret = 0;

	while (len) {
		ssize_t n = io_pwrite(p, b, buf, len, off);

		if (n <= 0) {
			ret = n < 0 ? (int)n : -EIO;
			break;
		}
		buf = (const char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	/* Even a short write changed bytes. */
	__atomic_store_n(&p->b[b].dirty, 1, __ATOMIC_RELEASE);
	return ret;
}

int pages_read_all(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = io_pread(p, b, buf, len, off);

		if (n < 0)
			return (int)n;
		if (n == 0) {
			/* Past the end of a sparse file: reads as zeros. */
			memset(buf, 0, len);
			return 0;
		}
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* ---- file-backed buckets ---- */

static ssize_t file_pread(void *dev, uint32_t b, void *buf, size_t len, uint64_t off)
{
	struct pages *p = dev;
	ssize_t n = pread(p->b[b].fd, buf, len, (off_t)off);

	return n < 0 ? -errno : n;
}

static ssize_t file_pwrite(void *dev, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	struct pages *p = dev;
	ssize_t n = pwrite(p->b[b].fd, buf, len, (off_t)off);

	return n < 0 ? -errno : n;
}

static ssize_t file_copy(void *dev, uint32_t fb, uint64_t from, uint32_t tb, uint64_t to,
			 size_t len)
{
	struct pages *p = dev;
	loff_t in = (loff_t)from, out = (loff_t)to;
	ssize_t n;

	/* In the kernel: no pass through our memory, shared blocks on XFS or btrfs. */
	n = copy_file_range(p->b[fb].fd, &in, p->b[tb].fd, &out, len, 0);
	if (n <= 0)
		return n < 0 ? -errno : n;
	/*
	 * Shared blocks are not the run's: the copy gave back the ones it held
	 * (io_reserve), and a later write there, perhaps one the kernel
	 * acknowledged and writes back later, would need new ones from a disk
	 * that may be full by then.  Unshared now (XFS), while an error can
	 * still reach the writer; elsewhere (no sharing, or none to undo) this
	 * answers EOPNOTSUPP or EINVAL.
	 */
	if (fallocate(p->b[tb].fd, FALLOC_FL_UNSHARE_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)to,
		      (off_t)n) && (errno == ENOSPC || errno == EDQUOT || errno == EIO))
		return -errno;
	return n;
}

static void file_writeback(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct pages *p = dev;

	/* Starts the write-out and returns: the fsync that follows has less to wait for. */
	(void)sync_file_range(p->b[b].fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

static void file_willneed(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct pages *p = dev;

	/* The kernel bounds it to the device's readahead size. */
	(void)posix_fadvise(p->b[b].fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static int file_reserve(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct pages *p = dev;
	struct statvfs v;

	/* The metadata's reserve on a shared filesystem is not ours to fill. */
	if (p->keep_free && fstatvfs(p->b[b].fd, &v) == 0 &&
	    (uint64_t)v.f_bavail * v.f_frsize < len + p->keep_free)
		return -ENOSPC;
	if (fallocate(p->b[b].fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	/* A filesystem without fallocate cannot promise blocks: writes find out. */
	return errno == ENOSPC ? -ENOSPC : errno == EDQUOT ? -EDQUOT : 0;
}

static int file_punch(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct pages *p = dev;

	return fallocate(p->b[b].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			 (off_t)len)
		       ? -errno
		       : 0;
}

static int file_zero(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	static const char zeros[65536];
	struct pages *p = dev;

	/*
	 * Zeros that keep the range's blocks (it is allocated: io_reserve),
	 * without writing them.  Without ZERO_RANGE (tmpfs): a hole, then
	 * the blocks again; without either, written zeros.
	 */
	if (fallocate(p->b[b].fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) == 0)
		return 0;
	if (errno == ENOSPC)
		return -ENOSPC;
	if (fallocate(p->b[b].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) == 0) {
		/* The blocks just given back, taken again (no keep_free: they were ours). */
		if (fallocate(p->b[b].fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0 ||
		    (errno != ENOSPC && errno != EDQUOT))
			return 0;
		return -errno;
	}
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int ret = pages_write_all(p, b, zeros, n, off);

		if (ret)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

static int file_sync(void *dev, uint32_t b)
{
	struct pages *p = dev;

	return fdatasync(p->b[b].fd) ? -errno : 0;
}

static const struct kvb_pages_io file_io = {
	.pread = file_pread,
	.pwrite = file_pwrite,
	.zero = file_zero,
	.sync = file_sync,
	.reserve = file_reserve,
	.punch = file_punch,
	.copy = file_copy,
	.writeback = file_writeback,
	.willneed = file_willneed,
};

/*
 * The bucket file opened O_DIRECT, at its first uncached read: -1 where
 * there is no file or its filesystem refuses O_DIRECT (tmpfs).  Racing
 * openers keep the first descriptor and close their own.
 */
static int io_direct_fd(struct pages *p, uint32_t b)
{
	char path[PATH_MAX], name[32];
	int fd = __atomic_load_n(&p->b[b].dfd, __ATOMIC_ACQUIRE), none = -2;

	if (fd != -2)
		return fd;
	fd = -1;
	if (p->io == &file_io && p->root) {
		kvb_bucket_name(b, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", p->root, name);
		fd = open(path, O_RDONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			fd = -1;
	}
	if (!__atomic_compare_exchange_n(&p->b[b].dfd, &none, fd, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		if (fd >= 0)
			close(fd);
		fd = none;
	}
	return fd;
}

/*
 * Read past the page cache: the disk's blocks straight into buf, none of
 * the bucket's pages allocated, filled and copied from (the kernel writes
 * back dirty pages of the range first, so the bytes are those a buffered
 * read gets).  buf, off and len aligned to the page size; -EOPNOTSUPP
 * where the bucket cannot be read so (then io_pread).
 */
int io_read_uncached(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	int fd;

	assert(b < p->nbuckets);
	if (((uintptr_t)buf | off | len) % p->page_size || (fd = io_direct_fd(p, b)) < 0)
		return -EOPNOTSUPP;
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		pages_count(p, KVB_CALL_READ, n < 0);
		/* EINVAL: the device's blocks are larger than our pages; read through the cache. */
		if (n < 0)
			return errno == EINVAL ? -EOPNOTSUPP : -errno;
		if (n == 0) {
			memset(buf, 0, len); /* past the end of a sparse file: zeros */
			return 0;
		}
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}


/*
 * Give p's buckets their files under root (made when create) and p the
 * file I/O.  On failure the files opened so far stay in p for pages_free.
 */
int io_open_files(struct pages *p, const char *root, int create, char *err, size_t errlen)
{
	char path[PATH_MAX], name[32];
	uint32_t i;
	int ret, dfd = -1;

	p->io = &file_io;
	p->dev = p;
	p->root = realpath(root, NULL);
	if (p->root)
		dfd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", root, strerror(errno));
		goto out_free;
	}
	for (i = 0; i < p->nbuckets; i++) {
		struct stat st;
		int fd;

		kvb_bucket_name(i, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", p->root, name);
		/*
		 * Never O_TRUNC: a bucket file is only ever extended.  Relative to
		 * ROOT and never through a symbolic link: object bytes go nowhere else.
		 */
		fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0),
			    0600);
		if (fd < 0) {
			ret = -errno;
			snprintf(err, errlen, "%s: %s%s", path,
				 errno == ELOOP ? "a symbolic link, refused" : strerror(errno),
				 errno == ENOENT ? " (bucket file missing from an existing store)" : "");
			goto out_free;
		}
		p->b[i].fd = fd;
		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			ret = -EINVAL;
			snprintf(err, errlen, "%s: not a regular file", path);
			goto out_free;
		}
		if ((uint64_t)st.st_size < p->bucket_size) {
			if (!create) {
				/* Extending would turn lost data into zeros that pass for content. */
				ret = -EUCLEAN;
				snprintf(err, errlen,
					 "%s is %lld bytes, expected %llu: truncated bucket file; "
					 "run offloadctl fsck",
					 path, (long long)st.st_size, (unsigned long long)p->bucket_size);
				goto out_free;
			}
			if (ftruncate(fd, (off_t)p->bucket_size)) {
				ret = -errno;
				snprintf(err, errlen, "cannot extend %s to %llu bytes: %s", path,
					 (unsigned long long)p->bucket_size, strerror(errno));
				goto out_free;
			}
		}
	}
	close(dfd);
	return 0;

out_free:
	if (dfd >= 0)
		close(dfd);
	return ret;
}
