/*
 * xattr.c: extended attributes.  user.* names are the user's, kept in the
 * metadata; user.offload.* are ours, read-only and read by name: the
 * descriptor, the checksum, the live metrics (root), and promote, which
 * queues a promotion to the DRAM tier when set.
 */
#include "ll.h"
#include "extent.h"

/* The kernel's largest xattr value (XATTR_SIZE_MAX). */
#define XATTR_VALUE_MAX 65536

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define DESCRIPTOR_XATTR "user.offload.descriptor"
#define CHECKSUM_XATTR "user.offload.checksum"
#define PROMOTE_XATTR "user.offload.promote"
#define METRICS_XATTR "user.offload.metrics"
/* Names under it are ours; every other user.* name is kept for its owner (meta). */
#define OURS_XATTR_PREFIX "user.offload."

#define EVICT_XATTR "user.offload.evict"

/*
 * A user xattr the store keeps: user.*, but for our own names; the pin
 * and a tenant's quota (evict.h) are ones the store keeps and eviction
 * reads.
 */
static int ofs_user_xattr(const char *name)
{
	return !strncmp(name, "user.", 5) &&
	       (strncmp(name, OURS_XATTR_PREFIX, sizeof(OURS_XATTR_PREFIX) - 1) ||
		!strcmp(name, OFS_PIN_XATTR) || !strcmp(name, OFS_QUOTA_XATTR));
}

/*
 * setfattr -n user.offload.evict -v BYTES DIR (offloadctl evict): evict
 * that many bytes of least recently used files now, of DIR's tenant (any
 * tenant at the root).  Not remembered.
 */
static int ofs_evict_request(struct ofs *ofs, fuse_ino_t ino, const char *value, size_t size)
{
	char buf[32];
	uint64_t bytes, tenant = 0;
	size_t klen;
	char key[OFS_KEY_MAX + 1];
	int ret = 0;

	if (size == 0 || size >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, value, size);
	buf[size] = 0;
	if (ofs_parse_size(buf, &bytes))
		return -EINVAL;
	if (ino != META_ROOT_INO) {
		pthread_mutex_lock(&ofs->store.lock);
		ret = meta_path(ofs->store.meta, ino, 0, key, sizeof(key), &klen, &tenant);
		if (!ret && klen == 0)
			tenant = ino; /* the tenant directory itself */
		pthread_mutex_unlock(&ofs->store.lock);
		if (ret)
			return ret;
	}
	(void)ofs_evict(&ofs->store, bytes, tenant, OFS_EVICT_MANUAL);
	return 0;
}

/* The one reply of a get or list: the error, the size asked for (size 0), or the bytes. */
static void ofs_reply_xattr(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void ofs_get_user_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ofs *ofs = ofs_of(req);
	char *buf = NULL;
	ssize_t n;

	if (size > META_XATTR_SIZE_MAX)
		size = META_XATTR_SIZE_MAX;
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	n = meta_xattr_get(ofs->store.meta, ino, name, buf, size);
	pthread_mutex_unlock(&ofs->store.lock);
	ofs_reply_xattr(req, n, buf, size);
	free(buf);
}

/* A value of ours (len bytes at val, or -errno) as getxattr replies: its size, or it. */
static void ofs_reply_value(fuse_req_t req, const char *val, ssize_t len, size_t size)
{
	if (len < 0)
		fuse_reply_err(req, (int)-len);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)len);
	else if (size < (size_t)len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, (size_t)len);
}

/* The descriptor or the checksum of ino's committed content into buf: its length, or -errno. */
static int ofs_our_xattr(struct ofs *ofs, fuse_ino_t ino, int desc, char *buf, size_t len)
{
	struct ofs_inode *in;
	int ret = -ENODATA;

	pthread_mutex_lock(&ofs->store.lock);
	in = ofs_ifind(ofs, ino);
	/* Only committed content has a descriptor another process can trust. */
	if (in && S_ISREG(in->o.m.mode) && in->o.m.state == META_COMMITTED &&
	    in->o.m.bucket == META_EXTENTS) {
		/* Each extent has its checksums; the whole file has none kept. */
		ret = -ENODATA;
		if (desc) {
			pthread_rwlock_t *lk = ofs_store_rw(&ofs->store, in->o.m.ino);

			/* The extents under the stripe, as a read's (the kernel holds in). */
			pthread_mutex_unlock(&ofs->store.lock);
			pthread_rwlock_rdlock(lk);
			ret = ofs_extents_load(&ofs->store, &in->o);
			pthread_mutex_lock(&ofs->store.lock);
			if (!ret && in->o.x)
				ret = ofs_extents_describe(&ofs->store, &in->o, buf, len);
			pthread_mutex_unlock(&ofs->store.lock);
			pthread_rwlock_unlock(lk);
			return ret;
		}
	} else if (in && S_ISREG(in->o.m.mode) && in->o.m.state == META_COMMITTED) {
		struct kvb_map map = ofs_committed(&in->o.m);

		if (desc) {
			ret = kvb_describe(&ofs->store.kvb, &map, buf, len);
		} else {
			/* The bytes' own sum, which a commit in place may not have kept. */
			pthread_rwlock_t *lk = ofs_store_rw(&ofs->store, in->o.m.ino);
			uint64_t csum;

			pthread_mutex_unlock(&ofs->store.lock);
			pthread_rwlock_rdlock(lk);
			ret = ofs_object_content_csum(&ofs->store, &in->o, &csum);
			pthread_rwlock_unlock(lk);
			return ret ? ret : snprintf(buf, len, "%016llx", (unsigned long long)csum);
		}
	}
	pthread_mutex_unlock(&ofs->store.lock);
	return ret;
}

void ofs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ofs *ofs = ofs_of(req);
	char buf[3 * 4096 + 128]; /* a descriptor's escaped path or key: up to 3 bytes each */
	int desc = !strcmp(name, DESCRIPTOR_XATTR);

	if (ino == META_ROOT_INO && !strcmp(name, METRICS_XATTR)) {
		/* The live metrics, for offloadctl stats. */
		size_t len = 0;
		char *text = ofs_metrics_render(ofs, &len);

		ofs_reply_value(req, text, text ? (ssize_t)len : -ENOMEM, size);
		free(text);
	} else if (ofs_user_xattr(name)) {
		ofs_get_user_xattr(req, ino, name, size);
	} else if (!desc && strcmp(name, CHECKSUM_XATTR)) {
		/* Anything else (security.capability on every write) is answered at once. */
		fuse_reply_err(req, ENODATA);
	} else {
		/* A file of extents lists them all: up to the kernel's largest value. */
		char *big = desc ? malloc(XATTR_VALUE_MAX) : NULL;

		if (big)
			ofs_reply_value(req, big, ofs_our_xattr(ofs, ino, desc, big, XATTR_VALUE_MAX),
					size);
		else
			ofs_reply_value(req, buf, ofs_our_xattr(ofs, ino, desc, buf, sizeof(buf)),
					size);
		free(big);
	}
}

/*
 * The user's xattrs only.  Ours are read by name and not listed, as CephFS
 * does with its virtual ones: copy tools (cp --preserve=xattr, rsync -X)
 * would otherwise copy a descriptor that names another file's pages, or
 * fail removing ours from a copy.
 */
void ofs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ofs *ofs = ofs_of(req);
	char *buf = size ? malloc(size) : NULL;
	ssize_t n = -ENOMEM;

	if (!size || buf) {
		pthread_mutex_lock(&ofs->store.lock);
		n = meta_xattr_list(ofs->store.meta, ino, buf, size);
		pthread_mutex_unlock(&ofs->store.lock);
	}
	ofs_reply_xattr(req, n, buf, size);
	free(buf);
}

/* A quota is bytes as ofs_parse_size reads them ("10G"); empty or 0: none. */
static int ofs_quota_value_ok(const char *value, size_t size)
{
	char buf[32];
	uint64_t v;

	if (size == 0)
		return 1;
	if (size >= sizeof(buf))
		return 0;
	memcpy(buf, value, size);
	buf[size] = 0;
	return ofs_parse_size(buf, &v) == 0;
}

void ofs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			    size_t size, int flags)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in;
	int ret;

	if (ofs_user_xattr(name)) {
		if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
			ret = -EINVAL;
		} else if (!strcmp(name, OFS_QUOTA_XATTR) && !ofs_quota_value_ok(value, size)) {
			/* Kept, it would be no quota at all (store/evict.c): say so now. */
			ret = -EINVAL;
		} else {
			pthread_mutex_lock(&ofs->store.lock);
			ret = ofs_object_xattr_change(&ofs->store, ino, name, value, size,
						    (flags & XATTR_CREATE ? META_XATTR_CREATE : 0) |
						    (flags & XATTR_REPLACE ? META_XATTR_REPLACE : 0));
			pthread_mutex_unlock(&ofs->store.lock);
		}
		fuse_reply_err(req, -ret);
		return;
	}
	if (!strcmp(name, EVICT_XATTR)) {
		ret = ofs_evict_request(ofs, ino, value, size);
		fuse_reply_err(req, -ret);
		return;
	}
	/* Our own names are read-only; other namespaces are not kept. */
	if (strcmp(name, PROMOTE_XATTR)) {
		fuse_reply_err(req, strncmp(name, OURS_XATTR_PREFIX, sizeof(OURS_XATTR_PREFIX) - 1)
					    ? ENOTSUP
					    : EPERM);
		return;
	}
	/* setfattr -n user.offload.promote -v 1 FILE: queue a promotion to DRAM. */
	if (size != 1 || value[0] != '1') {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	in = ofs_ifind(ofs, ino);
	ret = in ? ofs_queue_promotion(ofs, in, "request") : -ESTALE;
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_err(req, -ret);
}

void ofs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	int ret;

	if (ofs_user_xattr(name)) {
		pthread_mutex_lock(&ofs->store.lock);
		ret = ofs_object_xattr_change(&ofs->store, ino, name, NULL, 0, 0);
		pthread_mutex_unlock(&ofs->store.lock);
		fuse_reply_err(req, -ret);
		return;
	}
	fuse_reply_err(req, strcmp(name, DESCRIPTOR_XATTR) && strcmp(name, CHECKSUM_XATTR) ? ENODATA
											     : EPERM);
}
