/*
 * fsck_common.c: what both checks (fsck.c, the pages backend's; fsck_kv.c,
 * a KV backend's) call: the error line, the list of corrupted objects,
 * an object's key and reachability, and the quarantine into
 * <tenant>/lost+found that repairs them.
 */
#include "fsck_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "vec.h"

#define LOST_FOUND "lost+found"

void fsck_err(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	fprintf(f->err, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(f->err, fmt, ap);
	va_end(ap);
}

/* The object's key below its tenant, and its tenant's ino, for messages and repair. */
void fsck_key(struct meta *m, uint64_t ino, char *out, size_t outlen, uint64_t *tenant)
{
	size_t len;

	if (meta_path(m, ino, 0, out, outlen, &len, tenant))
		snprintf(out, outlen, "(inode %llu)", (unsigned long long)ino);
}

void fsck_note_corrupt(struct fsck *f, uint64_t ino)
{
	(void)vec_u64_push(&f->corrupt, &f->ncorrupt, &f->capcorrupt, ino);
}

/*
 * 1 when every ancestor of in is a directory up to the top level: what the
 * mount can reach.  *tenant gets the tenant reached, 0 when none is.
 */
int fsck_reachable(struct fsck *f, const struct meta_inode *in, uint64_t *tenant)
{
	struct meta_inode p;
	uint64_t ino = in->ino, parent = in->parent;
	int depth;

	*tenant = 0;
	for (depth = 0; depth < 4096; depth++) {
		if (parent == META_ROOT_INO) {
			*tenant = ino;
			return 1;
		}
		if (meta_get(f->meta, parent, &p) || !p.parent)
			return 0;
		if (!S_ISDIR(p.mode)) {
			/* Still under a tenant: quarantine can take it there. */
			uint64_t up = p.parent, t = parent;

			for (; depth < 4096 && up != META_ROOT_INO; depth++) {
				if (meta_get(f->meta, up, &p) || !p.parent || !S_ISDIR(p.mode))
					return 0;
				t = up;
				up = p.parent;
			}
			*tenant = up == META_ROOT_INO ? t : 0;
			return 0;
		}
		ino = parent;
		parent = p.parent;
	}
	return 0;
}

int fsck_quarantine(struct fsck *f, uint64_t ino)
{
	struct meta_inode in, lf;
	char key[4096], name[META_NAME_MAX + 1];
	uint64_t tenant;
	int ret;

	char lfname[sizeof(LOST_FOUND) + 16];
	int i;

	fsck_key(f->meta, ino, key, sizeof(key), &tenant);
	if (meta_get(f->meta, ino, &in))
		return -ENOENT;
	if (!tenant) {
		/* Under something that is not a directory: the tenant it still belongs to. */
		fsck_reachable(f, &in, &tenant);
		if (!tenant)
			return -ENOENT;
	}
	/* A user's own file (or anything but a directory) named lost+found: the next free name. */
	for (i = 0;; i++) {
		if (i)
			snprintf(lfname, sizeof(lfname), "%s.%d", LOST_FOUND, i);
		else
			snprintf(lfname, sizeof(lfname), "%s", LOST_FOUND);
		ret = meta_lookup(f->meta, tenant, lfname, strlen(lfname), &lf);
		if (ret || S_ISDIR(lf.mode) || i == 1000)
			break;
	}
	if (ret == -ENOENT) {
		memset(&lf, 0, sizeof(lf));
		lf.parent = tenant;
		lf.mode = 040700;
		lf.atime = lf.mtime = lf.ctime = (int64_t)time(NULL) * 1000000000;
		lf.bucket = -1;
		lf.prev_bucket = -1;
		ret = meta_insert(f->meta, &lf, lfname, strlen(lfname));
	} else if (!ret && !S_ISDIR(lf.mode)) {
		ret = -EEXIST;
	}
	if (ret)
		return ret;
	snprintf(name, sizeof(name), "%" PRIu64, ino);
	in.state = META_QUARANTINED;
	ret = meta_update(f->meta, &in);
	if (!ret)
		ret = meta_move(f->meta, ino, lf.ino, name, strlen(name));
	if (!ret)
		fprintf(f->out, "repair: '%s' moved to %s/%s\n", key, lfname, name);
	return ret;
}
