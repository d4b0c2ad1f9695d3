/*
 * batch_tool: drives the batch library for tests/mount/t-batch.sh and
 * scripts/bench-batch.  Keys are kNNNN (or PREFIX/kNNNN); object i's
 * bytes are a pattern of (seed, i), so a get can check them.
 *
 *   put|get|exists|delete TENANT N SIZE [SEED]
 *   hold TENANT N SIZE        reserve and write N keys, print "held", wait to be killed
 *   dup TENANT                duplicate keys in a reserve and in a commit: EINVAL
 *   badsum TENANT             a commit with one wrong page sum fails, nothing visible
 *   torn TENANT               commit key "torn" with the sums (whole one too) of bytes
 *                             other than those written: prints "torn COMMIT ERR"
 *   taken TENANT [rmdir]      a name created (or the key's directory removed) through the
 *                             mount between reserve and commit
 *   race TENANT ROUNDS        commits racing unlinks of the same key
 *   stale TENANT              a looked-up descriptor is valid, and not once its key was
 *                             deleted and its pages put again: prints "VALID_BEFORE
 *                             VALID_AFTER reused|kept" (what the old descriptor read)
 *   bench TENANT N SIZE ROUNDS SCRATCH   put_many/get_many against raw pwrite/pread and per-key files
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef OFS_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* XXH3 on AVX2 or AVX-512 where the CPU has them */
#endif

#include "offloadfs_batch.h"

static void fill(char *buf, size_t len, unsigned seed, size_t i)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1) + i * 0x632be59bd9b4e019ULL + 1;
	size_t k;

	for (k = 0; k + 8 <= len; k += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + k, &x, 8);
	}
	for (; k < len; k++)
		buf[k] = (char)(x >> (k & 7));
}

static char **make_keys(size_t n, const char *prefix)
{
	char **keys = calloc(n, sizeof(*keys));
	size_t i;

	for (i = 0; i < n; i++) {
		keys[i] = malloc(64);
		snprintf(keys[i], 64, "%s%sk%04zu", prefix ? prefix : "", prefix ? "/" : "", i);
	}
	return keys;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "batch_tool: %s: %s\n", what, strerror(-err));
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The sums of buf's pages, then the whole content's (OFFLOADFS_CSUM). */
static uint64_t *page_sums(const char *buf, size_t len, uint64_t ps)
{
	size_t np = (len + ps - 1) / ps, p;
	uint64_t *pcs = calloc(np + 1, 8);

	for (p = 0; p < np; p++)
		pcs[p] = XXH3_64bits(buf + p * ps, len - p * ps < ps ? len - p * ps : ps);
	pcs[np] = XXH3_64bits(buf, len);
	return pcs;
}

static int cmd_io(const char *op, const char *t, size_t n, size_t size, unsigned seed,
		  const char *prefix)
{
	char **keys = make_keys(n, prefix), **bufs = calloc(n, sizeof(*bufs)), *want;
	size_t *lens = calloc(n, sizeof(*lens)), *caps = calloc(n, sizeof(*caps)), i, bad = 0;
	int *errs = calloc(n, sizeof(*errs)), *ex = calloc(n, sizeof(*ex)), ret;

	for (i = 0; i < n; i++) {
		bufs[i] = malloc(size + 1);
		lens[i] = caps[i] = size;
	}
	if (!strcmp(op, "put")) {
		for (i = 0; i < n; i++)
			fill(bufs[i], size, seed, i);
		ret = offloadfs_put_many(t, (const char *const *)keys, (const void *const *)bufs,
					 lens, n, 0, errs);
		for (i = 0; i < n; i++)
			if (errs[i])
				fprintf(stderr, "put %s: %s\n", keys[i], strerror(-errs[i]));
		if (ret)
			fprintf(stderr, "put_many: %s\n", strerror(-ret));
		printf("put %d\n", ret);
		return ret ? 1 : 0;
	}
	if (!strcmp(op, "get")) {
		want = malloc(size + 1);
		ret = offloadfs_get_many(t, (const char *const *)keys, (void *const *)bufs, caps, n,
					 lens, errs);
		for (i = 0; i < n; i++) {
			fill(want, size, seed, i);
			if (errs[i] || lens[i] != size || memcmp(want, bufs[i], size)) {
				fprintf(stderr, "get %s: err %d len %zu\n", keys[i], errs[i], lens[i]);
				bad++;
			}
		}
		printf("get %d bad %zu\n", ret, bad);
		return bad ? 1 : 0;
	}
	if (!strcmp(op, "exists")) {
		size_t c = 0;

		ret = offloadfs_exists_many(t, (const char *const *)keys, n, ex);
		for (i = 0; i < n; i++)
			c += ex[i] != 0;
		printf("exists %zu\n", c);
		return ret ? 1 : 0;
	}
	if (!strcmp(op, "delete")) {
		size_t c = 0;

		offloadfs_delete_many(t, (const char *const *)keys, n, errs);
		for (i = 0; i < n; i++)
			c += errs[i] == 0;
		printf("deleted %zu\n", c);
		return 0;
	}
	return 2;
}

/* Reserve and write n keys, then wait: the test kills this process or the daemon. */
static int cmd_hold(const char *t, size_t n, size_t size)
{
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	char **keys = make_keys(n, "held"), *buf = malloc(size + 1);
	size_t *lens = calloc(n, sizeof(*lens)), i;
	struct offloadfs_desc *d = calloc(n, sizeof(*d));
	int ret;

	if (!b)
		die("open", -errno);
	for (i = 0; i < n; i++)
		lens[i] = size;
	/* The keys' directory exists: reserve makes none. */
	ret = offloadfs_batch_reserve(b, (const char *const *)keys, lens, n, d);
	if (ret)
		die("reserve", ret);
	for (i = 0; i < n; i++) {
		fill(buf, size, 7, i);
		if (pwrite(d[i].fd, buf, size, (off_t)d[i].offset) != (ssize_t)size)
			die("pwrite", -errno);
	}
	printf("held\n");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

static int reserve_commit(struct offloadfs_batch *b, const char *const *keys, size_t n,
			  size_t size, int corrupt, int *errs, int *commit_ret)
{
	size_t *lens = calloc(n, sizeof(*lens)), i;
	struct offloadfs_desc *d = calloc(n, sizeof(*d));
	uint64_t **pcs = calloc(n, sizeof(*pcs));
	char *buf = malloc(size);
	int ret;

	*commit_ret = -EIO; /* until a commit answers */

	for (i = 0; i < n; i++)
		lens[i] = size;
	ret = offloadfs_batch_reserve(b, keys, lens, n, d);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		fill(buf, size, 3, i);
		if (pwrite(d[i].fd, buf, size, (off_t)d[i].offset) != (ssize_t)size)
			return -errno;
		pcs[i] = page_sums(buf, size, offloadfs_batch_page_size(b));
	}
	if (corrupt)
		pcs[n - 1][0] ^= 1;
	*commit_ret = offloadfs_batch_commit(b, keys, lens, (const uint64_t *const *)pcs, n, 0,
					     errs);
	return 0;
}

static int cmd_dup(const char *t)
{
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	const char *keys[3] = { "dupa", "dupb", "dupa" };
	size_t lens[3] = { 4096, 4096, 4096 };
	struct offloadfs_desc d[3];
	int ret, cret, errs[3];

	if (!b)
		die("open", -errno);
	ret = offloadfs_batch_reserve(b, keys, lens, 3, d);
	printf("reserve-dup %d %d %d %d\n", ret, d[0].err, d[1].err, d[2].err);
	/* Reserve both once, commit with a duplicate: refused as a whole, then committed. */
	ret = reserve_commit(b, keys, 2, 4096, 0, errs, &cret);
	printf("commit-unique %d %d\n", ret, cret);
	{
		const char *k2[2] = { "dupc", "dupc" };
		size_t l2[2] = { 4096, 4096 };
		uint64_t *pcs[2];
		char buf[4096];
		const char *one[1] = { "dupc" };

		ret = offloadfs_batch_reserve(b, one, l2, 1, d);
		fill(buf, 4096, 3, 0);
		if (!ret && pwrite(d[0].fd, buf, 4096, (off_t)d[0].offset) != 4096)
			die("pwrite", -errno);
		pcs[0] = pcs[1] = page_sums(buf, 4096, offloadfs_batch_page_size(b));
		cret = offloadfs_batch_commit(b, k2, l2, (const uint64_t *const *)pcs, 2, 0, errs);
		printf("commit-dup %d\n", cret);
	}
	{
		/* The same key reserved again on the description, in a later request. */
		const char *one[1] = { "dupd" };
		size_t l1[1] = { 4096 };

		offloadfs_batch_reserve(b, one, l1, 1, d);
		ret = offloadfs_batch_reserve(b, one, l1, 1, d);
		printf("reserve-again %d\n", d[0].err);
	}
	offloadfs_batch_close(b);
	return 0;
}

/*
 * Keys reserved and written, then changed through the mount before the
 * commit: tk1 created (its name taken), or with rmdir the directory of
 * tdir/k0 removed.  Prints the commit's status and each entry's.
 */
static int cmd_taken(const char *t, int rmdir_case)
{
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	const char *files[3] = { "tk0", "tk1", "tk2" }, *indir[1] = { "tdir/k0" };
	const char *const *keys = rmdir_case ? indir : files;
	size_t n = rmdir_case ? 1 : 3, size = 70000, lens[3], i;
	struct offloadfs_desc d[3];
	uint64_t *pcs[3];
	char *buf = malloc(size), path[4200];
	int errs[3] = { 0 }, ret, fd;

	if (!b || !buf)
		die("open", -errno);
	for (i = 0; i < n; i++)
		lens[i] = size;
	ret = offloadfs_batch_reserve(b, keys, lens, n, d);
	if (ret)
		die("reserve", ret);
	for (i = 0; i < n; i++) {
		fill(buf, size, 3, i);
		if (pwrite(d[i].fd, buf, size, (off_t)d[i].offset) != (ssize_t)size)
			die("pwrite", -errno);
		pcs[i] = page_sums(buf, size, offloadfs_batch_page_size(b));
	}
	if (rmdir_case) {
		snprintf(path, sizeof(path), "%s/tdir", t);
		if (rmdir(path))
			die("rmdir", -errno);
	} else {
		snprintf(path, sizeof(path), "%s/tk1", t);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0 || write(fd, "mount", 5) != 5 || close(fd))
			die("create", -errno);
	}
	ret = offloadfs_batch_commit(b, keys, lens, (const uint64_t *const *)pcs, n, 0, errs);
	printf("taken %d", ret);
	for (i = 0; i < n; i++)
		printf(" %d", errs[i]);
	printf("\n");
	offloadfs_batch_close(b);
	return 0;
}

static int cmd_badsum(const char *t)
{
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	const char *keys[4] = { "bad0", "bad1", "bad2", "bad3" };
	int errs[4], cret = 0, ret;

	if (!b)
		die("open", -errno);
	ret = reserve_commit(b, keys, 4, 200000, 1, errs, &cret);
	printf("badsum %d %d %d %d %d %d\n", ret, cret, errs[0], errs[1], errs[2], errs[3]);
	offloadfs_batch_close(b);
	return 0;
}

static int cmd_torn(const char *t)
{
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	const char *keys[1] = { "torn" };
	size_t lens[1] = { 200000 };
	struct offloadfs_desc d;
	char *buf = malloc(lens[0]);
	uint64_t *pcs;
	int errs[1] = { 0 }, ret;

	if (!b || !buf)
		die("open", -errno);
	ret = offloadfs_batch_reserve(b, keys, lens, 1, &d);
	if (ret)
		die("reserve", ret);
	fill(buf, lens[0], 5, 0);
	pcs = page_sums(buf, lens[0], offloadfs_batch_page_size(b));
	buf[lens[0] / 2] ^= 1; /* what reaches the bucket file is not what was summed */
	if (pwrite(d.fd, buf, lens[0], (off_t)d.offset) != (ssize_t)lens[0])
		die("pwrite", -errno);
	ret = offloadfs_batch_commit(b, keys, lens, (const uint64_t *const *)&pcs, 1,
				     OFFLOADFS_CSUM, errs);
	printf("torn %d %d\n", ret, errs[0]);
	offloadfs_batch_close(b);
	return 0;
}

struct racer {
	const char *path;
	volatile int stop;
	unsigned long unlinked;
};

static void *unlinker(void *arg)
{
	struct racer *r = arg;

	while (!r->stop)
		if (unlink(r->path) == 0)
			r->unlinked++;
	return NULL;
}

/* Each round: reserve and write "race", then commit while another thread unlinks it. */
static int cmd_race(const char *t, unsigned rounds)
{
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	const char *keys[1] = { "race" };
	char path[4096], *want = malloc(65536), *got = malloc(65537);
	struct racer r = { .path = path };
	unsigned i, present = 0, gone = 0, bad = 0;
	int errs[1], cret;

	if (!b)
		die("open", -errno);
	snprintf(path, sizeof(path), "%s/race", t);
	fill(want, 65536, 3, 0);
	for (i = 0; i < rounds; i++) {
		pthread_t th;
		int fd;

		r.stop = 0;
		pthread_create(&th, NULL, unlinker, &r);
		if (reserve_commit(b, keys, 1, 65536, 0, errs, &cret))
			die("reserve", -EIO);
		usleep(200);
		r.stop = 1;
		pthread_join(th, NULL);
		if (cret) {
			bad++;
			fprintf(stderr, "race commit %d\n", cret);
			continue;
		}
		/* Committed: the file was there whole, then maybe unlinked whole. */
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			gone++;
			continue;
		}
		if (read(fd, got, 65537) != 65536 || memcmp(got, want, 65536))
			bad++;
		else
			present++;
		close(fd);
		unlink(path);
	}
	printf("race present %u gone %u bad %u unlinked %lu\n", present, gone, bad, r.unlinked);
	offloadfs_batch_close(b);
	return bad ? 1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Throughput, interleaved round by round: put_many/get_many of n keys
 * against pwrite/pread of the same bytes at each key's offset in one
 * preallocated file under SCRATCH, and against a file per key through the
 * mount (the POSIX path: open, write, close; open, read, close).  Medians
 * of the rounds, in keys/s.
 *
 * Two raw write baselines.  "raw pwrite" rewrites the same range every
 * round: its pages are in the page cache and dirty, so it is a copy into
 * memory.  A put writes pages the store has just allocated, which were
 * punched when they were last freed: "raw pwrite new" punches its range
 * first (untimed, as the store punches in the background) and then does
 * what a put's reserve and write do, an fallocate and a pwrite per key.
 * Neither syncs: the store's barrier runs in the background too.
 */
static int cmd_bench(const char *t, size_t n, size_t size, unsigned rounds, const char *scratch)
{
	char **keys = make_keys(n, NULL), **bufs = calloc(n, sizeof(*bufs)), path[4096], p[4200];
	size_t *lens = calloc(n, sizeof(*lens)), i;
	int *errs = calloc(n, sizeof(*errs)), fd, rawfd, ret;
	double *m[10], t0, med[10];
	const char *name[10] = { "batch put", "batch get", "raw pwrite", "raw pread", "posix put",
				 "posix get", "lookup+pread", "raw pwrite new", "batch get again",
				 "batch delete" };
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	struct offloadfs_desc *d = calloc(n, sizeof(*d));
	unsigned r, k;

	double *steps[7];
	const char *sname[7] = { "reserve", "client pwrite", "client page sums", "commit",
				 "lookup", "client pread", "client checksum" };

	if (!b)
		die("open", -errno);
	for (k = 0; k < 10; k++)
		m[k] = calloc(rounds, sizeof(double));
	for (k = 0; k < 7; k++)
		steps[k] = calloc(rounds, sizeof(double));
	for (i = 0; i < n; i++) {
		bufs[i] = malloc(size);
		fill(bufs[i], size, 1, i);
		lens[i] = size;
	}
	snprintf(path, sizeof(path), "%s/raw.data", scratch);
	rawfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (rawfd < 0 || posix_fallocate(rawfd, 0, (off_t)(n * size)))
		die("raw file", -EIO);
	for (r = 0; r < rounds; r++) {
		t0 = now();
		ret = offloadfs_put_many(t, (const char *const *)keys, (const void *const *)bufs,
					 lens, n, 0, errs);
		m[0][r] = now() - t0;
		if (ret)
			die("put_many", ret);
		t0 = now();
		ret = offloadfs_get_many(t, (const char *const *)keys, (void *const *)bufs, lens, n,
					 lens, errs);
		m[1][r] = now() - t0;
		if (ret)
			die("get_many", ret);
		/* A client that trusts the descriptors: no checksum of what it read. */
		t0 = now();
		ret = offloadfs_batch_lookup(b, (const char *const *)keys, n, d);
		for (i = 0; !ret && i < n; i++)
			if (pread(d[i].fd, bufs[i], size, (off_t)d[i].offset) != (ssize_t)size)
				die("pread", -errno);
		m[6][r] = now() - t0;
		if (ret)
			die("lookup", ret);
		/* The same get once more: pages the kernel has seen read before (see above). */
		t0 = now();
		ret = offloadfs_get_many(t, (const char *const *)keys, (void *const *)bufs, lens, n,
					 lens, errs);
		m[8][r] = now() - t0;
		if (ret)
			die("get_many", ret);
		/* The get's steps, as get_many takes them: each key's check right after its read. */
		{
			double t1, t2, tr = 0, th = 0;

			t0 = now();
			ret = offloadfs_batch_lookup(b, (const char *const *)keys, n, d);
			t1 = now();
			for (i = 0; !ret && i < n; i++) {
				if (pread(d[i].fd, bufs[i], size, (off_t)d[i].offset) != (ssize_t)size)
					die("pread", -errno);
				t2 = now();
				tr += t2 - t1;
				if (XXH3_64bits(bufs[i], size) != d[i].csum)
					die("checksum", -EIO);
				t1 = now();
				th += t1 - t2;
			}
			if (ret)
				die("lookup", ret);
			steps[4][r] = t1 - t0 - tr - th;
			steps[5][r] = tr;
			steps[6][r] = th;
		}
		t0 = now();
		ret = offloadfs_delete_many(t, (const char *const *)keys, n, errs);
		m[9][r] = now() - t0;
		if (ret)
			die("delete_many", ret);

		/* The put's steps, through the lower-level calls. */
		{
			uint64_t **pcs = calloc(n, sizeof(*pcs));
			double t1, t2, t3;

			t0 = now();
			ret = offloadfs_batch_reserve(b, (const char *const *)keys, lens, n, d);
			t1 = now();
			for (i = 0; !ret && i < n; i++)
				if (pwrite(d[i].fd, bufs[i], size, (off_t)d[i].offset) != (ssize_t)size)
					die("pwrite", -errno);
			t2 = now();
			for (i = 0; i < n; i++)
				pcs[i] = page_sums(bufs[i], size, offloadfs_batch_page_size(b));
			t3 = now();
			/* As put_many commits: the sums recorded as given. */
			if (!ret)
				ret = offloadfs_batch_commit(b, (const char *const *)keys, lens,
							     (const uint64_t *const *)pcs, n,
							     OFFLOADFS_CSUM, errs);
			if (ret)
				die("steps", ret);
			steps[0][r] = t1 - t0;
			steps[1][r] = t2 - t1;
			steps[2][r] = t3 - t2;
			steps[3][r] = now() - t3;
			for (i = 0; i < n; i++)
				free(pcs[i]);
			free(pcs);
			offloadfs_delete_many(t, (const char *const *)keys, n, errs);
		}

		t0 = now();
		for (i = 0; i < n; i++)
			if (pwrite(rawfd, bufs[i], size, (off_t)(i * size)) != (ssize_t)size)
				die("pwrite", -errno);
		m[2][r] = now() - t0;
		t0 = now();
		for (i = 0; i < n; i++)
			if (pread(rawfd, bufs[i], size, (off_t)(i * size)) != (ssize_t)size)
				die("pread", -errno);
		m[3][r] = now() - t0;
		/* Fresh pages: [n * size, 2n * size) punched, then reserved and written key by key. */
		if (fallocate(rawfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(n * size),
			      (off_t)(n * size)))
			die("punch", -errno);
		t0 = now();
		for (i = 0; i < n; i++)
			if (fallocate(rawfd, FALLOC_FL_KEEP_SIZE, (off_t)((n + i) * size), (off_t)size) ||
			    pwrite(rawfd, bufs[i], size, (off_t)((n + i) * size)) != (ssize_t)size)
				die("pwrite new", -errno);
		m[7][r] = now() - t0;

		t0 = now();
		for (i = 0; i < n; i++) {
			snprintf(p, sizeof(p), "%s/px%s", t, keys[i]);
			fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || write(fd, bufs[i], size) != (ssize_t)size)
				die("posix put", -errno);
			close(fd);
		}
		m[4][r] = now() - t0;
		t0 = now();
		for (i = 0; i < n; i++) {
			snprintf(p, sizeof(p), "%s/px%s", t, keys[i]);
			fd = open(p, O_RDONLY);
			if (fd < 0 || read(fd, bufs[i], size) != (ssize_t)size)
				die("posix get", -errno);
			close(fd);
		}
		m[5][r] = now() - t0;
		for (i = 0; i < n; i++) {
			snprintf(p, sizeof(p), "%s/px%s", t, keys[i]);
			unlink(p);
		}
	}
	close(rawfd);
	unlink(path);
	for (k = 0; k < 10; k++) {
		med[k] = median(m[k], rounds);
		printf("%-14s %9.0f keys/s %7.0f MiB/s\n", name[k], n / med[k],
		       n * (double)size / med[k] / 1048576);
	}
	printf("put: %.2fx raw pwrite, %.2fx raw pwrite new, %.2fx posix; get: %.2fx raw pread, "
	       "%.2fx posix (warm); get again: %.2fx raw pread; lookup+pread: %.2fx raw pread\n",
	       med[2] / med[0], med[7] / med[0], med[4] / med[0], med[3] / med[1], med[5] / med[1],
	       med[3] / med[8], med[3] / med[6]);
	printf("a put's steps (medians per batch):");
	for (k = 0; k < 4; k++)
		printf(" %s %.0f us%s", sname[k], median(steps[k], rounds) * 1e6, k < 3 ? "," : "\n");
	printf("a get's steps (medians per batch):");
	for (k = 4; k < 7; k++)
		printf(" %s %.0f us%s", sname[k], median(steps[k], rounds) * 1e6, k < 6 ? "," : "\n");
	printf("per batch: raw pwrite %.0f us, raw pwrite new %.0f us, raw pread %.0f us, "
	       "batch delete %.0f us\n", med[2] * 1e6, med[7] * 1e6, med[3] * 1e6, med[9] * 1e6);
	offloadfs_batch_close(b);
	return 0;
}

static int cmd_stale(const char *t)
{
	const size_t size = 131072;
	char *keys[17], *bufs[17], *want = malloc(size), *got = malloc(size), path[4200];
	size_t lens[17], i;
	int errs[17], before, after, fd, ret;
	struct offloadfs_batch *b = offloadfs_batch_open(t);
	struct offloadfs_desc d;

	if (!b || !want || !got)
		die("open", -errno);
	for (i = 0; i < 17; i++) {
		keys[i] = malloc(16);
		snprintf(keys[i], 16, "s%zu", i);
		bufs[i] = malloc(size);
		fill(bufs[i], size, i ? 8 : 7, i);
		lens[i] = size;
	}
	memcpy(want, bufs[0], size);
	ret = offloadfs_put_many(t, (const char *const *)keys, (const void *const *)bufs, lens, 1,
				 0, errs);
	if (!ret)
		ret = offloadfs_batch_lookup(b, (const char *const *)keys, 1, &d);
	if (ret)
		die("put and lookup", ret);
	before = offloadfs_batch_valid(b, &d);
	/* Deleted, its pages freed by a barrier (fsync of a directory), then put again. */
	snprintf(path, sizeof(path), "%s/%s", t, keys[0]);
	if (unlink(path))
		die("unlink", -errno);
	fd = open(t, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fsync(fd))
		die("fsync", -errno);
	close(fd);
	ret = offloadfs_put_many(t, (const char *const *)keys + 1, (const void *const *)bufs + 1,
				 lens + 1, 16, 0, errs);
	if (ret)
		die("put again", ret);
	if (pread(d.fd, got, size, (off_t)d.offset) != (ssize_t)size)
		die("pread", -errno);
	after = offloadfs_batch_valid(b, &d);
	printf("%d %d %s\n", before, after, memcmp(got, want, size) ? "reused" : "kept");
	offloadfs_batch_close(b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: batch_tool CMD TENANT ...\n");
		return 2;
	}
	if (!strcmp(argv[1], "put") || !strcmp(argv[1], "get") || !strcmp(argv[1], "exists") ||
	    !strcmp(argv[1], "delete"))
		return cmd_io(argv[1], argv[2], argc > 3 ? strtoul(argv[3], NULL, 0) : 64,
			      argc > 4 ? strtoul(argv[4], NULL, 0) : 131072,
			      argc > 5 ? (unsigned)strtoul(argv[5], NULL, 0) : 1,
			      argc > 6 ? argv[6] : NULL);
	if (!strcmp(argv[1], "hold") && argc > 4)
		return cmd_hold(argv[2], strtoul(argv[3], NULL, 0), strtoul(argv[4], NULL, 0));
	if (!strcmp(argv[1], "dup"))
		return cmd_dup(argv[2]);
	if (!strcmp(argv[1], "badsum"))
		return cmd_badsum(argv[2]);
	if (!strcmp(argv[1], "torn"))
		return cmd_torn(argv[2]);
	if (!strcmp(argv[1], "taken"))
		return cmd_taken(argv[2], argc > 3 && !strcmp(argv[3], "rmdir"));
	if (!strcmp(argv[1], "stale"))
		return cmd_stale(argv[2]);
	if (!strcmp(argv[1], "race") && argc > 3)
		return cmd_race(argv[2], (unsigned)strtoul(argv[3], NULL, 0));
	if (!strcmp(argv[1], "bench") && argc > 6)
		return cmd_bench(argv[2], strtoul(argv[3], NULL, 0), strtoul(argv[4], NULL, 0),
				 (unsigned)strtoul(argv[5], NULL, 0), argv[6]);
	fprintf(stderr, "batch_tool: bad command\n");
	return 2;
}
