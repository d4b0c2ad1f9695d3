/*
 * ubsio_stub.c: a stand-in for Huawei's UBSIO KV-cache client library
 * (libubsio_kvc.so), for the offloadfs tests.  It keeps every value as a file
 * in a directory, so the store outlives the process (daemon restarts), and
 * it can inject faults.  Only the UbsioKvCache* functions below are
 * exported; everything else is static.
 *
 * Build:
 *   gcc -shared -fPIC -O2 ubsio_stub.c -o libubsio_kvc.so -lpthread
 *   -DUBSIO_STUB_OLD_INIT     Init is the old UbsioKvCacheInit(int32_t deviceId);
 *                             the capacity then comes from UBSIO_STUB_SSD_SIZE.
 *   -DUBSIO_STUB_OMIT_DELETE  leave UbsioKvCacheDelete out (a library missing
 *                             a symbol).
 *
 * Result codes (int32_t; negative errno values):
 *      0  success
 *     -2  not found (ENOENT): no value under the key
 *     -5  I/O error (EIO): an injected fault, or a file operation that failed
 *    -12  out of memory (ENOMEM): BatchGetDirect could not allocate
 *    -22  bad argument (EINVAL): NULL or empty key, key longer than 2000 bytes,
 *         NULL buffer with a non-zero length, NULL array, rows * cols != n;
 *         also Init with a bad configuration (see below)
 *    -28  no space (ENOSPC): the put would take the stored total past the
 *         capacity (or the file system is full)
 *    -75  buffer too small (EOVERFLOW): Get with len < the value's length
 *   -107  not initialised (ENOTCONN): any call before a successful Init
 * UbsioKvCacheExist returns false for a missing key and for every error.
 *
 * Calls:
 *   Init(deviceId, ssdSize)  ssdSize is the capacity in bytes of the values
 *       stored (0: unlimited); deviceId is ignored.  Idempotent: once
 *       initialised, Init returns 0 and changes nothing (ssdSize and the
 *       environment are not read again).  A failed Init can be retried.
 *   Put(key, buf, len)  stores a copy of len bytes (len 0 is a valid, empty
 *       value), replacing any previous value.
 *   Get(key, buf, len)  len must be at least the value's length (GetLength),
 *       else -75 and nothing is copied; copies exactly the value's length.
 *   Exist, Delete, GetLength  as named; Delete of a missing key is -2.
 *   The flags arguments are ignored.
 *   Batch calls: results[i] is the code of keys[i] (BatchExist: whether it
 *       exists).  They return 0 when every key succeeded, else the code of the
 *       first key that failed; BatchExist returns 0, or the code of the first
 *       key that failed by a fault or a bad key (missing keys are not errors).
 *       n == 0 returns 0.  When the call itself fails (not initialised, NULL
 *       arrays) results is left untouched.  BatchGet takes bufs[i] of lens[i]
 *       bytes, as Get; lens is not written.
 *   BatchGetDirect(keys, n, &bufs, &lens, rows, cols, results)  rows * cols
 *       must equal n.  Returns the library's own buffers: one allocation
 *       holding n pointers followed by n size_t, so *bufs points at the
 *       pointers and *lens at the lengths (*lens == (size_t *)(*bufs + n)).
 *       (*bufs)[i] is a malloc'd copy of the value (non-NULL even for an
 *       empty value) or NULL with (*lens)[i] == 0 when results[i] != 0.
 *       Free everything with UbsioKvCacheBatchFree(*bufs, n): it frees each
 *       buffer and the block (so *lens too); never free *lens separately.
 *       When the call itself fails, *bufs and *lens are set to NULL.
 *   BatchFree(bufs, n)  void; NULL bufs is a no-op.  Works before Init.
 *
 * Files, in $UBSIO_STUB_DIR:
 *   A value is a file named by the lowercase hex of the key's bytes, e.g.
 *   key "a/b" -> "612f62".  Hex longer than 200 characters (keys of more
 *   than 100 bytes) is cut into 200-character pieces; every piece but the
 *   last is a directory named "<piece>+": "<200 hex>+/<200 hex>+/<rest>".
 *   Joining the path without '+' and '/' gives back the key.  A value is
 *   written to a temporary ".tmp-<pid>-<seq>" in the top directory and
 *   renamed into place, so a crash of the process never leaves half a value
 *   (with UBSIO_STUB_FSYNC=1 the data is fsynced before the rename, for power
 *   loss).  Delete removes the "+" directories it empties.  Init adds up the
 *   sizes of the values already there (for the capacity) and removes
 *   temporaries whose process is gone.  Only one process should use a
 *   directory at a time (the capacity total is kept in memory).
 *
 * Environment, read by Init only (a test changes it and runs a new process):
 *   UBSIO_STUB_DIR=dir       required: the store directory.  Unset, empty or
 *                            not a directory: Init returns -22 and says why on
 *                            stderr.
 *   UBSIO_STUB_FAIL_INIT=1   Init returns -5 (any value but "" and "0").
 *   UBSIO_STUB_FAIL_PUT=N    the Nth put fails with -5 and stores nothing
 *   UBSIO_STUB_FAIL_GET=N    the Nth get fails with -5 and copies nothing
 *   UBSIO_STUB_FAIL_DELETE=N the Nth delete fails with -5 and deletes nothing
 *       N counts from 1 since Init; each key of a batch counts as one call
 *       (Put/BatchPut; Get/BatchGet/BatchGetDirect; Delete/BatchDelete).  A
 *       key rejected as a bad argument (-22) is not counted; every other
 *       attempt is, whatever its outcome.  0 or unset: no fault.
 *   UBSIO_STUB_FAIL_KEYS=s   every call on a key containing s fails with -5
 *                            (Exist: false); in a batch only those keys fail.
 *   UBSIO_STUB_SSD_SIZE=N    capacity in bytes with -DUBSIO_STUB_OLD_INIT
 *                            (ignored with the new Init, which takes ssdSize)
 *   UBSIO_STUB_FSYNC=1       fsync each value before renaming it into place
 *   UBSIO_STUB_LOG=path      append one line per call from Init on (calls
 *                            before a successful Init are not logged):
 *     Init <deviceId> <ssdSize> <rc>      Put <key> <len> <rc>
 *     Get <key> <len> <rc>                Exist <key> <0|1>
 *     Delete <key> <rc>                   GetLength <key> <len> <rc>
 *     BatchPut <n> <rc>                   BatchGet <n> <rc>
 *     BatchGetDirect <n> <rows> <cols> <rc>
 *     BatchExist <n> <rc>                 BatchDelete <n> <rc>
 *     BatchGetLength <n> <rc>             BatchFree <n>
 *   Keys are escaped so a line stays one line: bytes other than '!'..'~' and
 *   the backslash are written \xHH (a space is \x20).  Each line is one
 *   O_APPEND write, so several processes may share the file.
 *
 * Thread-safe: one mutex serialises every call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define UBSIO_API __attribute__((visibility("default")))

enum {
	STUB_OK = 0,
	STUB_ENOENT = -2,
	STUB_EIO = -5,
	STUB_ENOMEM = -12,
	STUB_EINVAL = -22,
	STUB_ENOSPC = -28,
	STUB_EOVERFLOW = -75,
	STUB_ENOTINIT = -107,
};

#define STUB_KEY_MAX 2000  /* bytes */
#define STUB_SEG 200       /* hex characters per path component */
/* Relative path of a value: hex plus "+/" between pieces, and the NUL. */
#define STUB_REL_MAX (2 * STUB_KEY_MAX + 2 * (2 * STUB_KEY_MAX / STUB_SEG) + 1)
/* An escaped key in the log, "..." when cut, and the NUL. */
#define STUB_ESC_MAX (4 * STUB_KEY_MAX + 4)

static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
	bool inited;
	int dirfd;
	int logfd;
	bool fsync;
	uint64_t capacity;  /* 0: unlimited */
	uint64_t used;      /* bytes of values stored */
	uint64_t fail_put, fail_get, fail_delete;
	uint64_t puts, gets, deletes;
	char *fail_keys;
	uint64_t tmpseq;
} st = { .dirfd = -1, .logfd = -1 };

/* ---- environment ---- */

static int env_u64(const char *name, uint64_t *out)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	*out = 0;
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

static void key_escape(const char *key, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i, o = 0;

	if (!key) {
		strcpy(out, "(null)");
		return;
	}
	for (i = 0; key[i] && i < STUB_KEY_MAX; i++) {
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
	if (key[i]) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

__attribute__((format(printf, 1, 2)))
static void stub_log(const char *fmt, ...)
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
	if (write(st.logfd, line, (size_t)n) < 0) {
		/* a test reading the log will notice */
	}
}

/* Log a call on one key: "<op> <key><rest>". */
__attribute__((format(printf, 3, 4)))
static void stub_log_key(const char *op, const char *key, const char *fmt, ...)
{
	char esc[STUB_ESC_MAX], rest[96];
	va_list ap;

	if (st.logfd < 0)
		return;
	key_escape(key, esc);
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	stub_log("%s %s%s", op, esc, rest);
}

/* ---- keys and files ---- */

/* 0 with *klen set, or -22. */
static int key_check(const char *key, size_t *klen)
{
	size_t n;

	if (!key)
		return STUB_EINVAL;
	n = strnlen(key, STUB_KEY_MAX + 1);
	if (n == 0 || n > STUB_KEY_MAX)
		return STUB_EINVAL;
	*klen = n;
	return 0;
}

static void key_path(const char *key, size_t klen, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i, o = 0, hlen = 2 * klen;

	for (i = 0; i < hlen; i++) {
		unsigned char c = (unsigned char)key[i / 2];

		if (i && i % STUB_SEG == 0) {
			out[o++] = '+';
			out[o++] = '/';
		}
		out[o++] = hx[i % 2 ? c & 15 : c >> 4];
	}
	out[o] = '\0';
}

static int err_code(int e)
{
	return e == ENOSPC || e == EDQUOT ? STUB_ENOSPC : STUB_EIO;
}

/* Size of the value at rel: 0, -2 or -5. */
static int value_size(const char *rel, uint64_t *size)
{
	struct stat sb;

	if (fstatat(st.dirfd, rel, &sb, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT || errno == ENOTDIR ? STUB_ENOENT : STUB_EIO;
	if (!S_ISREG(sb.st_mode))
		return STUB_EIO;
	*size = (uint64_t)sb.st_size;
	return 0;
}

/* Create the "+" directories above rel. */
static int make_parents(const char *rel)
{
	char path[STUB_REL_MAX];
	char *p;

	strcpy(path, rel);
	for (p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdirat(st.dirfd, path, 0755) && errno != EEXIST)
			return err_code(errno);
		*p = '/';
	}
	return 0;
}

/* Remove the "+" directories above rel that are now empty. */
static void remove_parents(const char *rel)
{
	char path[STUB_REL_MAX];
	char *p;

	strcpy(path, rel);
	while ((p = strrchr(path, '/'))) {
		*p = '\0';
		if (unlinkat(st.dirfd, path, AT_REMOVEDIR))
			break;
	}
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int value_put(const char *key, size_t klen, const void *buf, size_t len)
{
	char rel[STUB_REL_MAX], tmp[64];
	uint64_t old = 0, base;
	int fd, rc, e;

	key_path(key, klen, rel);
	rc = value_size(rel, &old);
	if (rc == STUB_EIO)
		return rc;
	if (rc)
		old = 0;
	base = st.used >= old ? st.used - old : 0;
	if (st.capacity && ((uint64_t)len > st.capacity || base > st.capacity - len))
		return STUB_ENOSPC;
	rc = make_parents(rel);
	if (rc)
		return rc;
	snprintf(tmp, sizeof(tmp), ".tmp-%ld-%" PRIu64, (long)getpid(), ++st.tmpseq);
	fd = openat(st.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_code(errno);
	if (write_all(fd, buf, len) || (st.fsync && fsync(fd))) {
		e = errno;
		close(fd);
		unlinkat(st.dirfd, tmp, 0);
		return err_code(e);
	}
	if (close(fd) || renameat(st.dirfd, tmp, st.dirfd, rel)) {
		e = errno;
		unlinkat(st.dirfd, tmp, 0);
		return err_code(e);
	}
	st.used = base + len;
	return 0;
}

/*
 * Read the value of key: into buf of len bytes (-75 when too small), or,
 * when out is set, into a new malloc'd buffer returned in *out.  *vlen gets
 * the value's length.
 */
static int value_get(const char *key, size_t klen, void *buf, size_t len, void **out,
		     size_t *vlen)
{
	char rel[STUB_REL_MAX];
	struct stat sb;
	size_t size, done = 0;
	char *dst;
	int fd, rc = 0;

	key_path(key, klen, rel);
	fd = openat(st.dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? STUB_ENOENT : STUB_EIO;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > SIZE_MAX) {
		close(fd);
		return STUB_EIO;
	}
	size = (size_t)sb.st_size;
	if (out) {
		dst = malloc(size ? size : 1);
		if (!dst) {
			close(fd);
			return STUB_ENOMEM;
		}
	} else {
		if (len < size) {
			close(fd);
			return STUB_EOVERFLOW;
		}
		dst = buf;
	}
	while (done < size) {
		ssize_t n = read(fd, dst + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = STUB_EIO;
			break;
		}
		done += (size_t)n;
	}
	close(fd);
	if (rc) {
		if (out)
			free(dst);
		return rc;
	}
	if (out)
		*out = dst;
	*vlen = size;
	return 0;
}

static int value_delete(const char *key, size_t klen)
{
	char rel[STUB_REL_MAX];
	uint64_t size = 0;
	int rc;

	key_path(key, klen, rel);
	rc = value_size(rel, &size);
	if (rc)
		return rc;
	if (unlinkat(st.dirfd, rel, 0))
		return errno == ENOENT ? STUB_ENOENT : STUB_EIO;
	st.used = st.used >= size ? st.used - size : 0;
	if (strchr(rel, '/'))
		remove_parents(rel);
	return 0;
}

static bool is_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return n > 0;
}

/* A leftover ".tmp-<pid>-<seq>" whose process is gone. */
static bool stale_tmp(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, ".tmp-", 5))
		return false;
	errno = 0;
	pid = strtol(name + 5, &end, 10);
	if (errno || end == name + 5 || *end != '-' || pid <= 0)
		return false;
	return kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Add up the sizes of the values under fd (which this takes over). */
static int scan(int fd, bool top, uint64_t *sum)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(fd);
		return STUB_EIO;
	}
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		size_t n = strlen(name);
		struct stat sb;

		if (name[0] == '.') {
			if (top && stale_tmp(name))
				unlinkat(dirfd(d), name, 0);
			continue;
		}
		if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISDIR(sb.st_mode) && n > 1 && name[n - 1] == '+' && is_hex(name, n - 1)) {
			int sub = openat(dirfd(d), name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0 || (rc = scan(sub, false, sum)))
				break;
		} else if (S_ISREG(sb.st_mode) && is_hex(name, n)) {
			*sum += (uint64_t)sb.st_size;
		}
	}
	closedir(d);
	return rc;
}

/* ---- faults ---- */

static bool key_faulty(const char *key)
{
	return st.fail_keys && strstr(key, st.fail_keys);
}

/* Count one call of a kind and say whether it is the one to fail. */
static int count_fault(uint64_t *count, uint64_t fail_at, const char *key)
{
	++*count;
	if (fail_at && *count == fail_at)
		return STUB_EIO;
	return key_faulty(key) ? STUB_EIO : 0;
}

/* ---- one key, with the lock held ---- */

static int do_put(const char *key, const void *buf, size_t len)
{
	size_t klen;
	int rc = key_check(key, &klen);

	if (rc || (!buf && len))
		return STUB_EINVAL;
	rc = count_fault(&st.puts, st.fail_put, key);
	return rc ? rc : value_put(key, klen, buf, len);
}

static int do_get(const char *key, void *buf, size_t len)
{
	size_t klen, vlen;
	int rc = key_check(key, &klen);

	if (rc || (!buf && len))
		return STUB_EINVAL;
	rc = count_fault(&st.gets, st.fail_get, key);
	return rc ? rc : value_get(key, klen, buf, len, NULL, &vlen);
}

static int do_get_alloc(const char *key, void **out, size_t *vlen)
{
	size_t klen;
	int rc = key_check(key, &klen);

	if (rc)
		return rc;
	rc = count_fault(&st.gets, st.fail_get, key);
	return rc ? rc : value_get(key, klen, NULL, 0, out, vlen);
}

static int do_exist(const char *key)
{
	char rel[STUB_REL_MAX];
	uint64_t size;
	size_t klen;
	int rc = key_check(key, &klen);

	if (rc)
		return rc;
	if (key_faulty(key))
		return STUB_EIO;
	key_path(key, klen, rel);
	return value_size(rel, &size);
}

static int do_delete(const char *key)
{
	size_t klen;
	int rc = key_check(key, &klen);

	if (rc)
		return rc;
	rc = count_fault(&st.deletes, st.fail_delete, key);
	return rc ? rc : value_delete(key, klen);
}

static int do_get_length(const char *key, size_t *len)
{
	char rel[STUB_REL_MAX];
	uint64_t size = 0;
	size_t klen;
	int rc = key_check(key, &klen);

	if (rc || !len)
		return STUB_EINVAL;
	if (key_faulty(key))
		return STUB_EIO;
	key_path(key, klen, rel);
	rc = value_size(rel, &size);
	if (!rc && size > SIZE_MAX)
		rc = STUB_EIO;
	*len = rc ? 0 : (size_t)size;
	return rc;
}

/* ---- init ---- */

static void stub_reset(void)
{
	if (st.dirfd >= 0)
		close(st.dirfd);
	if (st.logfd >= 0)
		close(st.logfd);
	free(st.fail_keys);
	st.dirfd = -1;
	st.logfd = -1;
	st.fail_keys = NULL;
	st.inited = false;
}

static int32_t stub_init(int32_t device_id, uint64_t capacity)
{
	const char *log, *dir, *keys;
	uint64_t used = 0;
	struct stat sb;
	int rc = 0, fd;

	pthread_mutex_lock(&stub_lock);
	if (st.inited) {
		stub_log("Init %" PRId32 " %" PRIu64 " 0", device_id, capacity);
		pthread_mutex_unlock(&stub_lock);
		return 0;
	}
	log = getenv("UBSIO_STUB_LOG");
	if (log && *log) {
		st.logfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (st.logfd < 0) {
			fprintf(stderr, "ubsio_stub: UBSIO_STUB_LOG=%s: %s\n", log, strerror(errno));
			rc = STUB_EINVAL;
			goto out;
		}
	}
	if (env_true("UBSIO_STUB_FAIL_INIT")) {
		fprintf(stderr, "ubsio_stub: Init fails (UBSIO_STUB_FAIL_INIT)\n");
		rc = STUB_EIO;
		goto out;
	}
	dir = getenv("UBSIO_STUB_DIR");
	if (!dir || !*dir) {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_DIR is not set\n");
		rc = STUB_EINVAL;
		goto out;
	}
	st.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st.dirfd < 0 || fstat(st.dirfd, &sb) || !S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_DIR=%s: %s\n", dir,
			st.dirfd < 0 ? strerror(errno) : "not a directory");
		rc = STUB_EINVAL;
		goto out;
	}
	if (env_u64("UBSIO_STUB_FAIL_PUT", &st.fail_put) ||
	    env_u64("UBSIO_STUB_FAIL_GET", &st.fail_get) ||
	    env_u64("UBSIO_STUB_FAIL_DELETE", &st.fail_delete)) {
		rc = STUB_EINVAL;
		goto out;
	}
	keys = getenv("UBSIO_STUB_FAIL_KEYS");
	if (keys && *keys && !(st.fail_keys = strdup(keys))) {
		rc = STUB_EIO;
		goto out;
	}
	st.fsync = env_true("UBSIO_STUB_FSYNC");
	fd = openat(st.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || scan(fd, true, &used)) {
		fprintf(stderr, "ubsio_stub: UBSIO_STUB_DIR=%s: cannot read it\n", dir);
		rc = STUB_EIO;
		goto out;
	}
	st.capacity = capacity;
	st.used = used;
	st.puts = st.gets = st.deletes = 0;
	st.inited = true;
out:
	stub_log("Init %" PRId32 " %" PRIu64 " %d", device_id, capacity, rc);
	if (rc)
		stub_reset();
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

__attribute__((destructor))
static void stub_fini(void)
{
	stub_reset();
}

/* ---- the API ---- */

#define LOCK_INITED()                                   \
	do {                                            \
		pthread_mutex_lock(&stub_lock);         \
		if (!st.inited) {                       \
			pthread_mutex_unlock(&stub_lock); \
			return STUB_ENOTINIT;           \
		}                                       \
	} while (0)

#ifdef UBSIO_STUB_OLD_INIT
UBSIO_API int32_t UbsioKvCacheInit(int32_t deviceId)
{
	uint64_t capacity;

	if (env_u64("UBSIO_STUB_SSD_SIZE", &capacity))
		return STUB_EINVAL;
	return stub_init(deviceId, capacity);
}
#else
UBSIO_API int32_t UbsioKvCacheInit(int32_t deviceId, uint64_t ssdSize)
{
	return stub_init(deviceId, ssdSize);
}
#endif

UBSIO_API int32_t UbsioKvCachePut(const char *key, void *buf, size_t len, uint32_t flags)
{
	int rc;

	(void)flags;
	LOCK_INITED();
	rc = do_put(key, buf, len);
	stub_log_key("Put", key, " %zu %d", len, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheGet(const char *key, void *buf, size_t len, uint32_t flags)
{
	int rc;

	(void)flags;
	LOCK_INITED();
	rc = do_get(key, buf, len);
	stub_log_key("Get", key, " %zu %d", len, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API bool UbsioKvCacheExist(const char *key, uint32_t flags)
{
	bool found;

	(void)flags;
	pthread_mutex_lock(&stub_lock);
	if (!st.inited) {
		pthread_mutex_unlock(&stub_lock);
		return false;
	}
	found = do_exist(key) == 0;
	stub_log_key("Exist", key, " %d", found);
	pthread_mutex_unlock(&stub_lock);
	return found;
}

#ifndef UBSIO_STUB_OMIT_DELETE
UBSIO_API int32_t UbsioKvCacheDelete(const char *key, uint32_t flags)
{
	int rc;

	(void)flags;
	LOCK_INITED();
	rc = do_delete(key);
	stub_log_key("Delete", key, " %d", rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}
#endif

UBSIO_API int32_t UbsioKvCacheGetLength(const char *key, size_t *len, uint32_t flags)
{
	int rc;

	(void)flags;
	LOCK_INITED();
	rc = do_get_length(key, len);
	stub_log_key("GetLength", key, " %zu %d", len ? *len : 0, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchPut(const char **keys, uint32_t n, void **bufs, size_t *lens,
				       int *results, uint32_t flags)
{
	int rc = 0;
	uint32_t i;

	(void)flags;
	LOCK_INITED();
	if (n && (!keys || !bufs || !lens || !results)) {
		rc = STUB_EINVAL;
	} else {
		for (i = 0; i < n; i++) {
			results[i] = do_put(keys[i], bufs[i], lens[i]);
			if (results[i] && !rc)
				rc = results[i];
		}
	}
	stub_log("BatchPut %" PRIu32 " %d", n, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchGet(const char **keys, uint32_t n, void **bufs, size_t *lens,
				       int *results, uint32_t flags)
{
	int rc = 0;
	uint32_t i;

	(void)flags;
	LOCK_INITED();
	if (n && (!keys || !bufs || !lens || !results)) {
		rc = STUB_EINVAL;
	} else {
		for (i = 0; i < n; i++) {
			results[i] = do_get(keys[i], bufs[i], lens[i]);
			if (results[i] && !rc)
				rc = results[i];
		}
	}
	stub_log("BatchGet %" PRIu32 " %d", n, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchGetDirect(const char **keys, uint32_t n, void ***bufs,
					     size_t **lens, uint32_t rows, uint32_t cols,
					     int *results, uint32_t flags)
{
	void **block = NULL;
	size_t *vlens = NULL;
	int rc = 0;
	uint32_t i;

	(void)flags;
	if (bufs)
		*bufs = NULL;
	if (lens)
		*lens = NULL;
	LOCK_INITED();
	if (!bufs || !lens || (n && (!keys || !results)) || (uint64_t)rows * cols != n) {
		rc = STUB_EINVAL;
	} else if (n) {
		block = malloc((size_t)n * (sizeof(void *) + sizeof(size_t)));
		if (!block) {
			rc = STUB_ENOMEM;
		} else {
			vlens = (size_t *)(block + n);
			for (i = 0; i < n; i++) {
				block[i] = NULL;
				vlens[i] = 0;
				results[i] = do_get_alloc(keys[i], &block[i], &vlens[i]);
				if (results[i]) {
					block[i] = NULL;
					vlens[i] = 0;
					if (!rc)
						rc = results[i];
				}
			}
			*bufs = block;
			*lens = vlens;
		}
	}
	stub_log("BatchGetDirect %" PRIu32 " %" PRIu32 " %" PRIu32 " %d", n, rows, cols, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchExist(const char **keys, uint32_t n, bool *results,
					 uint32_t flags)
{
	int rc = 0, r;
	uint32_t i;

	(void)flags;
	LOCK_INITED();
	if (n && (!keys || !results)) {
		rc = STUB_EINVAL;
	} else {
		for (i = 0; i < n; i++) {
			r = do_exist(keys[i]);
			results[i] = r == 0;
			if (r && r != STUB_ENOENT && !rc)
				rc = r;
		}
	}
	stub_log("BatchExist %" PRIu32 " %d", n, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchDelete(const char **keys, uint32_t n, int32_t *results,
					  uint32_t flags)
{
	int rc = 0;
	uint32_t i;

	(void)flags;
	LOCK_INITED();
	if (n && (!keys || !results)) {
		rc = STUB_EINVAL;
	} else {
		for (i = 0; i < n; i++) {
			results[i] = do_delete(keys[i]);
			if (results[i] && !rc)
				rc = results[i];
		}
	}
	stub_log("BatchDelete %" PRIu32 " %d", n, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API int32_t UbsioKvCacheBatchGetLength(const char **keys, uint32_t n, size_t *lens,
					     int32_t *results, uint32_t flags)
{
	int rc = 0;
	uint32_t i;

	(void)flags;
	LOCK_INITED();
	if (n && (!keys || !lens || !results)) {
		rc = STUB_EINVAL;
	} else {
		for (i = 0; i < n; i++) {
			results[i] = do_get_length(keys[i], &lens[i]);
			if (results[i] && !rc)
				rc = results[i];
		}
	}
	stub_log("BatchGetLength %" PRIu32 " %d", n, rc);
	pthread_mutex_unlock(&stub_lock);
	return rc;
}

UBSIO_API void UbsioKvCacheBatchFree(void **bufs, uint32_t n)
{
	uint32_t i;

	if (!bufs)
		return;
	for (i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	pthread_mutex_lock(&stub_lock);
	stub_log("BatchFree %" PRIu32, n);
	pthread_mutex_unlock(&stub_lock);
}
