/*
 * offloadctl scrub MOUNTPOINT [--ubsio-*]: read every object of a mounted
 * store straight from where it is stored (its bucket file, or its value
 * in the KV store, as another client of the same library), as another
 * node would, and check it against the checksum the mount reports.  The
 * mount names each object's location (user.offload.descriptor) and
 * checksum (user.offload.checksum); a file whose checksum changed
 * meanwhile was rewritten, and is skipped.
 */
#include "ctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <xxhash.h>

#include "kvb.h"
#include "kvb_hash.h"
#include "progress.h"

/*
 * A descriptor: its fields, and the escaped path of a bucket file or key
 * of a value (each byte escaped to at most three).
 */
#define SCRUB_DESC_MAX 65536 /* the kernel's largest xattr value: a file of many extents */

struct scrub {
	uint64_t files, bytes, bad, errors, skipped, dropped;
	uint64_t unchecked; /* objects or directories that could not be read (among errors) */
	struct kvb_ubsio_config uc;
	int ubsio;          /* 1: library loaded, -1: could not be */
	struct ofs_progress prog;
};

static int scrub_parse(const char *d, char *path, size_t plen, uint64_t *off, uint64_t *size)
{
	const char *fp = strstr(d, "file_path="), *o = strstr(d, "\noffset="),
		   *s = strstr(d, "\nobject_size=");
	size_t n;

	if (!fp || !o || !s)
		return -EINVAL;
	fp += strlen("file_path=");
	n = strcspn(fp, "\n");
	if (n >= plen)
		return -ENAMETOOLONG;
	memcpy(path, fp, n);
	path[n] = '\0';
	if (kvb_desc_unescape(path))
		return -EINVAL;
	*off = strtoull(o + strlen("\noffset="), NULL, 10);
	*size = strtoull(s + strlen("\nobject_size="), NULL, 10);
	return 0;
}

/*
 * A KV store evicts by itself: a value missing from it is a cache miss, and
 * the file goes, through the mount, as the daemon drops it at a read.  Not
 * when a new version was committed meanwhile (its checksum changed).
 */
static void scrub_missing(struct scrub *sc, const char *file, const char *show,
			  const char *key, const char *sumtxt)
{
	char again[64];
	ssize_t m = getxattr(file, "user.offload.checksum", again, sizeof(again) - 1);

	if (m > 0 && (again[m] = '\0', strcmp(again, sumtxt))) {
		sc->files--;
		sc->skipped++;
	} else if (unlink(file) == 0) {
		printf("%s: value '%s' missing from the KV store (evicted): file dropped\n", show,
		       key);
		sc->dropped++;
	} else if (errno != ENOENT) {
		printf("%s: value '%s' missing from the KV store; cannot drop the file: %s\n",
		       show, key, strerror(errno));
		sc->errors++;
	}
}

/* The value under the descriptor's key, fetched through the library. */
static void scrub_value(struct scrub *sc, const char *file, const char *show, const char *desc,
			const char *sumtxt)
{
	const char *k = strstr(desc, "\nkey="), *s = strstr(desc, "\nobject_size=");
	char key[SCRUB_DESC_MAX], err[1024], again[64];
	unsigned char *buf = NULL;
	uint64_t size;
	size_t n;
	ssize_t got;

	if (!k || !s || (n = strcspn(k + 5, "\n")) >= sizeof(key)) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		return;
	}
	memcpy(key, k + 5, n);
	key[n] = '\0';
	if (kvb_desc_unescape(key)) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		return;
	}
	size = strtoull(s + strlen("\nobject_size="), NULL, 10);
	sc->files++;
	if (size == 0)
		return;
	if (!sc->ubsio) {
		sc->ubsio = kvb_ubsio_client_open(&sc->uc, err, sizeof(err)) ? -1 : 1;
		if (sc->ubsio < 0)
			printf("%s: %s%s\n", show, err,
			       sc->uc.lib ? "" : " (give its path with --ubsio-lib)");
	}
	if (sc->ubsio < 0) {
		sc->errors++;
		return;
	}
	got = kvb_ubsio_client_get(key, &buf);
	if (got == -ENOENT) {
		scrub_missing(sc, file, show, key, sumtxt);
	} else if (got < 0) {
		printf("%s: value '%s': %s\n", show, key, strerror((int)-got));
		sc->errors++;
	} else if ((uint64_t)got != size) {
		printf("%s: value '%s' holds %zd bytes, the record says %" PRIu64 "\n", show, key,
		       got, size);
		sc->bad++;
	} else if (XXH3_64bits(buf, (size_t)got) != strtoull(sumtxt, NULL, 16)) {
		/* A new version committed meanwhile is not a mismatch. */
		ssize_t m = getxattr(file, "user.offload.checksum", again, sizeof(again) - 1);

		if (m > 0 && (again[m] = '\0', strcmp(again, sumtxt))) {
			sc->files--;
			sc->skipped++;
		} else {
			printf("%s: checksum mismatch (value '%s', %" PRIu64 " bytes)\n", show, key,
			       size);
			sc->bad++;
		}
	} else {
		sc->bytes += size;
	}
	free(buf);
}

/*
 * The object (or extent) a one-run descriptor desc names, against the
 * checksum sumtxt (hex); file and show as scrub_file's.  ps: the page
 * size of an extent's checksum, which may be the sum of its page sums
 * (kvb_hash.h); 0 for a one-run file's user.offload.checksum, the bytes'.
 */
static void scrub_one_run(struct scrub *sc, const char *file, const char *show,
			  const char *desc, const char *sumtxt, uint64_t ps)
{
	char bucket[4096];
	uint64_t off, size, want, done = 0, chunk = 1 << 20;
	XXH3_state_t *st, *bp = NULL;
	ssize_t n;
	char *buf;
	int fd;

	if (strstr(desc, "store=ubsio\n") == desc) {
		scrub_value(sc, file, show, desc, sumtxt);
		return;
	}
	if (scrub_parse(desc, bucket, sizeof(bucket), &off, &size)) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		return;
	}
	want = strtoull(sumtxt, NULL, 16);
	sc->files++;
	if (size == 0)
		return;
	/* Whole pages per read, so the page sums line up. */
	if (ps)
		chunk = chunk > ps ? chunk / ps * ps : ps;
	fd = open(bucket, O_RDONLY | O_CLOEXEC);
	buf = malloc((size_t)chunk);
	st = XXH3_createState();
	if (ps)
		bp = XXH3_createState();
	if (fd < 0 || !buf || !st || (ps && !bp)) {
		printf("%s: cannot open %s: %s\n", show, bucket, strerror(errno));
		sc->errors++;
		goto out;
	}
	XXH3_64bits_reset(st);
	if (bp)
		XXH3_64bits_reset(bp);
	while (done < size) {
		size_t len = size - done < chunk ? (size_t)(size - done) : (size_t)chunk, got = 0;

		while (got < len) {
			n = pread(fd, buf + got, len - got, (off_t)(off + done + got));
			if (n <= 0) {
				printf("%s: read error at %s offset %" PRIu64 "\n", show, bucket,
				       off + done + got);
				sc->errors++;
				goto out;
			}
			got += (size_t)n;
		}
		XXH3_64bits_update(st, buf, len);
		if (bp)
			kvb_pages_sum_update(bp, buf, len, (uint64_t)ps);
		done += len;
	}
	sc->bytes += size;
	if (XXH3_64bits_digest(st) != want && (!bp || XXH3_64bits_digest(bp) != want)) {
		/* A writer may have committed a new version meanwhile: check again. */
		char again[64];

		n = getxattr(file, "user.offload.checksum", again, sizeof(again) - 1);
		if (n > 0) {
			again[n] = '\0';
			if (strcmp(again, sumtxt)) {
				sc->files--;
				sc->bytes -= size;
				sc->skipped++;
				goto out;
			}
		}
		printf("%s: checksum mismatch (%s offset %" PRIu64 " size %" PRIu64 ")\n", show,
		       bucket, off, size);
		sc->bad++;
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	XXH3_freeState(st);
	XXH3_freeState(bp);
}

/*
 * A file of extents: its descriptor lists them, each after its
 * extent_offset and checksum lines, in a one-run descriptor of its own;
 * each is checked as a file of one run, and the file counts once.
 */
static void scrub_extents(struct scrub *sc, const char *file, const char *show, char *desc)
{
	char *p = strstr(desc, "\nextent_offset="), sumtxt[64];
	const char *pst = strstr(desc, "\npage_size=");
	uint64_t files = sc->files, ps = pst ? strtoull(pst + 11, NULL, 10) : 0;

	while (p) {
		char *sum = strstr(p + 1, "\nchecksum="), *next, *body;
		size_t n;

		if (!sum || (n = strcspn(sum + 10, "\n")) >= sizeof(sumtxt)) {
			printf("%s: unreadable descriptor\n", show);
			sc->errors++;
			return;
		}
		memcpy(sumtxt, sum + 10, n);
		sumtxt[n] = '\0';
		body = sum + 10 + n + 1;
		next = strstr(body - 1, "\nextent_offset=");
		if (next)
			*next = '\0';
		scrub_one_run(sc, file, show, body, sumtxt, ps);
		if (next)
			*next = '\n';
		p = next;
	}
	/* A file, whatever its count of extents (a hole-only file has none). */
	sc->files = files + 1;
}

/* file: a path for the xattr calls (short: through a directory descriptor); show: for messages. */
static void scrub_file(struct scrub *sc, const char *file, const char *show)
{
	char *desc = malloc(SCRUB_DESC_MAX), sumtxt[64];
	ssize_t n;

	if (!desc) {
		sc->errors++;
		return;
	}
	n = getxattr(file, "user.offload.descriptor", desc, SCRUB_DESC_MAX - 1);
	if (n < 0 && errno == ENODATA) {
		/* Being written, or quarantined: nothing committed to check. */
		sc->skipped++;
		goto out;
	}
	if (n < 0) {
		printf("%s: not checked: cannot read its descriptor: %s\n", show, strerror(errno));
		sc->errors++;
		sc->unchecked++;
		goto out;
	}
	desc[n] = '\0';
	if (strncmp(desc, "object_size=", 12) == 0 && strstr(desc, "\nextents=")) {
		scrub_extents(sc, file, show, desc);
		goto out;
	}
	n = getxattr(file, "user.offload.checksum", sumtxt, sizeof(sumtxt) - 1);
	if (n < 0) {
		printf("%s: unreadable descriptor\n", show);
		sc->errors++;
		goto out;
	}
	sumtxt[n] = '\0';
	scrub_one_run(sc, file, show, desc, sumtxt, 0);
out:
	free(desc);
}

/*
 * Relative to each directory's descriptor: a path longer than PATH_MAX is
 * checked like any other.  What cannot be checked is an error, named.
 */
static void scrub_dir(struct scrub *sc, int dfd, const char *dir)
{
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d) {
		printf("%s: not checked: %s\n", dir, strerror(errno));
		sc->errors++;
		sc->unchecked++;
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		char xpath[64 + NAME_MAX], *show;
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&show, "%s/%s", dir, de->d_name) < 0) {
			printf("%s: out of memory\n", dir);
			sc->errors++;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			printf("%s: not checked: %s\n", show, strerror(errno));
			sc->errors++;
			sc->unchecked++;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				printf("%s: not checked: %s\n", show, strerror(errno));
				sc->errors++;
				sc->unchecked++;
			} else {
				scrub_dir(sc, sub, show);
			}
		} else if (S_ISREG(st.st_mode)) {
			snprintf(xpath, sizeof(xpath), "/proc/self/fd/%d/%s", dirfd(d), de->d_name);
			scrub_file(sc, xpath, show);
			sc->prog.done++;
			ofs_progress_show(&sc->prog, 0);
		}
		free(show);
	}
	closedir(d);
}

/*
 * Options scrub was not given default to how the daemon reached the
 * library (offloadfs_ubsio_info in the mount's metrics): the same library,
 * Init variant and device.
 */
static void scrub_ubsio_defaults(const char *mnt, struct kvb_ubsio_config *uc, char *lib,
				 size_t liblen)
{
	static char text[1 << 20];
	const char *p, *q;
	ssize_t len = getxattr(mnt, "user.offload.metrics", text, sizeof(text) - 1);
	size_t n = 0;

	if (len <= 0)
		return;
	text[len] = '\0';
	p = strstr(text, "\noffloadfs_ubsio_info{lib=\"");
	if (!p)
		return;
	for (p += strlen("\noffloadfs_ubsio_info{lib=\""); *p && *p != '"' && n + 1 < liblen; p++) {
		if (*p == '\\' && p[1])
			p++;
		lib[n++] = *p == 'n' && p[-1] == '\\' ? '\n' : *p;
	}
	lib[n] = '\0';
	if (!uc->lib && n)
		uc->lib = lib;
	q = strstr(p, "init=\"");
	if (q && uc->new_init < 0) {
		q += strlen("init=\"");
		uc->new_init = strncmp(q, "old\"", 4) != 0;
		if (uc->new_init)
			uc->ssd_size = strtoull(q, NULL, 10);
	}
	q = strstr(p, "device=\"");
	if (q && uc->device_id == KVB_UBSIO_DEVICE_UNSET)
		uc->device_id = atoi(q + strlen("device=\""));
	if (uc->device_id == KVB_UBSIO_DEVICE_UNSET)
		uc->device_id = -1;
}

static int scrub_run(const char *mnt, const struct kvb_ubsio_config *uc)
{
	struct scrub sc = { 0 };
	struct statvfs vfs;
	uint64_t total = 0;
	char lib[PATH_MAX];

	if (ctl_check_mount(mnt))
		return 2;
	sc.uc = *uc;
	scrub_ubsio_defaults(mnt, &sc.uc, lib, sizeof(lib));
	/*
	 * The total: the files the mount holds as the walk starts (statfs's
	 * files in use).  Files made meanwhile are counted past it, which the
	 * display shows as the count alone; 0 when the mount cannot tell.
	 */
	if (statvfs(mnt, &vfs) == 0 && vfs.f_files >= vfs.f_ffree)
		total = vfs.f_files - vfs.f_ffree;
	ofs_progress_start(&sc.prog, "scrub", total, stderr, stdout);
	{
		int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0) {
			fprintf(stderr, "offloadctl: %s: %s\n", mnt, strerror(errno));
			return 2;
		}
		scrub_dir(&sc, fd, mnt);
	}
	ofs_progress_show(&sc.prog, 1);
	printf("scrub %s: %" PRIu64 " files, %" PRIu64 " bytes checked, %" PRIu64
	       " checksum mismatches, %" PRIu64 " errors, %" PRIu64 " not checked, %" PRIu64
	       " skipped (being written), %" PRIu64 " dropped (value evicted from the KV store)\n",
	       mnt, sc.files, sc.bytes, sc.bad, sc.errors, sc.unchecked, sc.skipped, sc.dropped);
	printf("%s\n", sc.bad || sc.errors ? "scrub: PROBLEMS FOUND" : "scrub: clean");
	if (sc.ubsio > 0)
		kvb_ubsio_client_close();
	return sc.bad || sc.errors ? 1 : 0;
}

int ctl_scrub(int argc, char **argv)
{
	/* Unset: the daemon's own, from its metrics. */
	struct kvb_ubsio_config uc = { .new_init = -1, .device_id = KVB_UBSIO_DEVICE_UNSET };
	const char *mnt = NULL;
	int i, r;

	for (i = 2; i < argc; i++) {
		if ((r = ctl_ubsio_opt(argc, argv, &i, &uc)) < 0)
			return 2;
		if (r)
			continue;
		if (argv[i][0] == '-' || mnt) {
			fprintf(stderr, "offloadctl: unknown argument '%s'\n", argv[i]);
			ctl_usage(stderr);
			return 2;
		}
		mnt = argv[i];
	}
	if (!mnt) {
		ctl_usage(stderr);
		return 2;
	}
	return scrub_run(mnt, &uc);
}
