/*
 * test_stub_calls.c: cases of the stand-in's test (test_stub.c) on its
 * calls one by one: the symbols, Init, the argument limits, values round
 * trip and persist, capacity, the batch calls and BatchGet's two conventions.
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

void case_symbols(void)
{
	load();
}

void case_not_initialised(void)
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

void case_init(void)
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
void case_init_acl(void)
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

void case_old_negative_device(void)
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

void case_limits(void)
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

void case_roundtrip(void)
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
void case_persist_write(void)
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

void case_persist_read(void)
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

void case_capacity(void)
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
void case_unlimited(void)
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

void case_batch(void)
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
void case_batchget_null(void)
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

void case_pool(void)
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
