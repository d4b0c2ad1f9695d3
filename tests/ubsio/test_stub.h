/*
 * test_stub.h: what the files of the stand-in's test share: the library's
 * functions as loaded (U), the checks, and the helpers in test_stub.c.  The
 * cases are in test_stub_calls.c (each call's codes and limits) and
 * test_stub_cache.c (write-back, eviction, faults, the log, threads).
 */
#ifndef TEST_STUB_H
#define TEST_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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

struct ubsio_api {
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
};

extern struct ubsio_api U;

/* Built with -DUBSIO_STUB_OLD_INIT (--old-init). */
extern bool old_init;
/* The directory the cases keep their stores and logs in. */
extern char root[256];

/* Counts shared by the children. */
struct counts {
	int passed, failed;
};

extern struct counts *cnt;

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

/* ---- helpers, in test_stub.c ---- */

/* dlopen the library and resolve every symbol; 0 on success. */
int load(void);
/* Init, whichever build: on device dev, or on none (-1). */
int32_t init_dev(int32_t dev);
int32_t init(void);
int32_t del(const char *key);
/* Make the directory root/name (out gets its path) and point the stub at it. */
void use_dir(const char *name, char *out, size_t len);
/* Entries in dir, not counting dot files (temporaries). */
int count_files(const char *dir);
/* The relative path of key's file: hex, "+/" every 200 characters. */
void rel_path(const char *key, char *out);
/* The size of key's file in dir (-1: none); unlink it. */
off_t key_file_size(const char *dir, const char *key);
int key_file_remove(const char *dir, const char *key);
/* len bytes of a pattern that differs with seed and along the buffer. */
void fill(unsigned char *buf, size_t len, unsigned seed);
/* Lines of the log starting with prefix; the last such line in last. */
int log_count(const char *log, const char *prefix, char *last, size_t lastlen);
/* Log to root/name.log (out gets its path), a fresh one. */
void set_log(const char *name, char *out, size_t len);
void msleep(unsigned ms);
/* Fork a process that runs fn and then waits to be killed; returns its pid
 * once fn is done (it writes a byte to the pipe). */
pid_t spawn_and_wait(void (*fn)(void));

/* ---- the cases, run by main() each in a child of its own ---- */

void case_symbols(void);
void case_not_initialised(void);
void case_init(void);
void case_init_acl(void);
void case_old_negative_device(void);
void case_limits(void);
void case_roundtrip(void);
void case_persist_write(void);
void case_persist_read(void);
void case_capacity(void);
void case_unlimited(void);
void case_batch(void);
void case_batchget_null(void);
void case_pool(void);

void case_flush(void);
void case_exit(void);
void case_writeback_loss(void);
void case_evict(void);
void case_evict_pending(void);
void case_fail_counts(void);
void case_fail_single(void);
void case_log(void);
void case_batchgetdirect(void);
void case_threads(void);

#endif
