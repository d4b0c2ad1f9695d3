/*
 * identity.c: which store a ROOT and a database belong to.  A store gets
 * a random id when it is made, or at its first mount by a build that
 * records one: in its database (the setting "store_id") and in
 * ROOT/offloadfs.id.  A mount or fsck whose database and ROOT name
 * different stores is refused: with meta= naming another store's
 * database, or a database copied from another store, the allocator
 * would take pages the ROOT's objects use for free ones and write over
 * them, and fsck would call every object damaged.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define ID_SETTING "store_id"
#define ID_LEN 32 /* 128 random bits in hex */

static int id_valid(const char *id)
{
	size_t i;

	for (i = 0; i < ID_LEN; i++)
		if (!id[i] || !strchr("0123456789abcdef", id[i]))
			return 0;
	return id[ID_LEN] == '\0';
}

/* ROOT's id: 0, -ENOENT when there is none, -EUCLEAN when it is not one. */
static int id_read_root(const char *root, char *id)
{
	char path[PATH_MAX], buf[ID_LEN + 2];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, OFS_ID_NAME);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return -EIO;
	/* Short or empty: a creation that stopped half-way, or not ours. */
	if (n != ID_LEN + 1 || buf[ID_LEN] != '\n')
		return -EUCLEAN;
	buf[ID_LEN] = '\0';
	if (!id_valid(buf))
		return -EUCLEAN;
	memcpy(id, buf, ID_LEN + 1);
	return 0;
}

/* The database's id: 0, -ENOENT when it records none, -EUCLEAN when it is not one. */
static int id_read_db(struct meta *m, char *id)
{
	char buf[64];
	int ret = meta_setting_get(m, ID_SETTING, buf, sizeof(buf));

	if (ret)
		return ret;
	if (!id_valid(buf))
		return -EUCLEAN;
	memcpy(id, buf, ID_LEN + 1);
	return 0;
}

/* Write ROOT's id, durably (file and directory) before the database names it. */
static int id_write_root(const char *root, const char *id)
{
	char path[PATH_MAX], line[ID_LEN + 2];
	int fd, dfd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", root, OFS_ID_NAME);
	snprintf(line, sizeof(line), "%s\n", id);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, line, ID_LEN + 1) != ID_LEN + 1 || fsync(fd))
		ret = errno ? -errno : -EIO;
	close(fd);
	dfd = ret ? -1 : open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!ret && (dfd < 0 || fsync(dfd)))
		ret = -errno;
	if (dfd >= 0)
		close(dfd);
	return ret;
}

int ofs_identity_check(const char *root, struct meta *m, const char *meta_path, int db_new,
		       int *pending, char *err, size_t errlen)
{
	char rid[ID_LEN + 1], did[ID_LEN + 1];
	int r = id_read_root(root, rid), d = id_read_db(m, did);

	*pending = 0;
	if (r && r != -ENOENT && r != -EUCLEAN) {
		snprintf(err, errlen, "cannot read %s/%s: %s", root, OFS_ID_NAME, strerror(-r));
		return r;
	}
	if (d == -EUCLEAN) {
		snprintf(err, errlen, "%s records a store id that is not one: damaged (offloadctl "
			 "fsck)", meta_path);
		return -EUCLEAN;
	}
	if (d && d != -ENOENT) {
		snprintf(err, errlen, "%s: cannot read the store id: %s", meta_path, meta_errmsg(m));
		return -EIO;
	}
	if (!d && !r) {
		if (!strcmp(did, rid))
			return 0;
		snprintf(err, errlen, "%s is the database of store %s, but ROOT %s is store %s's: "
			 "not one store (does meta= name another store's database?); refusing to "
			 "use them together", meta_path, did, root, rid);
		return -EEXIST;
	}
	if (!d) {
		snprintf(err, errlen, "%s is the database of store %s, but ROOT %s %s %s: not that "
			 "store's ROOT, or its id was lost; refusing to use them together (if it "
			 "is that store's ROOT: echo %s > %s/%s)", meta_path, did, root,
			 r == -ENOENT ? "has no" : "has a damaged", OFS_ID_NAME, did, root,
			 OFS_ID_NAME);
		return -EEXIST;
	}
	if (!r && db_new) {
		snprintf(err, errlen, "ROOT %s is store %s's, and there is no database at %s "
			 "(does meta= name it?); refusing to make a new store over it", root, rid,
			 meta_path);
		return -EEXIST;
	}
	/* No id in the database: a new store, one made by a build without ids, or one half made. */
	*pending = 1;
	return 0;
}

int ofs_identity_record(const char *root, struct meta *m, char *err, size_t errlen)
{
	unsigned char raw[ID_LEN / 2];
	char id[ID_LEN + 1];
	size_t i;
	int ret = id_read_root(root, id);

	/* ROOT's id, when it has one: the database of a store half made, or made without ids. */
	if (ret) {
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
			snprintf(err, errlen, "cannot make a store id: %s", strerror(errno));
			return -EIO;
		}
		for (i = 0; i < sizeof(raw); i++)
			snprintf(id + 2 * i, 3, "%02x", raw[i]);
		ret = id_write_root(root, id);
		if (ret) {
			snprintf(err, errlen, "cannot write %s/%s: %s", root, OFS_ID_NAME,
				 strerror(-ret));
			return ret;
		}
	}
	if (meta_setting_set(m, ID_SETTING, id)) {
		snprintf(err, errlen, "cannot record the store id: %s", meta_errmsg(m));
		return -EIO;
	}
	return 0;
}
