/*
 * ubsio_stub.c: a stand-in for Huawei's UBSIO KV-cache client library
 * (libubsio_kvc.so) for the offloadfs tests.  It behaves as the real library
 * does, rough edges included, so a backend tested against it survives the
 * real one.  Only the UbsioKvCache* functions are exported.
 *
 * Sources cited below are in the ubs-io repository: "dev:" is branch develop
 * (5d454906), "old:" commit 7e38ed07; K/ is ubsio-kv/src/csrc/, B/ is
 * ubsio-boostio/src/ (the lower SDK, libbio_sdk.so, that the real library
 * calls).  The API layer K/kvc/ubsio_kvc.cpp is the same in both but for Init.
 *
 * Build:
 *   gcc -shared -fPIC -O2 ubsio_stub.c stub_store.c -o libubsio_kvc.so -lpthread
 *   -DUBSIO_STUB_OLD_INIT     Init is UbsioKvCacheInit(int32_t devId)
 *                             (old:ubsio-kv/include/ubsio_kvc.h:30), and there
 *                             is no UbsioKvCacheExit (a library older still).
 *   -DUBSIO_STUB_OMIT_DELETE  no UbsioKvCacheDelete nor UbsioKvCacheBatchDelete
 *                             (a library missing symbols).
 *
 * Codes (int32_t, positive; no errno anywhere):
 *   The calls' own result is the library's KvcError (K/utils/ubsio_kvc_err.h:21-30):
 *     0 OK, 1 ERR, 3 INVALID_PARAM.
 *   Put, Get, Delete and the per-key results of BatchPut and BatchDelete are the
 *   SDK's CResult passed through (K/kvc/kv_operation.cpp:60,72,83; B/sdk/bio_c.h:23-43):
 *     0 ok, 5 NEED_RETRY (cache full: B/sdk/bio.cpp:28-58 maps no internal code
 *     to NO_SPACE 10, a full cache comes back as 5), 7 NOT_FOUND,
 *     16 DISK_FAULT (a file operation of the stub failed: BIO_DISK_IOERR
 *     mapped at bio.cpp:52).
 *   BatchGet's per-key results are the server's unmapped BResult
 *   (B/common/bio_err.h:21-47, written at B/server/mirror_server.cpp:1813,1844):
 *     0 ok, 1 ERR (pool mode, value > 4 MiB), 3 INVALID_PARAM (lengths[i]
 *     larger than the value), 7 NOT_EXISTS, 201 DISK_IOERR (a file operation
 *     failed).
 *   An injected fault (UBSIO_STUB_FAIL_*) is 1 everywhere, or the code
 *   UBSIO_STUB_FAULT_RC gives: the real library can answer any of the above
 *   (and 2, 4, 13, ...), so a caller must treat every unknown code as an error.
 *   GetLength and BatchGetLength's per-key results: 0, or 1 for a missing key or
 *   a fault (a failed Stat is UBSIO_KVC_ERR, K/kvc/kv_operation.cpp:113-117).
 *
 * Checks, all before anything is done (K/kvc/ubsio_kvc.cpp):
 *   key non-NULL, strlen 1..255 (:24,51,125,134,180), else 3 (Exist: false).
 *   Put: buf non-NULL and length > 0 (:47); Get: the same (:112).  An empty
 *   value cannot be stored.  GetLength: length non-NULL (:180).
 *   Batch calls: arrays non-NULL, keysCount 1..16384 (:25,65-72,143-150,
 *   200-207,246-253,341-348), every key valid, BatchPut every bufs[i] non-NULL
 *   and lengths[i] > 0 (:90), BatchGet every lengths[i] > 0 (:267); else the
 *   WHOLE call returns 3, nothing is done and results[] is not written.
 *   Calls before Init or after Exit (that pass the checks) return 1
 *   (Exist: false) and write nothing; the real library would call through
 *   NULL SDK pointers before Init (dev:K/kvc/dl_biosdk_api.h:104-107).
 *
 * Calls:
 *   Init(devId[, ssdSize]): ssdSize is ignored (dev:K/kvc/dl_biosdk_api.cpp:118).
 *     devId >= 0 needs Ascend's ACL library: fails with 1 unless
 *     UBSIO_STUB_ACL=1 (ACLApi::LoadLibrary fails without ASCEND_HOME_PATH,
 *     dev:K/kvc/dl_acl_api.cpp:56-60, called at
 *     dev:K/kvc/ubsio_kvc_operation.cpp:31-33).  devId -1: no device, fine;
 *     devId < -1 fails with 1 in the new build (dl_biosdk_api.cpp:120-123).
 *     Any failure is 1 (ubsio_kvc.cpp:33-36, ubsio_kvc_operation.cpp:42-56).
 *     Init while initialised returns 0 and changes nothing; after Exit (or a
 *     failed Init) it initialises afresh, reading the environment again.
 *   Exit (new build only; UBSIO_API at dev:K/kvc/ubsio_kvc.cpp:40): writes
 *     every pending value to the directory, stops the flusher; later calls
 *     fail (1) until Init.
 *   Put(key, buf, len): replaces any value.  Returns once Get sees the value,
 *     which is written to the directory later (see "Write-back").
 *   Get(key, buf, len): copies min(value size, len) bytes and returns 0,
 *     the value longer or shorter (realLen = min(stored, requested),
 *     dev:B/cache/write/wcache_manager.cpp:1131-1134; the real length is
 *     discarded, K/kvc/kv_operation.cpp:71-72).  Missing: 7.
 *   Exist: true or false; false for a missing key, a fault, a bad key (:123-130).
 *   Delete: 0 for a missing key too (dev:B/cache/cache.cpp:573-576).
 *   GetLength(key, &len): missing: 1, len untouched (:185-189).
 *   BatchPut: 0, results[i] per key (:104-107).
 *   BatchDelete: 0, results[i] per key, 0 for missing keys (:172-175).
 *   BatchExist: 0, results[i] true/false (false for missing).
 *   BatchGetLength: 0, results[i] 0 or 1; lengths[i] of a failed key is
 *     GARBAGE, 0xdeadbeef here (the real get_lengths vector is reserve()d,
 *     never sized, K/kvc/ubsio_kvc.cpp:210-212,233).
 *   BatchGet(keys, n, bufs, lengths, results, flags): lengths[i] are inputs
 *     (> 0) and are not written (:257,272).  UBSIO_STUB_BATCHGET picks how
 *     the SDK treats bufs[]:
 *     caller (develop, STANDALONE: dev:K/kvc/dl_biosdk_api.cpp:137):
 *       bufs[i] are the caller's buffers.  lengths[i] <= the value: that many
 *       bytes, 0; lengths[i] > the value: 3 and nothing copied (slice lengths
 *       must match, dev:B/cache/cache_slice_operator.cpp:193-200); missing: 7.
 *       Any bufs[i] == NULL fails the whole call with 1, results[] unwritten,
 *       and zeroes bufs[] entries the way the SDK's clean-up does: in 128-key
 *       sub-batches (dev:B/sdk/mirror_client.cpp:1202-1296), a sub-batch
 *       holding a NULL zeroes the entries before it (:1405-1417,1458-1470),
 *       the others are read into their buffers and then all zeroed
 *       (:1180-1200).  Keep your own copy of the pointers.
 *     pool (7e38ed07, SEPARATES: old:K/kvc/dl_biosdk_api.cpp:112):
 *       whatever bufs[i] holds is ignored and OVERWRITTEN, for every key,
 *       with a 4 MiB block of the library's pool (old:B/sdk/mirror_client.cpp
 *       :1215,1230; block size :308,1239) holding the value (same length
 *       rules); a value > 4 MiB: 1.  Free the blocks with BatchFree(bufs, n)
 *       whatever the results.  UBSIO_STUB_POOL_BLOCKS=N caps the blocks out
 *       at once; past it the call returns 1, the blocks it took are released
 *       and their (now dangling) addresses stay in bufs[] (:1216-1229).
 *   BatchFree(bufs, n): int32_t; NULL bufs, n 0 or > 16384: 3 (:371-380).
 *     Frees the entries that are pool blocks, ignores others, sets every
 *     bufs[i] to NULL (dev:B/sdk/mirror_client.cpp:1299-1313); 0.  Before
 *     Init or after Exit: 1 and nothing freed.
 *   BatchGetDirect: exported, but it needs an Ascend device and NPU addresses
 *     (K/kvc/ubsio_kvc_instance.cpp:51-122): a host filesystem must never call
 *     it, so the stub logs the call and abort()s.
 *   The flags arguments are ignored.
 *
 * Write-back (the cache is created WRITE_BACK, dev:K/kvc/dl_biosdk_api.cpp:147):
 *   values are kept in memory and written to the directory by a flusher
 *   thread UBSIO_STUB_FLUSH_MS milliseconds (default 1000) after their put,
 *   and at Exit.  A kill -9 before then loses them.  A process that exits
 *   without Exit loses them too in the new build (the SDK's server runs in the
 *   process, STANDALONE) and logs "Lost <n>"; the OLD_INIT build writes them
 *   at exit (SEPARATES: the cache lives in a daemon that outlives its client).
 *   UBSIO_STUB_FLUSH_MS=0: every put is written through before it returns.
 *   Delete removes a value from memory and the directory at once.
 *
 * Eviction (it is a cache: an evicted value is gone, Get says 7,
 * B/cache/cache.cpp:449-451, B/cache/write/wcache_manager.cpp:1150):
 *   UBSIO_STUB_EVICT_AT=N: once the values stored add up to more than N
 *   bytes, a put discards the oldest values (by last put; the directory's by
 *   mtime) until they add up to N or less, silently.  Values written to the
 *   directory are read from it every time, so a test evicts one by deleting
 *   its file.
 *
 * Files, in $UBSIO_STUB_DIR:
 *   A value is a file named by the lowercase hex of the key's bytes, e.g.
 *   key "a/b" -> "612f62".  Hex longer than 200 characters (keys of more
 *   than 100 bytes) is cut into 200-character pieces; every piece but the
 *   last is a directory named "<piece>+": "<200 hex>+/<200 hex>+/<rest>".
 *   Joining the path without '+' and '/' gives back the key.  A value is
 *   written to a temporary ".tmp-<pid>-<seq>" in the top directory and
 *   renamed into place, so a crash never leaves half a value (with
 *   UBSIO_STUB_FSYNC=1 the data is fsynced before the rename).  Delete
 *   removes the "+" directories it empties.  Init indexes the values already
 *   there (sizes for the capacity, mtimes for eviction) and removes
 *   temporaries whose process is gone.  One process per directory.
 *
 * Environment, read by Init (a test changes it and runs a new process):
 *   UBSIO_STUB_DIR=dir       required: the store directory (else Init: 1).
 *   UBSIO_STUB_FAIL_INIT=1   Init returns 1 (any value but "" and "0").
 *   UBSIO_STUB_ACL=1         an Ascend ACL library is there: devId >= 0 works.
 *   UBSIO_STUB_SSD_SIZE=N    capacity in bytes (0, unset: unlimited); a put
 *                            past it returns 5 and stores nothing.
 *   UBSIO_STUB_FLUSH_MS=N    write-back delay (default 1000; 0: write through)
 *   UBSIO_STUB_EVICT_AT=N    evict above N bytes (0, unset: never)
 *   UBSIO_STUB_BATCHGET=caller|pool   BatchGet's convention (default caller)
 *   UBSIO_STUB_POOL_BLOCKS=N pool blocks out at once (0, unset: unlimited)
 *   UBSIO_STUB_FAIL_PUT=N    the Nth put fails (1, nothing stored)
 *   UBSIO_STUB_FAIL_GET=N    the Nth get fails (1, nothing copied)
 *   UBSIO_STUB_FAIL_DELETE=N the Nth delete fails (1, nothing deleted)
 *       N counts from 1 since Init; each key of a batch counts as one
 *       (Put/BatchPut; Get/BatchGet; Delete/BatchDelete); calls refused by the
 *       checks are not counted.  0 or unset: no fault.
 *   UBSIO_STUB_FAIL_KEYS=s   every call on a key containing s fails: Put,
 *                            Get, Delete, GetLength 1; Exist false; in a
 *                            batch only those keys.
 *   UBSIO_STUB_FAULT_RC=N    the code of an injected fault (default 1; not
 *                            GetLength's, which is always 1)
 *   UBSIO_STUB_FAIL_BATCH_KEYS=s  a BatchPut, BatchGet or BatchDelete of
 *                            several keys, one containing s, fails as a
 *                            whole with 1, results untouched (an SDK-level
 *                            failure of the call); a call of that key alone
 *                            goes through.
 *   UBSIO_STUB_FSYNC=1       fsync each value before renaming it into place
 *   UBSIO_STUB_LOG=path      append one line per call from Init on (calls
 *                            before the first Init are not logged):
 *     Init <devId> <ssdSize> <rc>  (OLD_INIT: UBSIO_STUB_SSD_SIZE for ssdSize)
 *     Exit                         PoolBlocks <n>  (before Exit, if n are out)
 *     Put <key> <len> <rc>         Get <key> <len> <rc>
 *     Exist <key> <0|1>            Delete <key> <rc>
 *     GetLength <key> <len> <rc>   (len 0 when rc != 0)
 *     BatchPut <n> <rc>[ <r0,r1,...>]     BatchGet <n> <rc>[ <r0,r1,...>]
 *     BatchDelete <n> <rc>[ <r0,r1,...>]  (per-key codes when rc is 0)
 *     BatchExist <n> <rc>          BatchGetLength <n> <rc>
 *     BatchFree <n> <rc>           BatchGetDirect <n> abort
 *     Evict <key>                  a value discarded by eviction
 *     Lost <n>                     pending values dropped at exit without Exit
 *   Keys are escaped so a line stays one line: bytes other than '!'..'~' and
 *   the backslash are written \xHH (a space is \x20).  Each line is one
 *   O_APPEND write.
 *
 * Thread-safe: one mutex serialises every call and the flusher.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stub.h"

#define UBSIO_API __attribute__((visibility("default")))

/* ---- environment ---- */

static int env_u64(const char *name, uint64_t *out, uint64_t dflt)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	*out = dflt;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || *s == '+') {
		fprintf(stderr, "ubsio_stub: %s=%s is not a number\n", name, s);
		return -1;
	}
	*out = v;
	return 0;
}

static bool env_true(const char *name)
{
	const char *s = getenv(name);

	return s && *s && strcmp(s, "0");
}

/* ---- log ---- */

void key_escape(const char *key, size_t klen, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i, o = 0;

	if (!key) {
		strcpy(out, "(null)");
		return;
	}
	for (i = 0; i < klen && i < STUB_KEY_MAX; i++) {
		unsigned char c = (unsigned char)key[i];

		if (c > ' ' && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hx[c >> 4];
			out[o++] = hx[c & 15];
		}
	}
	out[o] = '\0';
}

static void log_write(const char *line, size_t n)
{
	if (write(st.logfd, line, n) < 0) {
		/* a test reading the log will notice */
	}
}

__attribute__((format(printf, 1, 2)))
void stub_log(const char *fmt, ...)
{
	char line[STUB_ESC_MAX + 128];
	va_list ap;
	int n;

	if (st.logfd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	log_write(line, (size_t)n);
}

/* Log a call on one key: "<op> <key><rest>"; an over-long key is cut. */
__attribute__((format(printf, 3, 4)))
static void stub_log_key(const char *op, const char *key, const char *fmt, ...)
{
	char esc[STUB_ESC_MAX], rest[96];
	va_list ap;

	if (st.logfd < 0)
		return;
	key_escape(key, key ? strnlen(key, STUB_KEY_MAX) : 0, esc);
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	stub_log("%s %s%s", op, esc, rest);
}

/* "<op> <n> <rc>", then " r0,r1,..." when results is set. */
static void stub_log_batch(const char *op, uint32_t n, int rc, const int32_t *results)
{
	size_t cap = 64 + (results ? (size_t)n * 12 : 0), o;
	char *line;
	uint32_t i;

	if (st.logfd < 0)
		return;
	line = malloc(cap);
	if (!line)
		return;
	o = (size_t)snprintf(line, cap, "%s %" PRIu32 " %d", op, n, rc);
	for (i = 0; results && i < n; i++)
		o += (size_t)snprintf(line + o, cap - o, "%c%" PRId32, i ? ',' : ' ', results[i]);
	line[o++] = '\n';
	log_write(line, o);
	free(line);
}

/* ---- argument checks (no lock needed) ---- */

static bool key_ok(const char *key)
{
	size_t n;

	if (!key)
		return false;
	n = strnlen(key, STUB_KEY_MAX + 1);
	return n >= 1 && n <= STUB_KEY_MAX;
}

static bool keys_ok(const char **keys, uint32_t n)
{
	uint32_t i;

	if (!keys || n < 1 || n > STUB_BATCH_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (!key_ok(keys[i]))
			return false;
	return true;
}

static void stub_reset(void)
{
	idx_clear();
	if (st.dirfd >= 0)
		close(st.dirfd);
	free(st.fail_keys);
	free(st.fail_batch_keys);
	st.dirfd = -1;
	st.fail_keys = NULL;
	st.fail_batch_keys = NULL;
	st.inited = false;
}

static int32_t stub_init(int32_t dev, uint64_t ssd)
{
	const char *log, *dir, *keys, *mode;
	struct stat sb;
	int rc = KVC_ERR;

	pthread_mutex_lock(&stub_lock);
	if (st.inited) {
		stub_log("Init %" PRId32 " %" PRIu64 " 0", dev, ssd);
		pthread_mutex_unlock(&stub_lock);
		return 0;
	}
	if (st.logfd < 0) {
		log = getenv("UBSIO_STUB_LOG");
		if (log && *log) {
			st.logfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
			if (st.logfd < 0) {
				fprintf(stderr, "ubsio_stub: UBSIO_STUB_LOG=%s: %s\n", log,
					strerror(errno));
				goto out;
			}
		}
	}
	if (env_true("UBSIO_STUB_FAIL_INIT")) {
		fprintf(stderr, "ubsio_stub: Init fails (UBSIO_STUB_FAIL_INIT)\n");
		goto out;
	}
	if (dev >= 0 && !env_true("UBSIO_STUB_ACL")) {
		fprintf(stderr, "ubsio_stub: device %" PRId32 " needs Ascend's ACL library "
			"(UBSIO_STUB_ACL=1); use -1\n", dev);
		goto out;
	}
#ifndef UBSIO_STUB_OLD_INIT
	if (dev < -1) {
		fprintf(stderr, "ubsio_stub: invalid device %" PRId32 "\n", dev);
		goto out;
	}
#endif
	dir = getenv("UBSIO_STUB_DIR");
	if (!dir || !*dir) {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_DIR is not set\n");
		goto out;
	}
	st.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st.dirfd < 0 || fstat(st.dirfd, &sb) || !S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_DIR=%s: %s\n", dir,
			st.dirfd < 0 ? strerror(errno) : "not a directory");
		goto out;
	}
	if (env_u64("UBSIO_STUB_FAIL_PUT", &st.fail_put, 0) ||
	    env_u64("UBSIO_STUB_FAIL_GET", &st.fail_get, 0) ||
	    env_u64("UBSIO_STUB_FAIL_DELETE", &st.fail_delete, 0) ||
	    env_u64("UBSIO_STUB_FAULT_RC", &st.fault_rc, 1) ||
	    env_u64("UBSIO_STUB_SSD_SIZE", &st.capacity, 0) ||
	    env_u64("UBSIO_STUB_EVICT_AT", &st.evict_at, 0) ||
	    env_u64("UBSIO_STUB_FLUSH_MS", &st.flush_ms, 1000) ||
	    env_u64("UBSIO_STUB_POOL_BLOCKS", &st.pool_max, 0))
		goto out;
	mode = getenv("UBSIO_STUB_BATCHGET");
	if (!mode || !*mode || !strcmp(mode, "caller")) {
		st.pool_mode = false;
	} else if (!strcmp(mode, "pool")) {
		st.pool_mode = true;
	} else {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_BATCHGET=%s: caller or pool\n", mode);
		goto out;
	}
	keys = getenv("UBSIO_STUB_FAIL_KEYS");
	if (keys && *keys && !(st.fail_keys = strdup(keys)))
		goto out;
	keys = getenv("UBSIO_STUB_FAIL_BATCH_KEYS");
	if (keys && *keys && !(st.fail_batch_keys = strdup(keys)))
		goto out;
	st.fsync = env_true("UBSIO_STUB_FSYNC");
	if (index_dir()) {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_DIR=%s: cannot read it\n", dir);
		goto out;
	}
	if (!st.cond_inited) {
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&st.cond, &ca);
		pthread_condattr_destroy(&ca);
		st.cond_inited = true;
	}
	if (st.flush_ms) {
		if (pthread_create(&st.flusher, NULL, flusher_main, NULL))
			goto out;
		st.flusher_on = true;
	}
	st.puts = st.gets = st.deletes = 0;
	st.inited = true;
	rc = 0;
out:
	stub_log("Init %" PRId32 " %" PRIu64 " %d", dev, ssd, rc);
	if (rc)
		stub_reset();
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

__attribute__((destructor))
static void stub_fini(void)
{
	uint64_t lost = 0;
	struct entry *e;

	pthread_mutex_lock(&stub_lock);
	if (st.inited) {
		flusher_stop();
#ifdef UBSIO_STUB_OLD_INIT
		flush_due(true);
#endif
		for (e = st.phead; e; e = e->pnext)
			lost++;
		if (lost)
			stub_log("Lost %" PRIu64, lost);
	}
	stub_reset();
	pool_clear();
	if (st.logfd >= 0)
		close(st.logfd);
	st.logfd = -1;
	pthread_mutex_unlock(&stub_lock);
}

/* ---- the API ---- */

/* Take the lock; false (lock released) when not initialised. */
static bool lock_inited(void)
{
	pthread_mutex_lock(&stub_lock);
	if (st.inited)
		return true;
	pthread_mutex_unlock(&stub_lock);
	return false;
}

#ifdef UBSIO_STUB_OLD_INIT
UBSIO_API int32_t UbsioKvCacheInit(int32_t devId)
{
	uint64_t ssd;

	/* No size argument: the log shows the capacity the environment gives. */
	if (env_u64("UBSIO_STUB_SSD_SIZE", &ssd, 0))
		ssd = 0;
	return stub_init(devId, ssd);
}
#else
UBSIO_API int32_t UbsioKvCacheInit(int32_t devId, uint64_t ssdSize)
{
	return stub_init(devId, ssdSize);
}

UBSIO_API void UbsioKvCacheExit(void)
{
	pthread_mutex_lock(&stub_lock);
	if (st.inited) {
		flusher_stop();
		flush_due(true);
		if (st.pool_out)
			stub_log("PoolBlocks %" PRIu64, st.pool_out);
		stub_log("Exit");
		stub_reset();
	}
	pthread_mutex_unlock(&stub_lock);
}
#endif

UBSIO_API int32_t UbsioKvCachePut(const char *key, void *buf, size_t length, uint32_t flags)
{
	int rc;

	(void)flags;
	if (!key_ok(key) || !buf || !length)
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	rc = do_put(key, buf, length);
	stub_log_key("Put", key, " %zu %d", length, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheGet(const char *key, void *buf, size_t length, uint32_t flags)
{
	int rc;

	(void)flags;
	if (!key_ok(key) || !buf || !length)
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	rc = do_get(key, buf, length);
	stub_log_key("Get", key, " %zu %d", length, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API bool UbsioKvCacheExist(const char *key, uint32_t flags)
{
	uint64_t size;
	bool found;

	(void)flags;
	if (!key_ok(key) || !lock_inited())
		return false;
	found = do_stat(key, &size);
	stub_log_key("Exist", key, " %d", found);
	pthread_mutex_unlock(&stub_lock);
	return found;
}

#ifndef UBSIO_STUB_OMIT_DELETE
UBSIO_API int32_t UbsioKvCacheDelete(const char *key, uint32_t flags)
{
	int rc;

	(void)flags;
	if (!key_ok(key))
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	rc = do_delete(key);
	stub_log_key("Delete", key, " %d", rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}
#endif

UBSIO_API int32_t UbsioKvCacheGetLength(const char *key, size_t *length, uint32_t flags)
{
	uint64_t size = 0;
	int rc;

	(void)flags;
	if (!key_ok(key) || !length)
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	rc = do_stat(key, &size) ? 0 : KVC_ERR;
	if (!rc)
		*length = (size_t)(uint32_t)size;  /* the SDK's ObjStat size is 32-bit */
	stub_log_key("GetLength", key, " %zu %d", rc ? 0 : (size_t)(uint32_t)size, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchPut(const char **keys, uint32_t keysCount, void **bufs,
				       size_t *lengths, int *results, uint32_t flags)
{
	uint32_t i;

	(void)flags;
	if (!bufs || !lengths || !results || !keys_ok(keys, keysCount))
		return KVC_INVALID_PARAM;
	for (i = 0; i < keysCount; i++)
		if (!bufs[i] || !lengths[i])
			return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	if (batch_faulty("BatchPut", keys, keysCount)) {
		pthread_mutex_unlock(&stub_lock);
		return KVC_ERR;
	}
	for (i = 0; i < keysCount; i++)
		results[i] = do_put(keys[i], bufs[i], lengths[i]);
	stub_log_batch("BatchPut", keysCount, 0, results);
	pthread_mutex_unlock(&stub_lock);
	return KVC_OK;
}

/* BatchGet's per-key code for reading key into buf, len bytes. */
static int batch_get_one(const char *key, void *buf, size_t len, bool pool)
{
	uint64_t size;

	if (count_fault(&st.gets, st.fail_get, key))
		return (int)st.fault_rc;
	if (pool) {
		if (value_read(key, strlen(key), NULL, 0, false, &size) == V_OK &&
		    (size > STUB_POOL_BLOCK || len > STUB_POOL_BLOCK))
			return B_ERR;
	}
	switch (value_read(key, strlen(key), buf, len, true, &size)) {
	case V_OK:
		return 0;
	case V_MISSING:
		return B_NOT_EXISTS;
	case V_SHORT:
		return B_INVALID_PARAM;
	default:
		return B_DISK_IOERR;
	}
}

/*
 * Caller mode with a NULL among bufs[]: the SDK's sub-batches of 128 keys
 * fail or succeed on their own, and its clean-up zeroes the entries.
 */
static void batch_get_null(const char **keys, uint32_t n, void **bufs, size_t *lengths)
{
	uint32_t s, i, end;
	uint64_t size;

	for (s = 0; s < n; s = end) {
		end = n - s > STUB_SUBBATCH ? s + STUB_SUBBATCH : n;
		for (i = s; i < end && bufs[i]; i++)
			;
		if (i < end) {
			memset(&bufs[s], 0, (size_t)(i - s) * sizeof(*bufs));
			continue;
		}
		for (i = s; i < end; i++)
			value_read(keys[i], strlen(keys[i]), bufs[i], lengths[i], true, &size);
		memset(&bufs[s], 0, (size_t)(end - s) * sizeof(*bufs));
	}
}

UBSIO_API int32_t UbsioKvCacheBatchGet(const char **keys, uint32_t keysCount, void **bufs,
				       size_t *lengths, int *results, uint32_t flags)
{
	int32_t *res = NULL;
	int rc = KVC_OK;
	uint32_t i;

	(void)flags;
	if (!bufs || !lengths || !results || !keys_ok(keys, keysCount))
		return KVC_INVALID_PARAM;
	for (i = 0; i < keysCount; i++)
		if (!lengths[i])
			return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	if (batch_faulty("BatchGet", keys, keysCount)) {
		pthread_mutex_unlock(&stub_lock);
		return KVC_ERR;
	}
	res = malloc((size_t)keysCount * sizeof(*res));
	if (!res) {
		rc = KVC_ERR;
	} else if (st.pool_mode) {
		for (i = 0; i < keysCount; i++) {
			void *b = pool_alloc();

			if (!b) {
				uint32_t j;

				/* Roll back; the addresses stay behind, dangling. */
				for (j = 0; j < i; j++)
					pool_free(bufs[j]);
				rc = KVC_ERR;
				break;
			}
			bufs[i] = b;
		}
		for (i = 0; !rc && i < keysCount; i++)
			res[i] = batch_get_one(keys[i], bufs[i], lengths[i], true);
	} else {
		for (i = 0; i < keysCount && bufs[i]; i++)
			;
		if (i < keysCount) {
			batch_get_null(keys, keysCount, bufs, lengths);
			rc = KVC_ERR;
		}
		for (i = 0; !rc && i < keysCount; i++)
			res[i] = batch_get_one(keys[i], bufs[i], lengths[i], false);
	}
	if (!rc)
		for (i = 0; i < keysCount; i++)
			results[i] = res[i];
	stub_log_batch("BatchGet", keysCount, rc, rc ? NULL : res);
	pthread_mutex_unlock(&stub_lock);
	free(res);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchGetDirect(const char **keys, uint32_t keysCount,
					     void ***bufs, size_t **lengths, uint32_t lengthsRows,
					     uint32_t lengthsCols, int *results, uint32_t flags)
{
	(void)keys;
	(void)bufs;
	(void)lengths;
	(void)results;
	(void)flags;
	pthread_mutex_lock(&stub_lock);
	if (st.logfd >= 0)
		stub_log("BatchGetDirect %" PRIu32 " abort", keysCount);
	pthread_mutex_unlock(&stub_lock);
	fprintf(stderr, "ubsio_stub: UbsioKvCacheBatchGetDirect(%" PRIu32 ", %" PRIu32 "x%" PRIu32
		") needs an Ascend device; a host filesystem must not call it\n",
		keysCount, lengthsRows, lengthsCols);
	abort();
}

UBSIO_API int32_t UbsioKvCacheBatchExist(const char **keys, uint32_t keysCount, bool *results,
					 uint32_t flags)
{
	uint64_t size;
	uint32_t i;

	(void)flags;
	if (!results || !keys_ok(keys, keysCount))
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	for (i = 0; i < keysCount; i++)
		results[i] = do_stat(keys[i], &size);
	stub_log("BatchExist %" PRIu32 " 0", keysCount);
	pthread_mutex_unlock(&stub_lock);
	return KVC_OK;
}

#ifndef UBSIO_STUB_OMIT_DELETE
UBSIO_API int32_t UbsioKvCacheBatchDelete(const char **keys, uint32_t keysCount,
					  int32_t *results, uint32_t flags)
{
	uint32_t i;

	(void)flags;
	if (!results || !keys_ok(keys, keysCount))
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	if (batch_faulty("BatchDelete", keys, keysCount)) {
		pthread_mutex_unlock(&stub_lock);
		return KVC_ERR;
	}
	for (i = 0; i < keysCount; i++)
		results[i] = do_delete(keys[i]);
	stub_log_batch("BatchDelete", keysCount, 0, results);
	pthread_mutex_unlock(&stub_lock);
	return KVC_OK;
}
#endif

UBSIO_API int32_t UbsioKvCacheBatchGetLength(const char **keys, uint32_t keysCount,
					     size_t *lengths, int32_t *results, uint32_t flags)
{
	uint64_t size;
	uint32_t i;

	(void)flags;
	if (!lengths || !results || !keys_ok(keys, keysCount))
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	for (i = 0; i < keysCount; i++) {
		bool ok = do_stat(keys[i], &size);

		results[i] = ok ? 0 : KVC_ERR;
		lengths[i] = ok ? (size_t)(uint32_t)size : STUB_GARBAGE_LEN;
	}
	stub_log("BatchGetLength %" PRIu32 " 0", keysCount);
	pthread_mutex_unlock(&stub_lock);
	return KVC_OK;
}

UBSIO_API int32_t UbsioKvCacheBatchFree(void **bufs, uint32_t keysCount)
{
	uint32_t i;

	if (!bufs || keysCount < 1 || keysCount > STUB_BATCH_MAX)
		return KVC_INVALID_PARAM;
	if (!lock_inited())
		return KVC_ERR;
	for (i = 0; i < keysCount; i++) {
		pool_free(bufs[i]);
		bufs[i] = NULL;
	}
	stub_log("BatchFree %" PRIu32 " 0", keysCount);
	pthread_mutex_unlock(&stub_lock);
	return KVC_OK;
}
