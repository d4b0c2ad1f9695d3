/*
 * test_stub.c: tests of the UBSIO KV-cache stand-in (ubsio_stub.c): that it
 * keeps the real library's codes, limits and rough edges (see its header).
 *
 *   test_stub LIB [--old-init] [--omit-delete]
 *
 * LIB is the built library (libubsio_kvc.so).  --old-init: it was built with
 * -DUBSIO_STUB_OLD_INIT (Init takes only devId, there is no Exit).
 * --omit-delete: it was built with -DUBSIO_STUB_OMIT_DELETE (no Delete nor
 * BatchDelete): the cases that delete are left out.
 *
 * Init sticks for the life of a process, so every case runs in a forked
 * child that sets its environment and then dlopens the library afresh; the
 * parent never loads it.  Cases that need a process to die (kill -9, abort)
 * fork once more.  Children exit through exit(), so under AddressSanitizer
 * each one is checked for leaks.  Prints "N passed, N failed"; exits 1 on
 * failure.
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
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The library's codes: KvcError, the SDK's CResult and BResult. */
enum { OK = 0, ERR = 1, INVAL = 3, RETRY = 5, NOTFOUND = 7 };
/* An injected fault, unless UBSIO_STUB_FAULT_RC says otherwise. */
enum { FAULT = 1 };

#define BATCH_MAX 16384
#define POOL_BLOCK (4u << 20)
#define GARBAGE ((size_t)0xdeadbeefu)

typedef int32_t (*init_fn)(int32_t, uint64_t);
typedef int32_t (*init_old_fn)(int32_t);
typedef void (*exit_fn)(void);
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
typedef int32_t (*batchfree_fn)(void **, uint32_t);

static struct {
	void *h;
	init_fn Init;
	init_old_fn InitOld;
	exit_fn Exit;
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
	RESOLVE(Exit, "UbsioKvCacheExit", !old_init);
	RESOLVE(Put, "UbsioKvCachePut", true);
	RESOLVE(Get, "UbsioKvCacheGet", true);
	RESOLVE(Exist, "UbsioKvCacheExist", true);
	RESOLVE(Delete, "UbsioKvCacheDelete", !omit_delete);
	RESOLVE(GetLength, "UbsioKvCacheGetLength", true);
	RESOLVE(BatchPut, "UbsioKvCacheBatchPut", true);
	RESOLVE(BatchGet, "UbsioKvCacheBatchGet", true);
	RESOLVE(BatchGetDirect, "UbsioKvCacheBatchGetDirect", true);
	RESOLVE(BatchExist, "UbsioKvCacheBatchExist", true);
	RESOLVE(BatchDelete, "UbsioKvCacheBatchDelete", !omit_delete);
	RESOLVE(BatchGetLength, "UbsioKvCacheBatchGetLength", true);
	RESOLVE(BatchFree, "UbsioKvCacheBatchFree", true);
	if (omit_delete)
		CHECK(U.Delete == NULL && U.BatchDelete == NULL,
		      "UbsioKvCache(Batch)Delete exported by an OMIT_DELETE build");
	if (old_init)
		CHECK(U.Exit == NULL, "UbsioKvCacheExit is exported by an OLD_INIT build");
	return cnt->failed == failed ? 0 : -1;
}

static int32_t init_dev(int32_t dev)
{
	return old_init ? U.InitOld(dev) : U.Init(dev, 0);
}

static int32_t init(void)
{
	return init_dev(-1);
}

static int32_t del(const char *key)
{
	return U.Delete(key, 0);
}

/* ---- helpers ---- */

static void clear_env(void)
{
	static const char *const vars[] = { "UBSIO_STUB_DIR", "UBSIO_STUB_FAIL_INIT",
		"UBSIO_STUB_FAIL_PUT", "UBSIO_STUB_FAIL_GET", "UBSIO_STUB_FAIL_DELETE",
		"UBSIO_STUB_FAIL_KEYS", "UBSIO_STUB_LOG", "UBSIO_STUB_SSD_SIZE",
		"UBSIO_STUB_FSYNC", "UBSIO_STUB_ACL", "UBSIO_STUB_FLUSH_MS",
		"UBSIO_STUB_EVICT_AT", "UBSIO_STUB_BATCHGET", "UBSIO_STUB_POOL_BLOCKS" };
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

/* Make the directory root/name (out gets its path) and point the stub at it. */
static void use_dir(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", root, name);
	if (mkdir(out, 0755) && errno != EEXIST) {
		fprintf(stderr, "mkdir %s: %s\n", out, strerror(errno));
		exit(2);
	}
	setenv("UBSIO_STUB_DIR", out, 1);
}

/* Entries in dir, not counting dot files (temporaries). */
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

/* The relative path of key's file: hex, "+/" every 200 characters. */
static void rel_path(const char *key, char *out)
{
	char h[1024];
	size_t k, o = 0, hl;

	hex(key, h);
	hl = strlen(h);
	for (k = 0; k < hl; k++) {
		if (k && k % 200 == 0) {
			out[o++] = '+';
			out[o++] = '/';
		}
		out[o++] = h[k];
	}
	out[o] = '\0';
}

static off_t key_file_size(const char *dir, const char *key)
{
	char p[2048], rel[1100];
	struct stat sb;

	rel_path(key, rel);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return stat(p, &sb) ? -1 : sb.st_size;
}

static int key_file_remove(const char *dir, const char *key)
{
	char p[2048], rel[1100];

	rel_path(key, rel);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return unlink(p);
}

static void fill(unsigned char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 8));
}

/* Lines of the log starting with prefix; the last such line in last. */
static int log_count(const char *log, const char *prefix, char *last, size_t lastlen)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(log, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, prefix, strlen(prefix)))
			continue;
		n++;
		if (last) {
			size_t len = strcspn(line, "\n");

			if (len >= lastlen)
				len = lastlen - 1;
			memcpy(last, line, len);
			last[len] = '\0';
		}
	}
	fclose(f);
	return n;
}

static void set_log(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.log", root, name);
	unlink(out);
	setenv("UBSIO_STUB_LOG", out, 1);
}

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Fork a process that runs fn and then waits to be killed; returns its pid
 * once fn is done (it writes a byte to the pipe). */
static pid_t spawn_and_wait(void (*fn)(void))
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe(p))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		fn();
		if (write(p[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1) {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return pid;
}

/* ---- cases ---- */

static void case_symbols(void)
{
	load();
}

static void case_not_initialised(void)
{
	unsigned char buf[8] = "abc";
	const char *keys[2] = { "a", "b" }, *bad[2] = { "a", NULL };
	void *bufs[2] = { buf, buf };
	size_t lens[2] = { 3, 3 }, len = 99;
	int res[2] = { 77, 77 };
	int32_t res32[2] = { 77, 77 };
	bool bres[2] = { true, true };

	if (load())
		return;
	/* The checks come first: a bad call is 3 even before Init. */
	CHECK_RC(U.Put(NULL, buf, 3, 0), INVAL);
	CHECK_RC(U.BatchPut(bad, 2, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchFree(NULL, 1), INVAL);
	/* Then 1, and nothing written. */
	CHECK_RC(U.Put("a", buf, 3, 0), ERR);
	CHECK_RC(U.Get("a", buf, 3, 0), ERR);
	CHECK(!U.Exist("a", 0), "Exist before Init");
	if (U.Delete)
		CHECK_RC(U.Delete("a", 0), ERR);
	CHECK_RC(U.GetLength("a", &len, 0), ERR);
	CHECK(len == 99, "GetLength wrote %zu", len);
	CHECK_RC(U.BatchPut(keys, 2, bufs, lens, res, 0), ERR);
	CHECK_RC(U.BatchGet(keys, 2, bufs, lens, res, 0), ERR);
	CHECK_RC(U.BatchExist(keys, 2, bres, 0), ERR);
	if (U.BatchDelete)
		CHECK_RC(U.BatchDelete(keys, 2, res32, 0), ERR);
	CHECK_RC(U.BatchGetLength(keys, 2, lens, res32, 0), ERR);
	CHECK_RC(U.BatchFree(bufs, 2), ERR);
	CHECK(res[0] == 77 && res32[0] == 77 && bres[0] && lens[0] == 3 && bufs[0] == buf,
	      "a call that failed wrote its outputs");
	if (U.Exit)
		U.Exit();  /* before Init: nothing */
}

static void case_init(void)
{
	char dir[512], file[600], log[600], last[256];
	unsigned char v[4] = "abc";
	int fd;

	if (load())
		return;
	set_log("init", log, sizeof(log));
	/* No directory, a plain file, a missing one: 1. */
	CHECK_RC(init(), ERR);
	use_dir("init", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/plainfile", dir);
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	close(fd);
	setenv("UBSIO_STUB_DIR", file, 1);
	CHECK_RC(init(), ERR);
	snprintf(file, sizeof(file), "%s/missing", dir);
	setenv("UBSIO_STUB_DIR", file, 1);
	CHECK_RC(init(), ERR);
	setenv("UBSIO_STUB_DIR", dir, 1);
	/* Injected failure, bad settings. */
	setenv("UBSIO_STUB_FAIL_INIT", "1", 1);
	CHECK_RC(init(), ERR);
	setenv("UBSIO_STUB_FAIL_INIT", "0", 1);
	setenv("UBSIO_STUB_FAIL_PUT", "x1", 1);
	CHECK_RC(init(), ERR);
	unsetenv("UBSIO_STUB_FAIL_PUT");
	setenv("UBSIO_STUB_BATCHGET", "direct", 1);
	CHECK_RC(init(), ERR);
	unsetenv("UBSIO_STUB_BATCHGET");
	/* A device needs Ascend's ACL library; without it Init fails. */
	CHECK_RC(init_dev(0), ERR);
	CHECK_RC(init_dev(3), ERR);
	if (!old_init)
		CHECK_RC(init_dev(-2), ERR);
	CHECK_RC(U.Put("a", v, 3, 0), ERR);
	/* No device: fine; Init again changes nothing. */
	CHECK_RC(init(), OK);
	CHECK_RC(init_dev(0), OK);
	CHECK_RC(U.Put("a", v, 3, 0), OK);
	CHECK(U.Exist("a", 0), "Exist after Put");
	CHECK(log_count(log, "Init ", last, sizeof(last)) == (old_init ? 10 : 11),
	      "%d Init lines", log_count(log, "Init ", NULL, 0));
	CHECK(!strcmp(last, "Init 0 0 0"), "last Init line \"%s\"", last);
	CHECK(log_count(log, "Init 0 0 1", NULL, 0) == 1, "the failed device Init is logged");
	if (U.Exit)
		U.Exit();
}

/* With UBSIO_STUB_ACL a device works; ssdSize is not a capacity. */
static void case_init_acl(void)
{
	char dir[512], log[600];
	unsigned char *v = calloc(1, 100000);

	if (!v || load()) {
		free(v);
		return;
	}
	use_dir("acl", dir, sizeof(dir));
	set_log("acl", log, sizeof(log));
	setenv("UBSIO_STUB_ACL", "1", 1);
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	setenv("UBSIO_STUB_SSD_SIZE", "1000000", 1);
	CHECK_RC(old_init ? U.InitOld(0) : U.Init(0, 10), OK);
	CHECK_RC(U.Put("big", v, 100000, 0), OK);
	free(v);
	/* The old Init has no size: its line shows the capacity it runs with. */
	CHECK(log_count(log, old_init ? "Init 0 1000000 0" : "Init 0 10 0", NULL, 0) == 1,
	      "Init line");
	if (U.Exit)
		U.Exit();
}

static void case_old_negative_device(void)
{
	char dir[512];

	if (load())
		return;
	use_dir("olddev", dir, sizeof(dir));
	/* The old library hands no device to the SDK: any negative one works. */
	CHECK_RC(init_dev(-7), old_init ? OK : ERR);
	if (U.Exit)
		U.Exit();
}

static void case_limits(void)
{
	char dir[512], k255[256], k256[257];
	unsigned char v[16] = "0123456789", o[16];
	const char *keys[3] = { "l/a", "l/b", "l/c" };
	const char *nullkey[3] = { "l/a", NULL, "l/c" }, *longkey[3] = { "l/a", k256, "l/c" };
	const char *empty[3] = { "l/a", "", "l/c" };
	void *bufs[3] = { v, v, v }, *nullbuf[3] = { v, NULL, v };
	size_t lens[3] = { 5, 5, 5 }, zero[3] = { 5, 0, 5 }, len = 42, glens[3] = { 9, 9, 9 };
	int res[3] = { 77, 77, 77 };
	int32_t res32[3] = { 77, 77, 77 };
	bool bres[3] = { true, true, true };
	void *fb[2] = { NULL, NULL };

	if (load())
		return;
	use_dir("limits", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	memset(k255, 'k', 255);
	k255[255] = '\0';
	memset(k256, 'k', 256);
	k256[256] = '\0';

	/* Keys: 1..255 bytes. */
	CHECK_RC(U.Put(k255, v, 3, 0), OK);
	CHECK_RC(U.Get(k255, o, 3, 0), OK);
	CHECK_RC(U.Put(k256, v, 3, 0), INVAL);
	CHECK_RC(U.Put("", v, 3, 0), INVAL);
	CHECK_RC(U.Put(NULL, v, 3, 0), INVAL);
	CHECK_RC(U.Get(k256, o, 3, 0), INVAL);
	CHECK_RC(U.GetLength(k256, &len, 0), INVAL);
	CHECK_RC(del(k256), INVAL);
	CHECK_RC(del(""), INVAL);
	CHECK(!U.Exist(k256, 0) && !U.Exist("", 0) && !U.Exist(NULL, 0), "Exist of a bad key");
	/* No empty values, no NULL buffers. */
	CHECK_RC(U.Put("l/e", v, 0, 0), INVAL);
	CHECK_RC(U.Put("l/e", NULL, 3, 0), INVAL);
	CHECK_RC(U.Get(k255, o, 0, 0), INVAL);
	CHECK_RC(U.Get(k255, NULL, 3, 0), INVAL);
	CHECK_RC(U.GetLength(k255, NULL, 0), INVAL);
	CHECK(!U.Exist("l/e", 0), "a refused put stored something");

	/* Batch sizes 1..16384, arrays non-NULL. */
	CHECK_RC(U.BatchPut(keys, 0, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(keys, BATCH_MAX + 1, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(NULL, 3, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(keys, 3, NULL, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(keys, 3, bufs, NULL, res, 0), INVAL);
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, NULL, 0), INVAL);
	CHECK_RC(U.BatchGet(keys, 0, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchGet(keys, 3, NULL, lens, res, 0), INVAL);
	CHECK_RC(U.BatchExist(keys, 0, bres, 0), INVAL);
	CHECK_RC(U.BatchExist(keys, 3, NULL, 0), INVAL);
	CHECK_RC(U.BatchDelete(keys, 0, res32, 0), INVAL);
	CHECK_RC(U.BatchDelete(keys, BATCH_MAX + 1, res32, 0), INVAL);
	CHECK_RC(U.BatchGetLength(keys, 0, glens, res32, 0), INVAL);
	CHECK_RC(U.BatchGetLength(keys, 3, NULL, res32, 0), INVAL);
	CHECK_RC(U.BatchFree(fb, 0), INVAL);
	CHECK_RC(U.BatchFree(fb, BATCH_MAX + 1), INVAL);
	CHECK_RC(U.BatchFree(NULL, 2), INVAL);

	/* One bad entry fails the whole batch: nothing done, results untouched. */
	CHECK_RC(U.BatchPut(nullkey, 3, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(longkey, 3, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(empty, 3, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(keys, 3, nullbuf, lens, res, 0), INVAL);
	CHECK_RC(U.BatchPut(keys, 3, bufs, zero, res, 0), INVAL);
	CHECK(res[0] == 77 && res[2] == 77, "results of a refused BatchPut %d %d", res[0], res[2]);
	CHECK(!U.Exist("l/a", 0) && !U.Exist("l/c", 0), "a refused BatchPut stored keys");
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);
	CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0, "BatchPut %d %d %d", res[0], res[1], res[2]);
	res[0] = res[1] = res[2] = 77;
	CHECK_RC(U.BatchGet(nullkey, 3, bufs, lens, res, 0), INVAL);
	CHECK_RC(U.BatchGet(keys, 3, bufs, zero, res, 0), INVAL);
	CHECK(res[0] == 77 && res[2] == 77, "results of a refused BatchGet");
	CHECK_RC(U.BatchExist(longkey, 3, bres, 0), INVAL);
	CHECK(bres[0] && bres[2], "results of a refused BatchExist");
	CHECK_RC(U.BatchGetLength(empty, 3, glens, res32, 0), INVAL);
	CHECK(glens[0] == 9 && res32[0] == 77, "outputs of a refused BatchGetLength");
	CHECK_RC(U.BatchDelete(nullkey, 3, res32, 0), INVAL);
	CHECK(res32[0] == 77 && res32[2] == 77, "results of a refused BatchDelete");
	CHECK(U.Exist("l/a", 0) && U.Exist("l/c", 0), "a refused BatchDelete deleted keys");
	if (U.Exit)
		U.Exit();
}

static void case_roundtrip(void)
{
	static const char odd[] = "t1/a b/\xc3\xbc\n";
	char dir[512], longkey[201], k255[256], rel[1100], p[2048];
	unsigned char val[4096], out[5000];
	size_t len = 0;
	struct stat sb;
	int i;

	if (load())
		return;
	use_dir("roundtrip", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);

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
	/* A shorter buffer gets a prefix, a longer one the value and no more: both 0. */
	memset(out, 0xee, sizeof(out));
	CHECK_RC(U.Get(odd, out, 1000, 0), OK);
	CHECK(memcmp(out, val, 1000) == 0 && out[1000] == 0xee, "short Get");
	memset(out, 0xee, sizeof(out));
	CHECK_RC(U.Get(odd, out, sizeof(out), 0), OK);
	CHECK(memcmp(out, val, sizeof(val)) == 0 && out[sizeof(val)] == 0xee &&
		      out[sizeof(out) - 1] == 0xee, "long Get");
	CHECK(key_file_size(dir, odd) == (off_t)sizeof(val), "file size %ld",
	      (long)key_file_size(dir, odd));

	/* Overwrite with another length. */
	CHECK_RC(U.Put(odd, val + 1, 10, 0), OK);
	CHECK_RC(U.GetLength(odd, &len, 0), OK);
	CHECK(len == 10, "GetLength after overwrite %zu", len);
	CHECK_RC(U.Get(odd, out, 10, 0), OK);
	CHECK(memcmp(out, val + 1, 10) == 0, "Get after overwrite");

	/* Missing keys: Get 7, GetLength 1 (len untouched), Delete 0. */
	len = 4242;
	CHECK_RC(U.Get("nope", out, sizeof(out), 0), NOTFOUND);
	CHECK_RC(U.GetLength("nope", &len, 0), ERR);
	CHECK(len == 4242, "GetLength of a missing key wrote %zu", len);
	CHECK(!U.Exist("nope", 0), "Exist of a missing key");
	CHECK_RC(del("nope"), OK);

	/* Long keys go into "+" directories. */
	for (i = 0; i < 200; i++)
		longkey[i] = (char)('A' + i % 26);
	longkey[200] = '\0';
	for (i = 0; i < 255; i++)
		k255[i] = (char)('a' + i % 26);
	k255[255] = '\0';
	CHECK_RC(U.Put(longkey, val, 77, 0), OK);
	CHECK_RC(U.Put(k255, val, 5, 0), OK);
	CHECK_RC(U.Get(longkey, out, 77, 0), OK);
	CHECK(memcmp(out, val, 77) == 0, "long key value");
	rel_path(k255, rel);
	CHECK(strstr(rel, "+/") != NULL, "no split in %s", rel);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	CHECK(stat(p, &sb) == 0 && sb.st_size == 5, "no nested file %s", rel);
	CHECK(count_files(dir) == 3, "%d entries in the store", count_files(dir));
	CHECK_RC(del(odd), OK);
	CHECK(!U.Exist(odd, 0), "Exist after Delete");
	CHECK_RC(U.Get(odd, out, sizeof(out), 0), NOTFOUND);
	CHECK_RC(del(odd), OK);
	CHECK_RC(del(longkey), OK);
	CHECK_RC(del(k255), OK);
	CHECK(count_files(dir) == 0, "%d entries after deletes (the \"+\" dirs must go)",
	      count_files(dir));
	if (U.Exit)
		U.Exit();
}

/* Values written by one process are read by the next. */
static void case_persist_write(void)
{
	char dir[512], k[32];
	unsigned char val[300];
	int i;

	if (load())
		return;
	use_dir("persist", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	for (i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "obj/%d", i);
		fill(val, sizeof(val), (unsigned)i);
		CHECK_RC(U.Put(k, val, sizeof(val), 0), OK);
	}
	CHECK(count_files(dir) == 10, "%d files", count_files(dir));
	if (U.Exit)
		U.Exit();
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
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	/* 3000 bytes already stored: room for 10 more. */
	setenv("UBSIO_STUB_SSD_SIZE", "3010", 1);
	CHECK_RC(init(), OK);
	snprintf(p, sizeof(p), "%s/.tmp-999999999-1", dir);
	CHECK(access(p, F_OK) != 0, "stale temporary kept");
	snprintf(p, sizeof(p), "%s/.tmp-%ld-1", dir, (long)getppid());
	CHECK(access(p, F_OK) == 0, "a live process's temporary removed");
	unlink(p);
	for (i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "obj/%d", i);
		fill(val, sizeof(val), (unsigned)i);
		CHECK_RC(U.Get(k, out, sizeof(out), 0), OK);
		CHECK(memcmp(out, val, sizeof(val)) == 0, "value of %s after restart", k);
	}
	CHECK_RC(U.Put("more", val, 11, 0), RETRY);
	CHECK_RC(U.Put("more", val, 10, 0), OK);
	if (U.Exit)
		U.Exit();
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
	use_dir("capacity", dir, sizeof(dir));
	setenv("UBSIO_STUB_SSD_SIZE", "1000", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put("c/1", val, 600, 0), OK);
	CHECK_RC(U.Put("c/2", val, 400, 0), OK);  /* exactly full */
	CHECK_RC(U.Put("c/3", val, 1, 0), RETRY);  /* a full cache says "retry" */
	CHECK(!U.Exist("c/3", 0), "a refused put stored something");
	CHECK_RC(U.Put("c/1", val, 500, 0), OK);  /* overwrite: 900 */
	CHECK_RC(U.Put("c/1", val, 601, 0), RETRY);
	CHECK_RC(U.Put("c/3", val, 100, 0), OK);  /* 1000 */
	CHECK_RC(del("c/2"), OK);                 /* 600 */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);  /* 750 */
	lens[0] = 200;
	lens[1] = 51;
	lens[2] = 60;
	/* x 50 -> 200: 900; y 60 -> 51: 891; z 40 -> 60: 911 */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);
	CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0, "BatchPut %d %d %d", res[0], res[1],
	      res[2]);
	lens[0] = 290;  /* x 200 -> 290: 1001 */
	lens[1] = 1;    /* y 51 -> 1: 951 */
	CHECK_RC(U.BatchPut(keys, 2, bufs, lens, res, 0), OK);
	CHECK(res[0] == RETRY && res[1] == 0, "per-key no space %d %d", res[0], res[1]);
	if (U.Exit)
		U.Exit();
}

/* Init's ssdSize is ignored: without UBSIO_STUB_SSD_SIZE there is no limit. */
static void case_unlimited(void)
{
	char dir[512];
	size_t big = 8 << 20, len = 0;
	unsigned char *val = malloc(big);

	if (!val || load()) {
		free(val);
		return;
	}
	use_dir("unlimited", dir, sizeof(dir));
	CHECK_RC(old_init ? U.InitOld(-1) : U.Init(-1, 1000), OK);
	fill(val, big, 3);
	CHECK_RC(U.Put("big", val, big, 0), OK);
	CHECK_RC(U.GetLength("big", &len, 0), OK);
	CHECK(len == big, "len %zu", len);
	free(val);
	if (U.Exit)
		U.Exit();
}

static void case_batch(void)
{
	char dir[512], log[600], last[512];
	enum { N = 4 };
	const char *keys[N] = { "b/0", "b/bad/1", "b/2", "b/missing" };
	unsigned char vals[N][64], outs[N][64];
	void *bufs[N], *obufs[N];
	size_t lens[N] = { 10, 20, 30, 40 }, glens[N], want[N];
	int res[N];
	int32_t res32[N];
	bool bres[N];
	int i;

	if (load())
		return;
	use_dir("batch", dir, sizeof(dir));
	set_log("batch", log, sizeof(log));
	setenv("UBSIO_STUB_FAIL_KEYS", "bad", 1);
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	for (i = 0; i < N; i++) {
		fill(vals[i], sizeof(vals[i]), (unsigned)i + 10);
		bufs[i] = vals[i];
		obufs[i] = outs[i];
	}

	/* Puts: per-key codes, 0 from the call. */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);
	CHECK(res[0] == 0 && res[1] == FAULT && res[2] == 0, "BatchPut results %d %d %d", res[0],
	      res[1], res[2]);
	CHECK(count_files(dir) == 2, "%d files after BatchPut", count_files(dir));
	CHECK(log_count(log, "BatchPut 3 0 0,1,0", NULL, 0) == 1, "BatchPut log line");
	CHECK_RC(U.Put("b/bad/1", vals[1], 5, 0), FAULT);

	CHECK_RC(U.BatchExist(keys, N, bres, 0), OK);
	CHECK(bres[0] && !bres[1] && bres[2] && !bres[3], "BatchExist %d %d %d %d", bres[0],
	      bres[1], bres[2], bres[3]);

	/* Lengths of failed keys are garbage: only results say which. */
	CHECK_RC(U.BatchGetLength(keys, N, glens, res32, 0), OK);
	CHECK(res32[0] == 0 && res32[1] == ERR && res32[2] == 0 && res32[3] == ERR,
	      "BatchGetLength results %d %d %d %d", res32[0], res32[1], res32[2], res32[3]);
	CHECK(glens[0] == 10 && glens[2] == 30, "BatchGetLength %zu %zu", glens[0], glens[2]);
	CHECK(glens[1] == GARBAGE && glens[3] == GARBAGE, "failed lengths %zx %zx", glens[1],
	      glens[3]);

	/* Gets: 0, 201 (fault), 7 (missing); lengths are inputs, not written. */
	memset(outs, 0xee, sizeof(outs));
	want[0] = 10;
	want[1] = 20;
	want[2] = 30;
	want[3] = 40;
	CHECK_RC(U.BatchGet(keys, N, obufs, want, res, 0), OK);
	CHECK(res[0] == 0 && res[1] == FAULT && res[2] == 0 && res[3] == NOTFOUND,
	      "BatchGet results %d %d %d %d", res[0], res[1], res[2], res[3]);
	CHECK(memcmp(outs[0], vals[0], 10) == 0 && outs[0][10] == 0xee &&
		      memcmp(outs[2], vals[2], 30) == 0 && outs[3][0] == 0xee,
	      "BatchGet values");
	CHECK(want[0] == 10 && want[3] == 40, "BatchGet wrote lengths");
	CHECK(obufs[0] == outs[0] && obufs[3] == outs[3], "BatchGet changed the buffers");
	CHECK(log_count(log, "BatchGet 4 0 0,1,0,7", NULL, 0) == 1, "BatchGet log line");
	/* Asking less gives a prefix; asking more than the value fails the key. */
	memset(outs, 0xee, sizeof(outs));
	want[0] = 4;
	want[2] = 31;
	CHECK_RC(U.BatchGet(keys, N, obufs, want, res, 0), OK);
	CHECK(res[0] == 0 && res[2] == INVAL, "BatchGet lengths %d %d", res[0], res[2]);
	CHECK(memcmp(outs[0], vals[0], 4) == 0 && outs[0][4] == 0xee && outs[2][0] == 0xee,
	      "BatchGet prefix");

	/* Deletes: missing keys are 0. */
	CHECK_RC(U.BatchDelete(keys, N, res32, 0), OK);
	CHECK(res32[0] == 0 && res32[1] == FAULT && res32[2] == 0 && res32[3] == 0,
	      "BatchDelete results %d %d %d %d", res32[0], res32[1], res32[2], res32[3]);
	CHECK(log_count(log, "BatchDelete 4 0 ", last, sizeof(last)) == 1 &&
		      !strcmp(last, "BatchDelete 4 0 0,1,0,0"), "BatchDelete log \"%s\"", last);
	CHECK_RC(U.BatchDelete(keys, N, res32, 0), OK);
	CHECK(res32[0] == 0 && res32[2] == 0 && res32[3] == 0, "second BatchDelete %d %d %d",
	      res32[0], res32[2], res32[3]);
	CHECK_RC(U.BatchExist(keys, N, bres, 0), OK);
	CHECK(!bres[0] && !bres[1] && !bres[2] && !bres[3], "BatchExist after delete");
	CHECK(count_files(dir) == 0, "%d files after BatchDelete", count_files(dir));
	if (U.Exit)
		U.Exit();
}

/* Caller buffers with a NULL among them: the whole call fails (1) and the
 * SDK's clean-up zeroes entries, sub-batch by sub-batch of 128 keys. */
static void case_batchget_null(void)
{
	enum { N = 300, HOLE = 200 };
	char dir[512];
	static char names[N][16];
	const char *keys[N];
	static unsigned char outs[N][8];
	void *bufs[N];
	size_t lens[N];
	int res[N], i, bad = 0;
	unsigned char v[8] = "value!!";

	if (load())
		return;
	use_dir("batchnull", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	for (i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "n/%d", i);
		keys[i] = names[i];
		lens[i] = 7;
		res[i] = 77;
		bufs[i] = outs[i];
	}
	CHECK_RC(U.BatchPut(keys, N, (void **)(void *[N]){ 0 }, lens, res, 0), INVAL);
	for (i = 0; i < N; i++)
		CHECK_RC(U.Put(keys[i], v, 7, 0), OK);
	bufs[HOLE] = NULL;
	CHECK_RC(U.BatchGet(keys, N, bufs, lens, res, 0), ERR);
	for (i = 0; i < N; i++) {
		bool zeroed = bufs[i] == NULL, want = i <= HOLE || i >= 256;

		if (zeroed != want || res[i] != 77)
			bad++;
	}
	CHECK(bad == 0, "%d entries zeroed or results written not as the SDK does", bad);
	CHECK(memcmp(outs[0], v, 7) == 0 && memcmp(outs[299], v, 7) == 0 &&
		      outs[128][0] == 0, "sub-batches read or not");
	if (U.Exit)
		U.Exit();
}

static void case_pool(void)
{
	char dir[512], log[600];
	const char *keys[4] = { "p/a", "p/b", "p/missing", "p/big" };
	unsigned char va[100], vb[50], caller[4][8];
	unsigned char *big = malloc(POOL_BLOCK + 1);
	void *bufs[4], *stack_ptr = &va;
	size_t lens[4] = { 100, 20, 10, POOL_BLOCK + 1 };
	int res[4] = { 77, 77, 77, 77 }, i;

	if (!big || load()) {
		free(big);
		return;
	}
	use_dir("pool", dir, sizeof(dir));
	set_log("pool", log, sizeof(log));
	setenv("UBSIO_STUB_BATCHGET", "pool", 1);
	setenv("UBSIO_STUB_POOL_BLOCKS", "4", 1);
	CHECK_RC(init(), OK);
	fill(va, sizeof(va), 1);
	fill(vb, sizeof(vb), 2);
	fill(big, POOL_BLOCK + 1, 3);
	CHECK_RC(U.Put("p/a", va, sizeof(va), 0), OK);
	CHECK_RC(U.Put("p/b", vb, sizeof(vb), 0), OK);
	CHECK_RC(U.Put("p/big", big, POOL_BLOCK + 1, 0), OK);
	free(big);
	/* Whatever bufs[] holds is replaced by the library's blocks, for every key. */
	for (i = 0; i < 4; i++)
		bufs[i] = caller[i];
	CHECK_RC(U.BatchGet(keys, 4, bufs, lens, res, 0), OK);
	CHECK(res[0] == 0 && res[1] == 0 && res[2] == NOTFOUND && res[3] == ERR,
	      "pool results %d %d %d %d", res[0], res[1], res[2], res[3]);
	for (i = 0; i < 4; i++)
		CHECK(bufs[i] != NULL && bufs[i] != caller[i], "bufs[%d] not a pool block", i);
	CHECK(memcmp(bufs[0], va, 100) == 0 && memcmp(bufs[1], vb, 20) == 0, "pool values");
	CHECK(lens[1] == 20, "lengths written");
	/* A foreign pointer among them is ignored (freeing it would crash). */
	bufs[2] = stack_ptr;
	CHECK_RC(U.BatchFree(bufs, 4), OK);
	CHECK(!bufs[0] && !bufs[1] && !bufs[2] && !bufs[3], "BatchFree left entries");
	CHECK(log_count(log, "BatchFree 4 0", NULL, 0) == 1, "BatchFree log");

	/* The pool is finite: 4 blocks; one is out (leaked above), 4 more do not fit. */
	res[0] = 77;
	CHECK_RC(U.BatchGet(keys, 4, bufs, lens, res, 0), ERR);
	CHECK(res[0] == 77, "results written by a failed pool BatchGet");
	CHECK_RC(U.BatchGet(keys, 3, bufs, lens, res, 0), OK);
	CHECK(res[0] == 0 && memcmp(bufs[0], va, 100) == 0, "pool BatchGet of 3");
	if (U.Exit) {
		U.Exit();
		CHECK(log_count(log, "PoolBlocks 4", NULL, 0) == 1, "leaked blocks not logged");
	}
}

/* Write-back: a value reaches the directory after the flush interval. */
static void case_flush(void)
{
	char dir[512];
	unsigned char v[10] = "123456789", o[10];
	int i;

	if (load())
		return;
	use_dir("flush", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "300", 1);
	CHECK_RC(init(), OK);
	msleep(100);  /* the flusher is asleep with nothing pending: a put must wake it */
	CHECK_RC(U.Put("f/a", v, 9, 0), OK);
	CHECK(key_file_size(dir, "f/a") == -1, "written through");
	CHECK_RC(U.Get("f/a", o, 9, 0), OK);  /* visible at once */
	CHECK(memcmp(o, v, 9) == 0, "pending value");
	for (i = 0; i < 100 && key_file_size(dir, "f/a") != 9; i++)
		msleep(50);
	CHECK(key_file_size(dir, "f/a") == 9, "not flushed after %d ms", i * 50);
	CHECK(i >= 4, "flushed after %d ms, before the interval", i * 50);
	/* A flushed value is read from its file: deleting the file evicts it. */
	CHECK_RC(key_file_remove(dir, "f/a"), 0);
	CHECK_RC(U.Get("f/a", o, 9, 0), NOTFOUND);
	CHECK(!U.Exist("f/a", 0), "evicted value exists");
	if (U.Exit)
		U.Exit();
}

/* Exit writes what is pending; calls then fail until Init. */
static void case_exit(void)
{
	char dir[512], log[600];
	unsigned char v[10] = "123456789", o[10];
	size_t len = 5;

	if (load())
		return;
	use_dir("exit", dir, sizeof(dir));
	set_log("exit", log, sizeof(log));
	setenv("UBSIO_STUB_FLUSH_MS", "60000", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put("e/a", v, 9, 0), OK);
	CHECK_RC(U.Put("e/b", v, 4, 0), OK);
	CHECK_RC(del("e/b"), OK);
	CHECK(count_files(dir) == 0, "%d files before Exit", count_files(dir));
	U.Exit();
	CHECK(key_file_size(dir, "e/a") == 9 && count_files(dir) == 1, "Exit did not flush");
	CHECK(log_count(log, "Exit", NULL, 0) == 1, "Exit not logged");
	CHECK_RC(U.Put("e/c", v, 9, 0), ERR);
	CHECK_RC(U.Get("e/a", o, 9, 0), ERR);
	CHECK_RC(U.GetLength("e/a", &len, 0), ERR);
	CHECK(!U.Exist("e/a", 0), "Exist after Exit");
	U.Exit();  /* twice: nothing */
	CHECK_RC(init(), OK);
	CHECK_RC(U.Get("e/a", o, 9, 0), OK);
	CHECK(memcmp(o, v, 9) == 0, "value after Exit and Init");
	U.Exit();
}

static void writeback_child(void)
{
	unsigned char v[10] = "123456789";

	if (load() || init())
		_exit(4);
	if (U.Put("w/lost", v, 9, 0))
		_exit(5);
}

static void exit_child(void)
{
	unsigned char v[10] = "123456789";

	if (load() || init())
		exit(4);
	if (U.Put("w/exit", v, 9, 0))
		exit(5);
	dlclose(U.h);
	exit(0);
}

/* kill -9 before the flush loses the value; so does an exit without Exit in
 * the new build (its server is in the process), not in the old one. */
static void case_writeback_loss(void)
{
	char dir[512], log[600];
	unsigned char o[10];
	int status;
	pid_t pid;

	use_dir("writeback", dir, sizeof(dir));
	set_log("writeback", log, sizeof(log));
	setenv("UBSIO_STUB_FLUSH_MS", "60000", 1);
	pid = spawn_and_wait(writeback_child);
	CHECK(pid > 0, "child did not put");
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		exit_child();
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit child status %d", status);

	if (load())
		return;
	CHECK_RC(init(), OK);
	CHECK_RC(U.Get("w/lost", o, 9, 0), NOTFOUND);
	CHECK_RC(U.Get("w/exit", o, 9, 0), old_init ? OK : NOTFOUND);
	CHECK(log_count(log, "Lost 1", NULL, 0) == (old_init ? 0 : 1), "Lost lines");
	if (U.Exit)
		U.Exit();
}

static void case_evict(void)
{
	char dir[512], log[600];
	unsigned char v[400] = { 1 }, o[400];

	if (load())
		return;
	use_dir("evict", dir, sizeof(dir));
	set_log("evict", log, sizeof(log));
	setenv("UBSIO_STUB_EVICT_AT", "1000", 1);
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put("v/a", v, 400, 0), OK);
	CHECK_RC(U.Put("v/b", v, 400, 0), OK);
	CHECK_RC(U.Put("v/c", v, 200, 0), OK);  /* 1000: not past */
	CHECK(U.Exist("v/a", 0), "evicted at the mark");
	CHECK_RC(U.Put("v/c", v, 400, 0), OK);  /* 1200: a goes */
	CHECK_RC(U.Get("v/a", o, 400, 0), NOTFOUND);
	CHECK(key_file_size(dir, "v/a") == -1, "evicted file kept");
	CHECK(log_count(log, "Evict v/a", NULL, 0) == 1, "Evict not logged");
	CHECK_RC(U.Put("v/b", v, 400, 0), OK);  /* age: c, b */
	CHECK_RC(U.Put("v/d", v, 300, 0), OK);  /* 1100: c goes */
	CHECK(!U.Exist("v/c", 0) && U.Exist("v/b", 0) && U.Exist("v/d", 0), "evicted the wrong one");
	if (U.Exit)
		U.Exit();
}

/* Pending (unflushed) values are evicted from memory too. */
static void case_evict_pending(void)
{
	char dir[512];
	unsigned char v[600] = { 2 }, o[600];

	if (load())
		return;
	use_dir("evictpend", dir, sizeof(dir));
	setenv("UBSIO_STUB_EVICT_AT", "1000", 1);
	setenv("UBSIO_STUB_FLUSH_MS", "60000", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put("q/a", v, 600, 0), OK);
	CHECK_RC(U.Put("q/b", v, 600, 0), OK);
	CHECK_RC(U.Get("q/a", o, 600, 0), NOTFOUND);
	CHECK_RC(U.Get("q/b", o, 600, 0), OK);
	if (U.Exit) {
		U.Exit();
		CHECK(count_files(dir) == 1, "%d files after Exit", count_files(dir));
	}
}

static void case_fail_counts(void)
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
	use_dir("failcounts", dir, sizeof(dir));
	setenv("UBSIO_STUB_FAIL_PUT", "3", 1);
	setenv("UBSIO_STUB_FAIL_GET", "2", 1);
	setenv("UBSIO_STUB_FAIL_DELETE", "4", 1);
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put("g0", v, 3, 0), OK);                         /* put 1 */
	CHECK_RC(U.Put(NULL, v, 3, 0), INVAL);                      /* not counted */
	CHECK_RC(U.BatchPut(keys, 3, bufs, lens, res, 0), OK);      /* puts 2..4 */
	CHECK(res[0] == 0 && res[1] == FAULT && res[2] == 0, "BatchPut %d %d %d", res[0], res[1],
	      res[2]);
	CHECK(!U.Exist("g1", 0), "g1 stored by the failed put");
	CHECK_RC(U.Put("g1", v, 3, 0), OK);                         /* put 5 */
	CHECK_RC(U.BatchGet(keys, 3, obufs, lens, res, 0), OK);     /* gets 1..3 */
	CHECK(res[0] == 0 && res[1] == FAULT && res[2] == 0, "BatchGet %d %d %d", res[0], res[1],
	      res[2]);
	CHECK_RC(U.Get("g1", o[1], 3, 0), OK);                      /* get 4 */
	CHECK_RC(del("g0"), OK);                                    /* delete 1 */
	CHECK_RC(U.BatchDelete(keys, 3, res32, 0), OK);             /* deletes 2..4 */
	CHECK(res32[0] == 0 && res32[1] == 0 && res32[2] == FAULT, "BatchDelete %d %d %d",
	      res32[0], res32[1], res32[2]);
	CHECK(U.Exist("g2", 0), "g2 deleted by the failed delete");
	CHECK_RC(del("g2"), OK);                                    /* delete 5 */
	if (U.Exit)
		U.Exit();
}

static void case_fail_single(void)
{
	char dir[512];
	unsigned char v[4] = "abc", o[4];
	const char *keys[1] = { "s/x" };
	void *obufs[1] = { o };
	size_t len = 9, lens[1] = { 3 };
	int res[1];

	if (load())
		return;
	use_dir("failsingle", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put("s/x", v, 3, 0), OK);
	if (U.Exit)
		U.Exit();
	else
		return;
	setenv("UBSIO_STUB_FAIL_KEYS", "x", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Get("s/x", o, 3, 0), FAULT);
	CHECK_RC(U.GetLength("s/x", &len, 0), ERR);
	CHECK(len == 9, "GetLength wrote %zu", len);
	CHECK(!U.Exist("s/x", 0), "Exist of a failing key");
	CHECK_RC(del("s/x"), FAULT);
	CHECK_RC(U.Put("s/x", v, 3, 0), FAULT);
	U.Exit();
	/* Another code for the faults, as the real SDK may answer (DISK_FAULT). */
	setenv("UBSIO_STUB_FAULT_RC", "16", 1);
	CHECK_RC(init(), OK);
	CHECK_RC(U.Get("s/x", o, 3, 0), 16);
	CHECK_RC(U.Put("s/x", v, 3, 0), 16);
	CHECK_RC(U.BatchGet(keys, 1, obufs, lens, res, 0), OK);
	CHECK(res[0] == 16, "BatchGet fault %d", res[0]);
	CHECK_RC(U.GetLength("s/x", &len, 0), ERR);
	U.Exit();
}

static void case_log(void)
{
	static const char odd[] = "t1/a b/\xc3\xbc\n";
	char dir[512], log[600], last[512];
	unsigned char v[8] = "1234567", o[8];
	const char *keys[3] = { "l/a", "l/b", "l/c" };
	void *bufs[3] = { v, v, v }, *obufs[3] = { o, o, o };
	size_t lens[3] = { 7, 7, 7 }, len;
	int res[3];

	if (load())
		return;
	use_dir("log", dir, sizeof(dir));
	set_log("calls", log, sizeof(log));
	CHECK_RC(U.Put("x", v, 1, 0), ERR);  /* not logged: no Init yet */
	CHECK_RC(init(), OK);
	CHECK_RC(U.Put(odd, v, 7, 0), OK);
	CHECK_RC(U.BatchPut(keys, 2, bufs, lens, res, 0), OK);
	CHECK_RC(U.Get(odd, o, 7, 0), OK);
	CHECK_RC(U.Get("l/none", o, 7, 0), NOTFOUND);
	CHECK_RC(U.GetLength("l/a", &len, 0), OK);
	CHECK_RC(U.BatchGet(keys, 3, obufs, lens, res, 0), OK);
	CHECK(log_count(log, "", NULL, 0) == 7, "%d log lines", log_count(log, "", NULL, 0));
	CHECK(log_count(log, "Put x", NULL, 0) == 0, "a call before Init is logged");
	CHECK(log_count(log, "Put t1/a\\x20b/\\xc3\\xbc\\x0a 7 0", NULL, 0) == 1, "Put line");
	CHECK(log_count(log, "Get t1/a\\x20b/\\xc3\\xbc\\x0a 7 0", NULL, 0) == 1, "Get line");
	CHECK(log_count(log, "Get l/none 7 7", NULL, 0) == 1, "Get line of a missing key");
	CHECK(log_count(log, "BatchPut 2 0 0,0", NULL, 0) == 1, "BatchPut line");
	CHECK(log_count(log, "GetLength l/a 7 0", NULL, 0) == 1, "GetLength line");
	CHECK(log_count(log, "BatchGet ", last, sizeof(last)) == 1 &&
		      !strcmp(last, "BatchGet 3 0 0,0,7"), "BatchGet line \"%s\"", last);
	if (U.Exit)
		U.Exit();
}

static void direct_child(void)
{
	const char *keys[1] = { "d/a" };
	void **bufs = NULL;
	size_t *lens = NULL;
	int res[1];
	struct rlimit rl = { 0, 0 };

	setrlimit(RLIMIT_CORE, &rl);
	if (load() || init())
		_exit(4);
	U.BatchGetDirect(keys, 1, &bufs, &lens, 1, 1, res, 0);
	_exit(0);
}

/* BatchGetDirect needs an Ascend device: a host filesystem calling it aborts. */
static void case_batchgetdirect(void)
{
	char dir[512], log[600];
	int status;
	pid_t pid;

	use_dir("direct", dir, sizeof(dir));
	set_log("direct", log, sizeof(log));
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		direct_child();
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "BatchGetDirect status %d",
	      status);
	CHECK(log_count(log, "BatchGetDirect 1 abort", NULL, 0) == 1, "BatchGetDirect not logged");
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
	use_dir("threads", dir, sizeof(dir));
	setenv("UBSIO_STUB_FLUSH_MS", "1", 1);  /* the flusher races the callers */
	CHECK_RC(init(), OK);
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
	if (U.Exit) {
		U.Exit();
		CHECK(count_files(dir) == T * 100, "%d files", count_files(dir));
	}
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
	run("init", case_init);
	run("init_acl", case_init_acl);
	run("old_negative_device", case_old_negative_device);
	if (!omit_delete)
		run("limits", case_limits);
	if (!omit_delete)
		run("roundtrip", case_roundtrip);
	run("persist_write", case_persist_write);
	run("persist_read", case_persist_read);
	if (!omit_delete)
		run("capacity", case_capacity);
	run("unlimited", case_unlimited);
	if (!omit_delete)
		run("batch", case_batch);
	run("batchget_null", case_batchget_null);
	run("pool", case_pool);
	run("flush", case_flush);
	if (!old_init && !omit_delete)
		run("exit", case_exit);
	run("writeback_loss", case_writeback_loss);
	run("evict", case_evict);
	run("evict_pending", case_evict_pending);
	if (!omit_delete)
		run("fail_counts", case_fail_counts);
	if (!old_init && !omit_delete)
		run("fail_single", case_fail_single);
	run("log", case_log);
	run("batchgetdirect", case_batchgetdirect);
	if (!omit_delete)
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
