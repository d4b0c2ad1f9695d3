/*
 * test_stub_cache.c: cases of the stand-in's test (test_stub.c) on it as
 * a cache: write-back and Exit, what a crash loses, eviction, injected
 * faults, the log, BatchGetDirect's abort and calls from many threads.
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

/* Write-back: a value reaches the directory after the flush interval. */
void case_flush(void)
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
void case_exit(void)
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
void case_writeback_loss(void)
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

void case_evict(void)
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
void case_evict_pending(void)
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

void case_fail_counts(void)
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

void case_fail_single(void)
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

void case_log(void)
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
void case_batchgetdirect(void)
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

void case_threads(void)
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
