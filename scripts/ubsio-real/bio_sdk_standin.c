/*
 * bio_sdk_standin.c: a stand-in for Huawei boostio's libbio_sdk.so, the lower
 * SDK that the real UBSIO KV-cache client (libubsio_kvc.so) dlopen()s, so that
 * the real client can be built from its public source and run without the
 * real SDK.  A check tool (scripts/ubsio-real-check), not production code.
 *
 * Source of truth: ubs-io (github jssaxx/ubs-io), `develop` and 7e38ed07.
 * K/ = ubsio-kv/src/csrc/, B/ = ubsio-boostio/src/.
 *
 * It exports exactly what K/kvc/dl_biosdk_api.cpp:70-82 dlsym()s (every one is
 * required there) with the types of bio_c.h, which it is compiled against
 * (-I .../ubsio-boostio/src/sdk of the same version).  Values live in a
 * directory, $BIO_STANDIN_DIR, one file per key, so that they survive the
 * process (a remount) like the real daemon's cache does.  Every call is
 * appended to $BIO_STANDIN_LOG when set.
 *
 * What it reproduces of the real SDK (per-key codes are the server's BResult,
 * B/common/bio_err.h, the rest CResult, B/sdk/bio_c.h:23-43):
 *  - an operation on a tenant without BioCreateCache: RET_CACHE_NOT_FOUND
 *    (B/sdk/bio.cpp:957-1170, every C entry point); after BioExit: NOT_READY;
 *  - key 1..255 bytes, value non-NULL, length > 0, else RET_CACHE_EPERM
 *    (B/sdk/bio.cpp:124-135,152,266);
 *  - Get copies min(stored - offset, length) bytes, returns the count in
 *    *realLength; a missing key is NOT_FOUND; offset past the end READ_EXCEED
 *    (B/cache/write/wcache_manager.cpp:1127-1135);
 *  - Stat of a missing key: NOT_FOUND; size is uint32 (bio_c.h:83-87);
 *  - Delete of a missing key succeeds (B/cache/cache.cpp:573-576);
 *  - BatchGet, by the mode BioInitialize was given:
 *      STANDALONE (develop): writes into the caller's valueAddrs[i]; one 0
 *      entry fails its 128-key sub-batch with EPERM and the SDK zeroes the
 *      caller's entries (B/sdk/mirror_client.cpp:1405-1417,1458-1470,
 *      1180-1200,1216);
 *      SEPARATES (7e38ed07): overwrites valueAddrs[i] with 4 MiB blocks of a
 *      pool (old B/sdk/mirror_client.cpp:1212-1243; block size :308); an
 *      empty pool fails the call with NEED_RETRY and rolls back;
 *    per key: missing BIO_NOT_EXISTS (7); a request longer than the value
 *    BIO_INVALID_PARAM (3): the copy needs equal slice lengths
 *    (B/cache/cache_slice_operator.cpp:193-200, B/server/mirror_server.cpp:954);
 *    in SEPARATES mode a value over 4 MiB is cut to the block, result 0
 *    (old B/cache/cache_slice_operator.cpp:296-327);
 *  - BatchGetFree: SEPARATES releases every entry into the pool (a pointer not
 *    from the pool is memory corruption in the real SDK: here it aborts, loudly);
 *    STANDALONE skips non-pool entries and zeroes them all
 *    (old mirror_client.cpp:1083-1088; develop mirror_client.cpp:1299-1313).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bio_c.h"

#define EXPORT __attribute__((visibility("default")))

/* B/common/bio_err.h: the server's per-key codes in BatchGet results. */
enum { BIO_OK = 0, BIO_INVALID_PARAM = 3, BIO_NOT_EXISTS = 7, BIO_READ_EXCEED = 13 };

#define STANDIN_MODE_SEPARATES 1  /* WorkerMode SEPARATES in both bio_c.h versions */
#define STANDIN_MODE_STANDALONE 2 /* WorkerMode STANDALONE, develop's bio_c.h only */
#define POOL_BLOCK (4u << 20)     /* old B/sdk/mirror_client.cpp:308 */
#define SUBBATCH 128              /* B/sdk/mirror_client.cpp:102 */
#define MAX_TENANTS 16

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_dir[4096];
static int g_ready;      /* BioInitialize succeeded and no BioExit since */
static int g_mode = -1;  /* the WorkerMode given to BioInitialize */
static long g_device = -1;
static uint64_t g_tenants[MAX_TENANTS];
static int g_ntenants;
static FILE *g_log;
static unsigned long g_tmpseq;

/* The SEPARATES-mode block pool (lazy: untouched blocks cost no memory). */
static char *g_pool;
static unsigned g_pool_blocks;
static unsigned char *g_pool_used;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&g_lock);
	if (!g_log) {
		const char *p = getenv("BIO_STANDIN_LOG");

		if (p && *p)
			g_log = fopen(p, "a");
	}
	if (g_log) {
		va_start(ap, fmt);
		vfprintf(g_log, fmt, ap);
		va_end(ap);
		fputc('\n', g_log);
		fflush(g_log);
	}
	pthread_mutex_unlock(&g_lock);
}

/* B/sdk/bio.cpp:124-135: 1..255 bytes. */
static int key_valid(const char *key)
{
	size_t n;

	if (!key)
		return 0;
	n = strnlen(key, MAX_KEY_SIZE);
	return n > 0 && n < MAX_KEY_SIZE;
}

/* The 0 result, NOT_FOUND for an unknown tenant, NOT_READY when not started. */
static CResult tenant_check(uint64_t tenant)
{
	int i, found = 0;

	pthread_mutex_lock(&g_lock);
	for (i = 0; i < g_ntenants; i++)
		found |= g_tenants[i] == tenant;
	i = g_ready;
	pthread_mutex_unlock(&g_lock);
	if (!found)
		return RET_CACHE_NOT_FOUND;
	return i ? RET_CACHE_OK : RET_CACHE_NOT_READY;
}

/* FNV-1a 64, twice with different bases: the file name of a key. */
static void key_path(const char *key, char *out, size_t outlen)
{
	uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
	const unsigned char *p;

	for (p = (const unsigned char *)key; *p; p++) {
		a = (a ^ *p) * 0x100000001b3ull;
		b = (b ^ *p) * 0x100000001b3ull;
		b ^= b >> 29;
	}
	snprintf(out, outlen, "%s/%016llx%016llx.v", g_dir, (unsigned long long)a,
		 (unsigned long long)b);
}

/*
 * A value file: "BSV1", uint32 key length, the key, the value.  Returns an
 * fd positioned at the value and its length, or -1 (missing, or another key
 * under the same name).
 */
static int value_open(const char *key, uint64_t *len)
{
	char path[4200], hdr[8], kbuf[MAX_KEY_SIZE];
	uint32_t klen;
	struct stat st;
	int fd;

	key_path(key, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || read(fd, hdr, 8) != 8 || memcmp(hdr, "BSV1", 4))
		goto bad;
	memcpy(&klen, hdr + 4, 4);
	if (klen != strlen(key) || klen >= sizeof(kbuf) || read(fd, kbuf, klen) != (ssize_t)klen ||
	    memcmp(kbuf, key, klen))
		goto bad;
	*len = (uint64_t)st.st_size - 8 - klen;
	return fd;
bad:
	close(fd);
	return -1;
}

static int read_full(int fd, char *buf, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n <= 0)
			return -1;
		buf += n;
		len -= (uint64_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Copies up to want bytes from offset off of key's value; -BIO code or count. */
static int64_t value_read(const char *key, uint64_t off, char *dst, uint64_t want, uint64_t *stored)
{
	uint64_t len, n;
	int fd = value_open(key, &len);
	off_t base;

	if (fd < 0)
		return -BIO_NOT_EXISTS;
	*stored = len;
	if (off >= len) {
		close(fd);
		return -BIO_READ_EXCEED;
	}
	n = len - off < want ? len - off : want;
	base = lseek(fd, 0, SEEK_CUR);
	if (read_full(fd, dst, n, (uint64_t)base + off)) {
		close(fd);
		return -BIO_NOT_EXISTS;
	}
	close(fd);
	return (int64_t)n;
}

static CResult value_write(const char *key, const char *val, uint64_t len)
{
	char path[4200], tmp[4300], hdr[8];
	uint32_t klen = (uint32_t)strlen(key);
	unsigned long seq;
	int fd, err = 0;
	uint64_t done = 0;

	pthread_mutex_lock(&g_lock);
	seq = ++g_tmpseq;
	pthread_mutex_unlock(&g_lock);
	key_path(key, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%d-%lu", g_dir, (int)getpid(), seq);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return RET_CACHE_ERROR;
	memcpy(hdr, "BSV1", 4);
	memcpy(hdr + 4, &klen, 4);
	if (write(fd, hdr, 8) != 8 || write(fd, key, klen) != (ssize_t)klen)
		err = errno ? errno : EIO;
	while (!err && done < len) {
		ssize_t n = write(fd, val + done, len - done);

		if (n <= 0)
			err = n < 0 ? errno : EIO;
		else
			done += (uint64_t)n;
	}
	if (close(fd) && !err)
		err = errno;
	if (!err && rename(tmp, path))
		err = errno;
	if (err) {
		unlink(tmp);
		/* A full cache: the SDK's quota/alloc failure maps to NEED_RETRY (bio.cpp:39-57). */
		return err == ENOSPC ? RET_CACHE_NEED_RETRY : RET_CACHE_ERROR;
	}
	return RET_CACHE_OK;
}

/* ---- the pool of 4 MiB blocks (SEPARATES mode) ---- */

static int pool_init(void)
{
	const char *e = getenv("BIO_STANDIN_POOL_BLOCKS");
	unsigned n = e && *e ? (unsigned)strtoul(e, NULL, 10) : 64;

	if (g_pool || !n)
		return g_pool ? 0 : -1;
	g_pool = mmap(NULL, (size_t)n * POOL_BLOCK, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (g_pool == MAP_FAILED) {
		g_pool = NULL;
		return -1;
	}
	g_pool_used = calloc(n, 1);
	g_pool_blocks = n;
	return 0;
}

static int pool_index(uintptr_t a)
{
	uintptr_t base = (uintptr_t)g_pool;

	if (!g_pool || a < base || a >= base + (uintptr_t)g_pool_blocks * POOL_BLOCK ||
	    (a - base) % POOL_BLOCK)
		return -1;
	return (int)((a - base) / POOL_BLOCK);
}

static uintptr_t pool_alloc(void)
{
	unsigned i;
	uintptr_t r = 0;

	pthread_mutex_lock(&g_lock);
	for (i = 0; i < g_pool_blocks; i++) {
		if (!g_pool_used[i]) {
			g_pool_used[i] = 1;
			r = (uintptr_t)g_pool + (uintptr_t)i * POOL_BLOCK;
			break;
		}
	}
	pthread_mutex_unlock(&g_lock);
	return r;
}

/* Returns 0, or -1 for an address the pool did not hand out (or a double free). */
static int pool_release(uintptr_t a)
{
	int i, ok = 0;

	pthread_mutex_lock(&g_lock);
	i = pool_index(a);
	if (i >= 0 && g_pool_used[i]) {
		g_pool_used[i] = 0;
		ok = 1;
	}
	pthread_mutex_unlock(&g_lock);
	return ok ? 0 : -1;
}

/* ---- the exported SDK ---- */

EXPORT CResult BioInitialize(WorkerMode mode, ClientOptionsConfig *optConf)
{
	const char *d = getenv("BIO_STANDIN_DIR");
	struct stat st;
	CResult r = RET_CACHE_OK;

	(void)optConf;
	if (!d || !*d || stat(d, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "bio_sdk_standin: BIO_STANDIN_DIR must name a directory\n");
		r = RET_CACHE_ERROR;
	} else if ((int)mode != STANDIN_MODE_SEPARATES && (int)mode != STANDIN_MODE_STANDALONE) {
		r = RET_CACHE_EPERM;
	} else {
		pthread_mutex_lock(&g_lock);
		snprintf(g_dir, sizeof(g_dir), "%s", d);
		g_mode = (int)mode;
		if (g_mode == STANDIN_MODE_SEPARATES && pool_init())
			r = RET_CACHE_ERROR;
		else
			g_ready = 1;
		pthread_mutex_unlock(&g_lock);
	}
	logf_("BioInitialize mode=%d -> %d", (int)mode, r);
	return r;
}

EXPORT void BioSetStandaloneDevice(uint32_t deviceId)
{
	pthread_mutex_lock(&g_lock);
	g_device = deviceId;
	pthread_mutex_unlock(&g_lock);
	logf_("BioSetStandaloneDevice %u", deviceId);
}

EXPORT void BioExit(void)
{
	pthread_mutex_lock(&g_lock);
	g_ready = 0;
	pthread_mutex_unlock(&g_lock);
	logf_("BioExit");
}

EXPORT CResult BioCreateCache(CacheDescriptor desc)
{
	CResult r = RET_CACHE_OK;
	int i;

	pthread_mutex_lock(&g_lock);
	for (i = 0; i < g_ntenants; i++)
		if (g_tenants[i] == desc.tenantId)
			r = RET_CACHE_EXISTS; /* B/sdk/bio.cpp:858-864 */
	if (r == RET_CACHE_OK) {
		if (g_ntenants == MAX_TENANTS)
			r = RET_CACHE_NO_SPACE;
		else
			g_tenants[g_ntenants++] = desc.tenantId;
	}
	pthread_mutex_unlock(&g_lock);
	logf_("BioCreateCache tenant=%llu affinity=%d strategy=%d -> %d",
	      (unsigned long long)desc.tenantId, (int)desc.affinity, (int)desc.strategy, r);
	return r;
}

EXPORT CResult BioCalcLocation(uint64_t tenantId, uint64_t objectId, ObjLocation *location)
{
	CResult r;

	if (!location)
		return RET_CACHE_EPERM;
	r = tenant_check(tenantId);
	if (r == RET_CACHE_OK) {
		location->location[0] = objectId % 4096; /* a partition id */
		location->location[1] = objectId;
	}
	return r;
}

EXPORT CResult BioPut(uint64_t tenantId, const char *key, const char *value, uint64_t length,
		      ObjLocation location)
{
	CResult r = tenant_check(tenantId);

	(void)location;
	if (r == RET_CACHE_OK && (!key_valid(key) || !value || !length))
		r = RET_CACHE_EPERM;
	if (r == RET_CACHE_OK)
		r = value_write(key, value, length);
	logf_("BioPut %s %llu -> %d", key ? key : "(null)", (unsigned long long)length, r);
	return r;
}

EXPORT CResult BioGet(uint64_t tenantId, const char *key, uint64_t offset, uint64_t length,
		      ObjLocation location, char *value, uint64_t *realLength)
{
	CResult r;
	uint64_t stored = 0;
	int64_t n = 0;

	(void)location;
	if (!realLength)
		return RET_CACHE_EPERM;
	r = tenant_check(tenantId);
	if (r == RET_CACHE_OK && (!key_valid(key) || !value || !length))
		r = RET_CACHE_EPERM;
	if (r == RET_CACHE_OK) {
		n = value_read(key, offset, value, length, &stored);
		if (n == -BIO_NOT_EXISTS)
			r = RET_CACHE_NOT_FOUND;
		else if (n == -BIO_READ_EXCEED)
			r = RET_CACHE_READ_EXCEED;
		else
			*realLength = (uint64_t)n;
	}
	if (r != RET_CACHE_OK)
		*realLength = 0;
	logf_("BioGet %s off=%llu len=%llu -> %d real=%lld", key ? key : "(null)",
	      (unsigned long long)offset, (unsigned long long)length, r, (long long)(n > 0 ? n : 0));
	return r;
}

EXPORT CResult BioStat(uint64_t tenantId, const char *key, ObjLocation location, ObjStat *stat)
{
	CResult r;
	uint64_t len;
	int fd;

	(void)location;
	if (!key || !stat)
		return RET_CACHE_ERROR; /* B/sdk/bio.cpp:1139-1141 */
	r = tenant_check(tenantId);
	if (r == RET_CACHE_OK && !key_valid(key))
		r = RET_CACHE_EPERM;
	if (r == RET_CACHE_OK) {
		fd = value_open(key, &len);
		if (fd < 0) {
			r = RET_CACHE_NOT_FOUND;
		} else {
			close(fd);
			memset(stat, 0, sizeof(*stat));
			snprintf(stat->key, sizeof(stat->key), "%s", key);
			stat->size = (uint32_t)len;
			stat->time = time(NULL);
		}
	}
	logf_("BioStat %s -> %d", key, r);
	return r;
}

EXPORT CResult BioBatchExist(uint64_t tenantId, const char *key[], ObjLocation location[],
			     uint32_t count, bool result[])
{
	CResult r = tenant_check(tenantId);
	uint64_t len;
	uint32_t i;
	int fd;

	if (r == RET_CACHE_OK && (!key || !result || !location || !count))
		r = RET_CACHE_EPERM;
	for (i = 0; r == RET_CACHE_OK && i < count; i++)
		if (!key_valid(key[i]))
			r = RET_CACHE_EPERM;
	for (i = 0; r == RET_CACHE_OK && i < count; i++) {
		fd = value_open(key[i], &len);
		result[i] = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	logf_("BioBatchExist n=%u -> %d", count, r);
	return r;
}

EXPORT CResult BioDelete(uint64_t tenantId, const char *key, ObjLocation location)
{
	CResult r = tenant_check(tenantId);
	char path[4200];
	uint64_t len;
	int fd;

	(void)location;
	if (r == RET_CACHE_OK && !key_valid(key))
		r = RET_CACHE_EPERM;
	if (r == RET_CACHE_OK) {
		fd = value_open(key, &len);
		if (fd >= 0) {
			close(fd);
			key_path(key, path, sizeof(path));
			if (unlink(path) && errno != ENOENT)
				r = RET_CACHE_ERROR;
		}
		/* a missing key: OK (B/cache/cache.cpp:573-576) */
	}
	logf_("BioDelete %s -> %d", key ? key : "(null)", r);
	return r;
}

/* One key of a BatchGet into dst (size cap): the server's BResult. */
static int32_t batch_one(const char *key, uint64_t off, uint64_t want, char *dst, uint64_t cap,
			 uint64_t *real)
{
	uint64_t stored = 0, len, n;
	int fd = value_open(key, &len);
	off_t base;

	*real = 0;
	if (fd < 0)
		return BIO_NOT_EXISTS;
	stored = len;
	if (off >= stored) {
		close(fd);
		return BIO_READ_EXCEED;
	}
	n = stored - off < want ? stored - off : want;
	*real = n;
	if (n != want) { /* slice lengths differ: Validate fails */
		close(fd);
		return BIO_INVALID_PARAM;
	}
	base = lseek(fd, 0, SEEK_CUR);
	if (read_full(fd, dst, n < cap ? n : cap, (uint64_t)base + off)) {
		close(fd);
		return BIO_NOT_EXISTS;
	}
	close(fd);
	return BIO_OK;
}

EXPORT CResult BioBatchGet(uint64_t tenantId, const char **keys, const uint32_t count,
			   uint64_t *offsets, uint64_t *lengths, ObjLocation *locations,
			   uintptr_t *valueAddrs, uint64_t *realLengths, int32_t *results)
{
	CResult r = tenant_check(tenantId);
	uint32_t i, s, e, bad = 0;
	int mode;

	if (r == RET_CACHE_OK && (!keys || !lengths || !offsets || !locations || !valueAddrs ||
				  !realLengths || !results))
		r = RET_CACHE_EPERM; /* B/sdk/bio.cpp:293-296 */
	for (i = 0; r == RET_CACHE_OK && i < count; i++)
		if (!key_valid(keys[i]) || !lengths[i])
			r = RET_CACHE_EPERM; /* B/sdk/bio.cpp:297-301 */
	if (r == RET_CACHE_OK && !count)
		r = RET_CACHE_EPERM;
	pthread_mutex_lock(&g_lock);
	mode = g_mode;
	pthread_mutex_unlock(&g_lock);

	if (r == RET_CACHE_OK && mode == STANDIN_MODE_STANDALONE) {
		/* Sub-batches of 128; one without a buffer fails with INVALID_PARAM. */
		for (s = 0; s < count; s += SUBBATCH) {
			e = s + SUBBATCH < count ? s + SUBBATCH : count;
			for (i = s; i < e; i++)
				if (!valueAddrs[i])
					bad = 1;
		}
		if (bad) {
			/* The failed sub-batch zeroes the entries before its NULL, the
			 * recycling zeroes the successful ones: every entry ends 0. */
			for (i = 0; i < count; i++)
				valueAddrs[i] = 0;
			r = RET_CACHE_EPERM;
		} else {
			for (i = 0; i < count; i++)
				results[i] = batch_one(keys[i], offsets[i], lengths[i],
						       (char *)valueAddrs[i], lengths[i],
						       &realLengths[i]);
		}
	} else if (r == RET_CACHE_OK && mode == STANDIN_MODE_SEPARATES) {
		for (i = 0; i < count; i++) {
			uintptr_t a = pool_alloc();

			if (!a) { /* roll back: ALLOC_FAIL -> NEED_RETRY (bio.cpp:39-40) */
				while (i--) {
					pool_release(valueAddrs[i]);
					valueAddrs[i] = 0;
				}
				r = RET_CACHE_NEED_RETRY;
				break;
			}
			valueAddrs[i] = a;
			results[i] = BIO_OK;
		}
		for (i = 0; r == RET_CACHE_OK && i < count; i++)
			results[i] = batch_one(keys[i], offsets[i], lengths[i], (char *)valueAddrs[i],
					       POOL_BLOCK, &realLengths[i]);
	} else if (r == RET_CACHE_OK) {
		r = RET_CACHE_EPERM; /* CONVERGENCE: no batch get (develop mirror_client.cpp:1207-1210) */
	}
	for (i = 0; i < count && keys && lengths; i++)
		logf_("BioBatchGet[%u/%u] %s len=%llu addr=%#lx -> %d result=%d", i, count,
		      key_valid(keys[i]) ? keys[i] : "(invalid)", (unsigned long long)lengths[i],
		      valueAddrs ? (unsigned long)valueAddrs[i] : 0ul, r,
		      r == RET_CACHE_OK && results ? results[i] : -1);
	return r;
}

EXPORT CResult BioBatchGetFree(uint64_t tenantId, uintptr_t *valueAddrs, const uint32_t count)
{
	CResult r;
	uint32_t i;
	int mode;

	pthread_mutex_lock(&g_lock);
	mode = g_mode;
	pthread_mutex_unlock(&g_lock);
	r = tenant_check(tenantId);
	if (r == RET_CACHE_NOT_READY)
		r = RET_CACHE_OK; /* BioBatchGetFree checks only the tenant (bio.cpp:1024-1038) */
	if (r != RET_CACHE_OK || !valueAddrs)
		return r;
	for (i = 0; i < count; i++) {
		logf_("BioBatchGetFree[%u/%u] addr=%#lx", i, count, (unsigned long)valueAddrs[i]);
		if (mode == STANDIN_MODE_SEPARATES) {
			/* ReleaseOne on every entry, unchecked, in the real SDK. */
			if (pool_release(valueAddrs[i])) {
				fprintf(stderr, "bio_sdk_standin: BioBatchGetFree of %#lx, not a block "
					"the pool handed out (memory corruption in the real SDK)\n",
					(unsigned long)valueAddrs[i]);
				logf_("BioBatchGetFree ABORT: %#lx is not a pool block",
				      (unsigned long)valueAddrs[i]);
				abort();
			}
		} else if (pool_index(valueAddrs[i]) >= 0) {
			pool_release(valueAddrs[i]);
		}
		if (mode != STANDIN_MODE_SEPARATES)
			valueAddrs[i] = 0;
	}
	return RET_CACHE_OK;
}

EXPORT CResult BioBatchGetKeyDiskAddr(uint64_t tenantId, const char **keys, ObjLocation *locations,
				      const uint32_t count, KeyAddrInfo *infos)
{
	(void)tenantId, (void)keys, (void)locations, (void)count, (void)infos;
	logf_("BioBatchGetKeyDiskAddr n=%u -> %d", count, RET_CACHE_ERROR);
	return RET_CACHE_ERROR; /* NDS/disk addresses: not emulated */
}

#ifdef STANDIN_MAIN
/*
 * bio-standin-ctl: the store seen from outside.
 *   bio-standin-ctl DIR exists KEY   exit 0 and print "yes" when KEY has a value, else "no", exit 1
 *   bio-standin-ctl DIR size KEY     print the value's length (exit 1 when missing)
 *   bio-standin-ctl DIR list         print every stored key, one a line
 */
#include <dirent.h>

int main(int argc, char **argv)
{
	uint64_t len;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR exists|size KEY | list\n", argv[0]);
		return 2;
	}
	snprintf(g_dir, sizeof(g_dir), "%s", argv[1]);
	if (!strcmp(argv[2], "list")) {
		DIR *d = opendir(g_dir);
		struct dirent *de;

		if (!d) {
			perror(g_dir);
			return 2;
		}
		while ((de = readdir(d))) {
			char path[4200], hdr[8], k[MAX_KEY_SIZE];
			uint32_t kl;
			size_t n = strlen(de->d_name);
			int f;

			if (n < 3 || strcmp(de->d_name + n - 2, ".v"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", g_dir, de->d_name);
			f = open(path, O_RDONLY);
			if (f < 0)
				continue;
			if (read(f, hdr, 8) == 8 && !memcmp(hdr, "BSV1", 4)) {
				memcpy(&kl, hdr + 4, 4);
				if (kl < sizeof(k) && read(f, k, kl) == (ssize_t)kl)
					printf("%.*s\n", (int)kl, k);
			}
			close(f);
		}
		closedir(d);
		return 0;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: %s DIR exists|size KEY\n", argv[0]);
		return 2;
	}
	fd = value_open(argv[3], &len);
	if (fd >= 0)
		close(fd);
	if (!strcmp(argv[2], "exists")) {
		puts(fd >= 0 ? "yes" : "no");
		return fd >= 0 ? 0 : 1;
	}
	if (!strcmp(argv[2], "size")) {
		if (fd < 0)
			return 1;
		printf("%llu\n", (unsigned long long)len);
		return 0;
	}
	fprintf(stderr, "%s: unknown command %s\n", argv[0], argv[2]);
	return 2;
}
#endif
