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
 *
 * This file loads the library, holds the helpers and runs the cases, which
 * are in test_stub_calls.c and test_stub_cache.c (test_stub.h between).
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

#include "test_stub.h"

struct ubsio_api U;

static const char *lib_path;
static bool omit_delete;
bool old_init;
char root[256];

/* Counts shared by the children. */
struct counts *cnt;

/* ---- loading ---- */

#define RESOLVE(field, name, required)                                             \
	do {                                                                       \
		dlerror();                                                         \
		*(void **)&U.field = dlsym(U.h, name);                             \
		if (required)                                                      \
			CHECK(U.field != NULL, "dlsym(%s): %s", name, dlerror());  \
	} while (0)

/* dlopen the library and resolve every symbol; 0 on success. */
int load(void)
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

int32_t init_dev(int32_t dev)
{
	return old_init ? U.InitOld(dev) : U.Init(dev, 0);
}

int32_t init(void)
{
	return init_dev(-1);
}

int32_t del(const char *key)
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
void use_dir(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", root, name);
	if (mkdir(out, 0755) && errno != EEXIST) {
		fprintf(stderr, "mkdir %s: %s\n", out, strerror(errno));
		exit(2);
	}
	setenv("UBSIO_STUB_DIR", out, 1);
}

/* Entries in dir, not counting dot files (temporaries). */
int count_files(const char *dir)
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
void rel_path(const char *key, char *out)
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

off_t key_file_size(const char *dir, const char *key)
{
	char p[2048], rel[1100];
	struct stat sb;

	rel_path(key, rel);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return stat(p, &sb) ? -1 : sb.st_size;
}

int key_file_remove(const char *dir, const char *key)
{
	char p[2048], rel[1100];

	rel_path(key, rel);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return unlink(p);
}

void fill(unsigned char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 8));
}

/* Lines of the log starting with prefix; the last such line in last. */
int log_count(const char *log, const char *prefix, char *last, size_t lastlen)
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

void set_log(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.log", root, name);
	unlink(out);
	setenv("UBSIO_STUB_LOG", out, 1);
}

void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Fork a process that runs fn and then waits to be killed; returns its pid
 * once fn is done (it writes a byte to the pipe). */
pid_t spawn_and_wait(void (*fn)(void))
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
