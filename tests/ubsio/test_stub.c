/*
 * test_stub.c: tests of the UBSIO KV-cache stand-in (ubsio_stub.c).
 *
 *   test_stub LIB [--old-init] [--omit-delete]
 *
 * LIB is the built library (libubsio_kvc.so).  --old-init: it was built with
 * -DUBSIO_STUB_OLD_INIT (Init takes only deviceId; the capacity comes from
 * UBSIO_STUB_SSD_SIZE).  --omit-delete: it was built with
 * -DUBSIO_STUB_OMIT_DELETE (UbsioKvCacheDelete must be missing).
 *
 * Init is once per process, so every case runs in a forked child that sets
 * its environment and then dlopens the library afresh; the parent never
 * loads it.  Children exit through exit(), so under AddressSanitizer each
 * one is checked for leaks.  Prints "N passed, N failed"; exits 1 on failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OK = 0, ENOTFOUND = -2, EIOERR = -5, EBADARG = -22, ENOSPACE = -28, ESHORT = -75,
       ENOTINIT = -107 };

typedef int32_t (*init_fn)(int32_t, uint64_t);
typedef int32_t (*init_old_fn)(int32_t);
typedef int32_t (*put_fn)(const char *, void *, size_t, uint32_t);
typedef int32_t (*get_fn)(const char *, void *, size_t, uint32_t);
typedef bool (*exist_fn)(const char *, uint32_t);
typedef int32_t (*delete_fn)(const char *, uint32_t);
typedef int32_t (*getlength_fn)(const char *, size_t *, uint32_t);
typedef int32_t (*batchput_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*batchget_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*batchgetdirect_fn)(const char **, uint32_t, void ***, size_t **, uint32_t,
				     uint32_t, int *, uint32_t);
typedef int32_t (*batchexist_fn)(const char **, uint32_t, bool *, uint32_t);
typedef int32_t (*batchdelete_fn)(const char **, uint32_t, int32_t *, uint32_t);
typedef int32_t (*batchgetlength_fn)(const char **, uint32_t, size_t *, int32_t *, uint32_t);
typedef void (*batchfree_fn)(void **, uint32_t);

static struct {
	void *h;
	init_fn Init;
	init_old_fn InitOld;
	put_fn Put;
	get_fn Get;
	exist_fn Exist;
	delete_fn Delete;
	getlength_fn GetLength;
	batchput_fn BatchPut;
	batchget_fn BatchGet;
	batchgetdirect_fn BatchGetDirect;
	batchexist_fn BatchExist;
	batchdelete_fn BatchDelete;
	batchgetlength_fn BatchGetLength;
	batchfree_fn BatchFree;
} U;

static const char *lib_path;
static bool old_init, omit_delete;
static char root[256];

/* Counts shared by the children. */
static struct counts {
	int passed, failed;
} *cnt;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (cond) {                                                       \
			__atomic_add_fetch(&cnt->passed, 1, __ATOMIC_SEQ_CST);    \
		} else {                                                          \
			__atomic_add_fetch(&cnt->failed, 1, __ATOMIC_SEQ_CST);    \
			fprintf(stderr, "FAIL %s:%d (%s): ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
		}                                                                 \
	} while (0)

#define CHECK_RC(expr, want) \
	do { \
		long _rc = (long)(expr); \
		CHECK(_rc == (long)(want), "%s = %ld, want %ld", #expr, _rc, (long)(want)); \
	} while (0)

/* ---- loading ---- */

#define RESOLVE(field, name, required)                                             \
	do {                                                                       \
		dlerror();                                                         \
		*(void **)&U.field = dlsym(U.h, name);                             \
		if (required)                                                      \
			CHECK(U.field != NULL, "dlsym(%s): %s", name, dlerror());  \
	} while (0)

/* dlopen the library and resolve every symbol; 0 on success. */
static int load(void)
{
	int failed = cnt->failed;

	U.h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	CHECK(U.h != NULL, "dlopen(%s): %s", lib_path, dlerror());
	if (!U.h)
		return -1;
	if (old_init)
		RESOLVE(InitOld, "UbsioKvCacheInit", true);
	else
		RESOLVE(Init, "UbsioKvCacheInit", true);
	RESOLVE(Put, "UbsioKvCachePut", true);
	RESOLVE(Get, "UbsioKvCacheGet", true);
	RESOLVE(Exist, "UbsioKvCacheExist", true);
	RESOLVE(Delete, "UbsioKvCacheDelete", !omit_delete);
	RESOLVE(GetLength, "UbsioKvCacheGetLength", true);
	RESOLVE(BatchPut, "UbsioKvCacheBatchPut", true);
	RESOLVE(BatchGet, "UbsioKvCacheBatchGet", true);
	RESOLVE(BatchGetDirect, "UbsioKvCacheBatchGetDirect", true);
	RESOLVE(BatchExist, "UbsioKvCacheBatchExist", true);
	RESOLVE(BatchDelete, "UbsioKvCacheBatchDelete", true);
	RESOLVE(BatchGetLength, "UbsioKvCacheBatchGetLength", true);
	RESOLVE(BatchFree, "UbsioKvCacheBatchFree", true);
	if (omit_delete)
		CHECK(U.Delete == NULL, "UbsioKvCacheDelete is exported by an OMIT_DELETE build");
	return cnt->failed == failed ? 0 : -1;
}

static int32_t init(uint64_t ssd)
{
	char s[32];

	if (old_init) {
		snprintf(s, sizeof(s), "%" PRIu64, ssd);
		setenv("UBSIO_STUB_SSD_SIZE", s, 1);
		return U.InitOld(0);
	}
	return U.Init(0, ssd);
}

/* Delete, through BatchDelete when the library has no Delete. */
static int32_t del(const char *key)
{
	int32_t r = 12345, rc;

	if (U.Delete)
		return U.Delete(key, 0);
	rc = U.BatchDelete(&key, 1, &r, 0);
	return rc == ENOTINIT || rc == EBADARG ? rc : r;
}

/* ---- helpers ---- */

static void clear_env(void)
{
	static const char *const vars[] = { "UBSIO_STUB_DIR", "UBSIO_STUB_FAIL_INIT",
		"UBSIO_STUB_FAIL_PUT", "UBSIO_STUB_FAIL_GET", "UBSIO_STUB_FAIL_DELETE",
		"UBSIO_STUB_FAIL_KEYS", "UBSIO_STUB_LOG", "UBSIO_STUB_SSD_SIZE",
		"UBSIO_STUB_FSYNC" };
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

/* Make the directory root/name (out gets its path). */
static void new_dir(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", root, name);
	if (mkdir(out, 0755) && errno != EEXIST) {
		fprintf(stderr, "mkdir %s: %s\n", out, strerror(errno));
		exit(2);
	}
}

/* Files in dir, not counting dot files (temporaries). */
static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void hex(const char *key, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (; *key; key++) {
		*out++ = hx[(unsigned char)*key >> 4];
		*out++ = hx[(unsigned char)*key & 15];
	}
	*out = '\0';
}

static bool file_exists(const char *dir, const char *name)
{
	char p[16384];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &sb) == 0;
}

static off_t file_size(const char *dir, const char *name)
{
	char p[16384];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &sb) ? -1 : sb.st_size;
}

static void fill(unsigned char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 8));
}

/* ---- cases ---- */

static void case_symbols(void)
{
	load();
}

static void case_not_initialised(void)
{
	char dir[512], file[600];
	unsigned char buf[8] = "abc";
	const char *keys[2] = { "a", "b" };
	void *bufs[2] = { buf, buf };
	size_t lens[2] = { 3, 3 }, len = 99;
	int res[2] = { 7, 7 };
	int32_t res32[2] = { 7, 7 };
	bool bres[2] = { true, true };
	void **dbufs = (void **)1;
	size_t *dlens = (size_t *)1;
	int fd;

	if (load())
		return;
	CHECK_RC(U.Put("a", buf, 3, 0), ENOTINIT);
	CHECK_RC(U.Get("a", buf, 3, 0), ENOTINIT);
	CHECK(!U.Exist("a", 0), "Exist before Init");
	if (U.Delete)
		CHECK_RC(U.Delete("a", 0), ENOTINIT);
	CHECK_RC(U.GetLength("a", &len, 0), ENOTINIT);
	CHECK_RC(U.BatchPut(keys, 2, bufs, lens, res, 0), ENOTINIT);
	CHECK_RC(U.BatchGet(keys, 2, bufs, lens, res, 0), ENOTINIT);
	CHECK_RC(U.BatchGetDirect(keys, 2, &dbufs, &dlens, 1, 2, res, 0), ENOTINIT);
	CHECK(dbufs == NULL && dlens == NULL, "BatchGetDirect before Init leaves outputs set");
	CHECK_RC(U.BatchExist(keys, 2, bres, 0), ENOTINIT);
	CHECK_RC(U.BatchDelete(keys, 2, res32, 0), ENOTINIT);
	CHECK_RC(U.BatchGetLength(keys, 2, lens, res32, 0), ENOTINIT);
	CHECK(res[0] == 7 && res32[0] == 7 && bres[0], "results written by a call that failed");
	U.BatchFree(NULL, 0);

	/* Init: no directory, a file, a missing directory, injected failure. */
	clear_env();
	CHECK_RC(init(0), EBADARG);
	new_dir("notinit", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/plainfile", dir);
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	close(fd);
	setenv("UBSIO_STUB_DIR", file, 1);
	CHECK_RC(init(0), EBADARG);
	snprintf(file, sizeof(file), "%s/missing", dir);
	setenv("UBSIO_STUB_DIR", file, 1);
	CHECK_RC(init(0), EBADARG);
	setenv("UBSIO_STUB_DIR", dir, 1);
	setenv("UBSIO_STUB_FAIL_INIT", "1", 1);
	CHECK_RC(init(0), EIOERR);
	setenv("UBSIO_STUB_FAIL_INIT", "0", 1);
	setenv("UBSIO_STUB_FAIL_PUT", "x1", 1);
	CHECK_RC(init(0), EBADARG);
	unsetenv("UBSIO_STUB_FAIL_PUT");
	CHECK_RC(U.Put("a", buf, 3, 0), ENOTINIT);

	/* Then a good Init; a second one is a no-op. */
	CHECK_RC(init(0), OK);
	CHECK_RC(init(0), OK);
	CHECK_RC(U.Put("a", buf, 3, 0), OK);
	CHECK(U.Exist("a", 0), "Exist after Put");
}

static void case_roundtrip(void)
{
	static const char odd[] = "t1/a b/\xc3\xbc\n";
	char dir[512], name[8192], longkey[501], toolong[2002];
	unsigned char val[4096], out[4097];
	size_t len = 0;
	int i;

	if (load())
		return;
	new_dir("roundtrip", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	CHECK_RC(init(0), OK);

	fill(val, sizeof(val), 1);
	val[0] = 0;
	val[100] = 0;
	CHECK(!U.Exist(odd, 0), "Exist before Put");
	CHECK_RC(U.Put(odd, val, sizeof(val), 0), OK);
	CHECK(U.Exist(odd, 0), "Exist after Put");
	CHECK_RC(U.GetLength(odd, &len, 0), OK);
	CHECK(len == sizeof(val), "GetLength %zu", len);
	memset(out, 0xee, sizeof(out));
	CHECK_RC(U.Get(odd, out, sizeof(val), 0), OK);
	CHECK(memcmp(out, val, sizeof(val)) == 0, "Get returned other bytes");
	memset(out, 0xee, sizeof(out));
	CHECK_RC(U.Get(odd, out, sizeof(val) - 1, 0), ESHORT);
	CHECK(out[0] == 0xee, "a short Get copied bytes");
	CHECK_RC(U.Get(odd, out, sizeof(out), 0), OK);
	CHECK(memcmp(out, val, sizeof(val)) == 0 && out[sizeof(val)] == 0xee,
	      "Get into a larger buffer");
	hex(odd, name);
	CHECK(file_exists(dir, name), "no file %s for the odd key", name);
	CHECK(file_size(dir, name) == (off_t)sizeof(val), "file size %ld",
	      (long)file_size(dir, name));

	/* Overwrite with another length, and an empty value. */
	CHECK_RC(U.Put(odd, val + 1, 10, 0), OK);
	CHECK_RC(U.GetLength(odd, &len, 0), OK);
	CHECK(len == 10, "GetLength after overwrite %zu", len);
	CHECK_RC(U.Get(odd, out, 10, 0), OK);
	CHECK(memcmp(out, val + 1, 10) == 0, "Get after overwrite");
	CHECK_RC(U.Put("empty", NULL, 0, 0), OK);
	len = 99;
	CHECK_RC(U.GetLength("empty", &len, 0), OK);
	CHECK(len == 0, "empty GetLength %zu", len);
	CHECK_RC(U.Get("empty", NULL, 0, 0), OK);
	CHECK(U.Exist("empty", 0), "empty value exists");

	/* Missing keys and bad arguments. */
	CHECK_RC(U.Get("nope", out, sizeof(out), 0), ENOTFOUND);
	CHECK_RC(U.GetLength("nope", &len, 0), ENOTFOUND);
	CHECK(!U.Exist("nope", 0), "Exist of a missing key");
	CHECK_RC(del("nope"), ENOTFOUND);
	CHECK_RC(U.Put(NULL, val, 1, 0), EBADARG);
	CHECK_RC(U.Put("", val, 1, 0), EBADARG);
	CHECK_RC(U.Put("k", NULL, 1, 0), EBADARG);
	CHECK_RC(U.Get(NULL, out, 1, 0), EBADARG);
	CHECK_RC(U.Get("k", NULL, 1, 0), EBADARG);
	CHECK_RC(U.GetLength(odd, NULL, 0), EBADARG);
	CHECK_RC(del(NULL), EBADARG);
	CHECK(!U.Exist(NULL, 0) && !U.Exist("", 0), "Exist of a bad key");

	/* A long key goes into "+" directories; one too long is refused. */
	for (i = 0; i < 500; i++)
		longkey[i] = (char)('A' + i % 26);
	longkey[500] = '\0';
	CHECK_RC(U.Put(longkey, val, 77, 0), OK);
	CHECK_RC(U.Get(longkey, out, 77, 0), OK);
	CHECK(memcmp(out, val, 77) == 0, "long key value");
	hex(longkey, name);
	{
		char nested[8192];
		size_t o = 0, k, hl = strlen(name);

		for (k = 0; k < hl; k++) {
			if (k && k % 200 == 0) {
				nested[o++] = '+';
				nested[o++] = '/';
			}
			nested[o++] = name[k];
		}
		nested[o] = '\0';
		CHECK(file_exists(dir, nested), "no nested file %s", nested);
	}
	memset(toolong, 'x', 2001);
	toolong[2001] = '\0';
	CHECK_RC(U.Put(toolong, val, 1, 0), EBADARG);
	toolong[2000] = '\0';
	CHECK_RC(U.Put(toolong, val, 5, 0), OK);
	CHECK_RC(U.Get(toolong, out, 5, 0), OK);

	/* Files: the odd key, "empty", the long key's "+" dir, the 2000-byte key's. */
	CHECK(count_files(dir) == 4, "%d entries in the store", count_files(dir));
	CHECK_RC(del(odd), OK);
	CHECK(!U.Exist(odd, 0), "Exist after Delete");
	CHECK_RC(U.Get(odd, out, sizeof(out), 0), ENOTFOUND);
	CHECK_RC(del(odd), ENOTFOUND);
	CHECK_RC(del(longkey), OK);
	CHECK_RC(del(toolong), OK);
	CHECK(count_files(dir) == 1, "%d entries after deletes (the \"+\" dirs must go)",
	      count_files(dir));
}

/* Values written by one process are read by the next. */
static void case_persist_write(void)
{
	char dir[512], k[32];
	unsigned char val[300];
	int i;

	if (load())
		return;
	new_dir("persist", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	CHECK_RC(init(0), OK);
	for (i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "obj/%d", i);
		fill(val, sizeof(val), (unsigned)i);
		CHECK_RC(U.Put(k, val, sizeof(val), 0), OK);
	}
	CHECK(count_files(dir) == 10, "%d files", count_files(dir));
}

static void case_persist_read(void)
{
	char dir[512], k[32], p[600];
	unsigned char val[300], out[300];
	int i, fd;

	snprintf(dir, sizeof(dir), "%s/persist", root);
	/* A temporary left by a dead process goes; one of a live process stays. */
	snprintf(p, sizeof(p), "%s/.tmp-999999999-1", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0 && write(fd, "half", 4) == 4, "write stale temporary");
	close(fd);
	snprintf(p, sizeof(p), "%s/.tmp-%ld-1", dir, (long)getppid());
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	close(fd);

	if (load())
		return;
	setenv("UBSIO_STUB_DIR", dir, 1);
	/* 3000 bytes already stored: room for 10 more. */
	CHECK_RC(init(3010), OK);
	CHECK(!file_exists(dir, ".tmp-999999999-1"), "stale temporary kept");
	snprintf(p, sizeof(p), ".tmp-%ld-1", (long)getppid());
	CHECK(file_exists(dir, p), "a live process's temporary removed");
	unlink(p);
	for (i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "obj/%d", i);
		fill(val, sizeof(val), (unsigned)i);
		CHECK_RC(U.Get(k, out, sizeof(out), 0), OK);
		CHECK(memcmp(out, val, sizeof(val)) == 0, "value of %s after restart", k);
	}
	CHECK_RC(U.Put("more", val, 11, 0), ENOSPACE);
	CHECK_RC(U.Put("more", val, 10, 0), OK);
}

static void case_capacity(void)
{
	char dir[512];
	unsigned char val[1000] = { 0 };
	const char *keys[3] = { "c/x", "c/y", "c/z" };
	void *bufs[3] = { val, val, val };
	size_t lens[3] = { 50, 60, 40 };
	int res[3];

	if (load())
		return;
	new_dir("capacity", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	CHECK_RC(init(1000), OK);
	CHECK_RC(U.Put("c/1", val, 600, 0), OK);
	CHECK_RC(U.Put("c/2", val, 400, 0), OK);  /* exactly full */
	CHECK_RC(U.Put("c/3", val, 1, 0), ENOSPACE);
	CHECK(!U.Exist("c/3", 0), "a refused put stored something");
	CHECK_RC(U.Put("c/1", val, 500, 0), OK);  /* overwrite: 900 */
	CHECK_RC(U.Put("c/1", val, 601, 0), ENOSPACE);
	CHECK_RC(U.Put("c/3", val, 100, 0), OK);  /* 1000 */
	CHECK_RC(del("c/2"), OK);                 /* 600 */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);  /* 750 */
	lens[0] = 200;
	lens[1] = 51;
	lens[2] = 60;
	/* x 50 -> 200: 900; y 60 -> 51: 891; z 40 -> 60: 911 */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);
	lens[0] = 290;  /* x 200 -> 290: 1001 */
	CHECK_RC(U.BatchPut(keys, 1, bufs, lens, res, 0), ENOSPACE);
	CHECK(res[0] == ENOSPACE, "results[0] = %d", res[0]);
	CHECK_RC(U.Put("c/big", val, 2000, 0), ENOSPACE);
}

static void case_unlimited(void)
{
	char dir[512];
	size_t big = 8 << 20, len = 0;
	unsigned char *val = malloc(big);

	if (!val || load()) {
		free(val);
		return;
	}
	new_dir("unlimited", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	CHECK_RC(init(0), OK);
	fill(val, big, 3);
	CHECK_RC(U.Put("big", val, big, 0), OK);
	CHECK_RC(U.GetLength("big", &len, 0), OK);
	CHECK(len == big, "len %zu", len);
	free(val);
}

static void case_batch(void)
{
	char dir[512];
	enum { N = 4 };
	const char *keys[N] = { "b/0", "b/bad/1", "b/2", "b/3 x" };
	unsigned char vals[N][64], outs[N][64];
	void *bufs[N], *obufs[N];
	size_t lens[N], glens[N];
	int res[N];
	int32_t res32[N];
	bool bres[N];
	void **dbufs = NULL;
	size_t *dlens = NULL;
	int i;

	if (load())
		return;
	new_dir("batch", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	setenv("UBSIO_STUB_FAIL_KEYS", "bad", 1);
	CHECK_RC(init(0), OK);
	for (i = 0; i < N; i++) {
		fill(vals[i], sizeof(vals[i]), (unsigned)i + 10);
		bufs[i] = vals[i];
		obufs[i] = outs[i];
		lens[i] = (size_t)(10 + i * 10);
	}

	CHECK_RC(U.BatchPut(keys, N, bufs, lens, res, 0), EIOERR);
	CHECK(res[0] == 0 && res[1] == EIOERR && res[2] == 0 && res[3] == 0,
	      "BatchPut results %d %d %d %d", res[0], res[1], res[2], res[3]);
	CHECK(count_files(dir) == 3, "%d files after BatchPut", count_files(dir));
	CHECK_RC(U.Put("b/bad/1", vals[1], 5, 0), EIOERR);
	CHECK(!U.Exist("b/bad/1", 0), "a faulty key exists");

	CHECK_RC(U.BatchExist(keys, N, bres, 0), EIOERR);
	CHECK(bres[0] && !bres[1] && bres[2] && bres[3], "BatchExist %d %d %d %d", bres[0],
	      bres[1], bres[2], bres[3]);

	CHECK_RC(U.BatchGetLength(keys, N, glens, res32, 0), EIOERR);
	CHECK(res32[0] == 0 && res32[1] == EIOERR && res32[2] == 0 && res32[3] == 0,
	      "BatchGetLength results %d %d %d %d", res32[0], res32[1], res32[2], res32[3]);
	CHECK(glens[0] == 10 && glens[2] == 30 && glens[3] == 40, "BatchGetLength %zu %zu %zu",
	      glens[0], glens[2], glens[3]);

	memset(outs, 0, sizeof(outs));
	CHECK_RC(U.BatchGet(keys, N, obufs, glens, res, 0), EIOERR);
	CHECK(res[0] == 0 && res[1] == EIOERR && res[2] == 0 && res[3] == 0,
	      "BatchGet results %d %d %d %d", res[0], res[1], res[2], res[3]);
	for (i = 0; i < N; i++)
		if (i != 1)
			CHECK(memcmp(outs[i], vals[i], lens[i]) == 0, "BatchGet value %d", i);
	glens[2] = 29;  /* short buffer for one key */
	CHECK_RC(U.BatchGet(keys, N, obufs, glens, res, 0), EIOERR);
	CHECK(res[0] == 0 && res[2] == ESHORT && res[3] == 0, "short BatchGet %d %d %d", res[0],
	      res[2], res[3]);

	/* Zero copy: the library's buffers, freed with BatchFree. */
	CHECK_RC(U.BatchGetDirect(keys, N, &dbufs, &dlens, 2, 2, res, 0), EIOERR);
	CHECK(dbufs != NULL && dlens != NULL, "BatchGetDirect outputs");
	if (dbufs && dlens) {
		CHECK(dlens == (size_t *)(dbufs + N), "lens is not after the pointers");
		CHECK(res[0] == 0 && res[1] == EIOERR && res[2] == 0 && res[3] == 0,
		      "BatchGetDirect results %d %d %d %d", res[0], res[1], res[2], res[3]);
		CHECK(dbufs[1] == NULL && dlens[1] == 0, "failed key has a buffer");
		for (i = 0; i < N; i++)
			if (i != 1)
				CHECK(dbufs[i] && dlens[i] == lens[i] &&
					      memcmp(dbufs[i], vals[i], lens[i]) == 0,
				      "BatchGetDirect value %d", i);
		U.BatchFree(dbufs, N);
	}
	CHECK_RC(U.BatchGetDirect(keys, N, &dbufs, &dlens, 3, 1, res, 0), EBADARG);
	CHECK(dbufs == NULL && dlens == NULL, "outputs of a refused BatchGetDirect");
	CHECK_RC(U.BatchGetDirect(keys, 1, &dbufs, &dlens, 1, 1, res, 0), OK);
	if (dbufs) {
		CHECK(dlens[0] == 10 && memcmp(dbufs[0], vals[0], 10) == 0, "1x1 direct");
		U.BatchFree(dbufs, 1);
	}
	CHECK_RC(U.BatchGetDirect(keys, 0, &dbufs, &dlens, 0, 5, res, 0), OK);
	U.BatchFree(dbufs, 0);

	/* Empty batches, a NULL key, NULL arrays. */
	CHECK_RC(U.BatchPut(keys, 0, NULL, NULL, NULL, 0), OK);
	CHECK_RC(U.BatchPut(keys, 2, NULL, lens, res, 0), EBADARG);
	{
		const char *k2[2] = { NULL, "b/n" };

		CHECK_RC(U.BatchPut(k2, 2, bufs, lens, res, 0), EBADARG);
		CHECK(res[0] == EBADARG && res[1] == 0, "NULL key in a batch %d %d", res[0], res[1]);
		CHECK(U.Exist("b/n", 0), "the good key of a batch with a NULL key");
	}

	CHECK_RC(U.BatchDelete(keys, N, res32, 0), EIOERR);
	CHECK(res32[0] == 0 && res32[1] == EIOERR && res32[2] == 0 && res32[3] == 0,
	      "BatchDelete results %d %d %d %d", res32[0], res32[1], res32[2], res32[3]);
	CHECK_RC(U.BatchDelete(keys, N, res32, 0), ENOTFOUND);
	CHECK(res32[0] == ENOTFOUND && res32[1] == EIOERR && res32[2] == ENOTFOUND &&
		      res32[3] == ENOTFOUND,
	      "second BatchDelete %d %d %d %d", res32[0], res32[1], res32[2], res32[3]);
	CHECK_RC(U.BatchExist(keys, N, bres, 0), EIOERR);
	CHECK(!bres[0] && !bres[1] && !bres[2] && !bres[3], "BatchExist after delete");
	CHECK(count_files(dir) == 1, "%d files after BatchDelete", count_files(dir));
}

static void case_fail_put(void)
{
	char dir[512];
	unsigned char v[4] = "abc";

	if (load())
		return;
	new_dir("failput", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	setenv("UBSIO_STUB_FAIL_PUT", "2", 1);
	CHECK_RC(init(0), OK);
	CHECK_RC(U.Put("p1", v, 3, 0), OK);
	CHECK_RC(U.Put(NULL, v, 3, 0), EBADARG);  /* not counted */
	CHECK_RC(U.Put("p2", v, 3, 0), EIOERR);
	CHECK(!U.Exist("p2", 0), "the failed put stored its value");
	CHECK_RC(U.Put("p3", v, 3, 0), OK);
	CHECK_RC(U.Put("p2", v, 3, 0), OK);
	CHECK(count_files(dir) == 3, "%d files", count_files(dir));
}

static void case_fail_batch_counts(void)
{
	char dir[512];
	unsigned char v[4] = "abc", o[3][4];
	const char *keys[3] = { "g0", "g1", "g2" };
	void *bufs[3] = { v, v, v }, *obufs[3] = { o[0], o[1], o[2] };
	size_t lens[3] = { 3, 3, 3 };
	int res[3];
	int32_t res32[3];

	if (load())
		return;
	new_dir("failbatch", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	setenv("UBSIO_STUB_FAIL_PUT", "3", 1);
	setenv("UBSIO_STUB_FAIL_GET", "2", 1);
	setenv("UBSIO_STUB_FAIL_DELETE", "4", 1);
	CHECK_RC(init(0), OK);
	CHECK_RC(U.Put("g0", v, 3, 0), OK);                         /* put 1 */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), EIOERR);  /* puts 2..4 */
	CHECK(res[0] == 0 && res[1] == EIOERR && res[2] == 0, "BatchPut %d %d %d", res[0], res[1],
	      res[2]);
	CHECK(!U.Exist("g1", 0), "g1 stored by the failed put");
	CHECK_RC(U.Put("g1", v, 3, 0), OK);                         /* put 5 */
	CHECK_RC(U.BatchGet(keys, 3, obufs, lens, res, 0), EIOERR); /* gets 1..3 */
	CHECK(res[0] == 0 && res[1] == EIOERR && res[2] == 0, "BatchGet %d %d %d", res[0], res[1],
	      res[2]);
	CHECK_RC(U.Get("g1", o[1], 3, 0), OK);                      /* get 4 */
	CHECK_RC(del("g0"), OK);                                    /* delete 1 */
	CHECK_RC(U.BatchDelete(keys, 3, res32, 0), ENOTFOUND);      /* deletes 2..4 */
	CHECK(res32[0] == ENOTFOUND && res32[1] == 0 && res32[2] == EIOERR, "BatchDelete %d %d %d",
	      res32[0], res32[1], res32[2]);
	CHECK(U.Exist("g2", 0), "g2 deleted by the failed delete");
	CHECK_RC(del("g2"), OK);                                    /* delete 5 */
}

static void case_log(void)
{
	static const char odd[] = "t1/a b/\xc3\xbc\n";
	char dir[512], log[600], line[1024];
	unsigned char v[8] = "1234567", o[8];
	const char *keys[3] = { "l/a", "l/b", "l/c" };
	void *bufs[3] = { v, v, v }, *obufs[3] = { o, o, o };
	size_t lens[3] = { 7, 7, 7 };
	int res[3];
	int lines = 0, puts = 0, bputs = 0, inits = 0, gets = 0, bgets = 0, odd_lines = 0;
	FILE *f;

	if (load())
		return;
	new_dir("log", dir, sizeof(dir));
	snprintf(log, sizeof(log), "%s/calls.log", root);
	setenv("UBSIO_STUB_DIR", dir, 1);
	setenv("UBSIO_STUB_LOG", log, 1);
	CHECK_RC(U.Put("x", v, 1, 0), ENOTINIT);  /* not logged */
	CHECK_RC(init(0), OK);
	CHECK_RC(U.Put(odd, v, 7, 0), OK);
	CHECK_RC(U.Put("l/p", v, 7, 0), OK);
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);
	CHECK_RC(U.BatchPut(keys, 2, bufs, lens, res, 0), OK);
	CHECK_RC(U.Get(odd, o, 7, 0), OK);
	CHECK_RC(U.BatchGet(keys, 3, obufs, lens, res, 0), OK);
	f = fopen(log, "r");
	CHECK(f != NULL, "open log %s", log);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		inits += !strncmp(line, "Init ", 5);
		puts += !strncmp(line, "Put ", 4);
		bputs += !strncmp(line, "BatchPut ", 9);
		gets += !strncmp(line, "Get ", 4);
		bgets += !strncmp(line, "BatchGet ", 9);
		odd_lines += strstr(line, " t1/a\\x20b/\\xc3\\xbc\\x0a ") != NULL;
	}
	fclose(f);
	CHECK(lines == 7, "%d log lines", lines);
	CHECK(inits == 1 && puts == 2 && bputs == 2 && gets == 1 && bgets == 1,
	      "log counts: Init %d Put %d BatchPut %d Get %d BatchGet %d", inits, puts, bputs,
	      gets, bgets);
	CHECK(odd_lines == 2, "%d lines with the escaped odd key", odd_lines);
}

struct thr {
	int id, errors;
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	unsigned char v[100], o[100];
	char k[32];
	int i;

	for (i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "th%d/%d", t->id, i);
		fill(v, sizeof(v), (unsigned)(t->id * 1000 + i));
		t->errors += U.Put(k, v, sizeof(v), 0) != 0;
		t->errors += U.Get(k, o, sizeof(o), 0) != 0 || memcmp(o, v, sizeof(v)) != 0;
		if (i % 2)
			t->errors += del(k) != 0;
	}
	return NULL;
}

static void case_threads(void)
{
	enum { T = 8 };
	char dir[512];
	pthread_t th[T];
	struct thr t[T];
	int i, errors = 0;

	if (load())
		return;
	new_dir("threads", dir, sizeof(dir));
	setenv("UBSIO_STUB_DIR", dir, 1);
	CHECK_RC(init(0), OK);
	for (i = 0; i < T; i++) {
		t[i].id = i;
		t[i].errors = 0;
		pthread_create(&th[i], NULL, thread_main, &t[i]);
	}
	for (i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		errors += t[i].errors;
	}
	CHECK(errors == 0, "%d errors in threads", errors);
	CHECK(count_files(dir) == T * 100, "%d files", count_files(dir));
}

/* ---- driver ---- */

static void run(const char *name, void (*fn)(void))
{
	int failed = cnt->failed, status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		clear_env();
		fn();
		if (U.h)
			dlclose(U.h);
		exit(0);  /* exit, not _exit: LeakSanitizer runs here */
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		cnt->failed++;
		fprintf(stderr, "FAIL %s: child %s %d\n", name,
			WIFEXITED(status) ? "exited with" : "killed by signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	}
	printf("%-20s %s\n", name, cnt->failed == failed ? "ok" : "FAILED");
}

static int rm_entry(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	int i, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: %s LIB [--old-init] [--omit-delete]\n", argv[0]);
		return 2;
	}
	lib_path = argv[1];
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--old-init")) {
			old_init = true;
		} else if (!strcmp(argv[i], "--omit-delete")) {
			omit_delete = true;
		} else {
			fprintf(stderr, "unknown option %s\n", argv[i]);
			return 2;
		}
	}
	cnt = mmap(NULL, sizeof(*cnt), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cnt == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	snprintf(root, sizeof(root), "%s/ubsio_stub_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 2;
	}

	run("symbols", case_symbols);
	run("not_initialised", case_not_initialised);
	run("roundtrip", case_roundtrip);
	run("persist_write", case_persist_write);
	run("persist_read", case_persist_read);
	run("capacity", case_capacity);
	run("unlimited", case_unlimited);
	run("batch", case_batch);
	run("fail_put", case_fail_put);
	run("fail_batch_counts", case_fail_batch_counts);
	run("log", case_log);
	run("threads", case_threads);

	printf("%d passed, %d failed\n", cnt->passed, cnt->failed);
	rc = cnt->failed ? 1 : 0;
	if (rc)
		printf("store directories kept in %s\n", root);
	else
		nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	munmap(cnt, sizeof(*cnt));
	return rc;
}
