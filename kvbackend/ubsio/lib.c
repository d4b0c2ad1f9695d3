/*
 * lib.c: Huawei's UBSIO KV-cache client library (libubsio_kvc.so), loaded
 * with dlopen, one per process.  The only file that calls through its
 * symbols or reads its codes: the rest of the backend makes the calls
 * below and gets negative errno from ubs_errno.
 */
#include "ubsio_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t (*ubs_init1_fn)(int32_t);
typedef int32_t (*ubs_init2_fn)(int32_t, uint64_t);
typedef void (*ubs_exit_fn)(void);
typedef int32_t (*ubs_get_fn)(const char *, void *, size_t, uint32_t);
typedef bool (*ubs_exist_fn)(const char *, uint32_t);
typedef int32_t (*ubs_getlen_fn)(const char *, size_t *, uint32_t);
typedef int32_t (*ubs_bput_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*ubs_bget_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*ubs_bexist_fn)(const char **, uint32_t, bool *, uint32_t);
typedef int32_t (*ubs_bdel_fn)(const char **, uint32_t, int32_t *, uint32_t);
typedef int32_t (*ubs_bgetlen_fn)(const char **, uint32_t, size_t *, int32_t *, uint32_t);
typedef int32_t (*ubs_bfree_fn)(void **, uint32_t);

/*
 * The symbols used, resolved at load so that a library lacking one is
 * refused at mount rather than failing later.  Exit is optional: older
 * releases do not export it.  BatchGetDirect is never used: it reads into
 * device (NPU) buffers, which a host filesystem has none of.
 */
static const char *const ubs_symbols[] = {
	"UbsioKvCacheInit",       "UbsioKvCacheGet",        "UbsioKvCacheExist",
	"UbsioKvCacheGetLength",  "UbsioKvCacheBatchPut",   "UbsioKvCacheBatchGet",
	"UbsioKvCacheBatchExist", "UbsioKvCacheBatchDelete", "UbsioKvCacheBatchGetLength",
	"UbsioKvCacheBatchFree",  "UbsioKvCacheExit",
};
enum { SYM_INIT, SYM_GET, SYM_EXIST, SYM_GETLEN, SYM_BPUT, SYM_BGET, SYM_BEXIST, SYM_BDELETE,
       SYM_BGETLEN, SYM_BFREE, SYM_EXIT, SYM_N };
#define SYM_REQUIRED SYM_EXIT /* every symbol before this one */

/*
 * One library per process, loaded and initialised once under ubs_lib_lock
 * (the RFC's racy double-checked init), unloaded when the last store using
 * it is released.
 */
static struct {
	pthread_mutex_t lock;
	void *handle;
	void *sym[SYM_N];
	char path[PATH_MAX];
	unsigned users;
	/*
	 * The last library initialised, kept mapped after its last user: the
	 * real library's thread pools outlive Exit and would run unmapped
	 * code after a dlclose (ubsio_kvc_instance.cpp, kv_operation.h).
	 */
	void *kept;
	char kept_path[PATH_MAX];
} ubs_lib = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Keep h mapped for good, and for reuse by a later load of the same path.
 * A library kept before it, if another, stays mapped too.  Under the lock.
 */
static void ubs_lib_keep(void *h, const char *path)
{
	ubs_lib.kept = h;
	snprintf(ubs_lib.kept_path, sizeof(ubs_lib.kept_path), "%s", path);
}

int ubs_lib_load(const struct kvb_ubsio_config *c, char *err, size_t errlen)
{
	const char *path = c->lib && *c->lib ? c->lib : KVB_UBSIO_LIB_DEFAULT;
	void *h, *sym[SYM_N];
	int32_t rc;
	int i, ret = 0;

	pthread_mutex_lock(&ubs_lib.lock);
	if (ubs_lib.users) {
		if (strcmp(ubs_lib.path, path)) {
			snprintf(err, errlen, "ubsio library %s is loaded; cannot also load %s",
				 ubs_lib.path, path);
			ret = -EBUSY;
		} else {
			ubs_lib.users++;
		}
		goto out;
	}
	dlerror();
	h = ubs_lib.kept && !strcmp(ubs_lib.kept_path, path) ? ubs_lib.kept
							      : dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load the ubsio library %s: %s", path, dlerror());
		ret = -ENOENT;
		goto out;
	}
	for (i = 0; i < SYM_N; i++) {
		const char *e;

		dlerror();
		sym[i] = dlsym(h, ubs_symbols[i]);
		e = dlerror();
		if (i >= SYM_REQUIRED && (e || !sym[i])) {
			sym[i] = NULL;
			continue;
		}
		if (e || !sym[i]) {
			snprintf(err, errlen, "ubsio library %s lacks symbol %s: %s", path,
				 ubs_symbols[i], e ? e : "NULL");
			ret = -ENOENT;
			goto out_close;
		}
	}
	/*
	 * Older releases export Init(devId); newer ones Init(devId, ssdSize),
	 * where ssdSize is not read.  devId -1 is no Ascend device: the
	 * library then needs no ACL library (ubsio_kvc_operation.cpp,
	 * KvcOperationInit).
	 */
	if (c->new_init > 0)
		rc = ((ubs_init2_fn)sym[SYM_INIT])(c->device_id, c->ssd_size);
	else
		rc = ((ubs_init1_fn)sym[SYM_INIT])(c->device_id);
	if (rc) {
		snprintf(err, errlen, "%s: UbsioKvCacheInit(%d%s) failed with code %d%s", path,
			 c->device_id, c->new_init > 0 ? ", ssd_size" : "", rc,
			 c->device_id >= 0 ? " (a device id needs Ascend's ACL library; "
					     "ubsio_device=-1 runs without one)" : "");
		ret = -EIO;
		goto out_close;
	}
	ubs_lib.handle = h;
	memcpy(ubs_lib.sym, sym, sizeof(sym));
	snprintf(ubs_lib.path, sizeof(ubs_lib.path), "%s", path);
	ubs_lib.users = 1;
	goto out;

out_close:
	/* Init may have started the library's threads: keep it mapped. */
	ubs_lib_keep(h, path);
out:
	pthread_mutex_unlock(&ubs_lib.lock);
	return ret;
}

void ubs_lib_unload(void)
{
	pthread_mutex_lock(&ubs_lib.lock);
	if (ubs_lib.users && --ubs_lib.users == 0) {
		/* Exit stops the library's storage client; it is not unmapped. */
		if (ubs_lib.sym[SYM_EXIT])
			((ubs_exit_fn)ubs_lib.sym[SYM_EXIT])();
		ubs_lib_keep(ubs_lib.handle, ubs_lib.path);
		ubs_lib.handle = NULL;
		memset(ubs_lib.sym, 0, sizeof(ubs_lib.sym));
	}
	pthread_mutex_unlock(&ubs_lib.lock);
}

/* Whether a library is in use (for tests): loaded, initialised and not yet let go. */
int kvb_ubsio_lib_in_use(void)
{
	int in_use;

	pthread_mutex_lock(&ubs_lib.lock);
	in_use = ubs_lib.users > 0;
	pthread_mutex_unlock(&ubs_lib.lock);
	return in_use;
}

#define UBS_CALL(idx, type) ((type)ubs_lib.sym[idx])

/* The library's codes (ubsio_int.h) as negative errno. */
int ubs_errno(int32_t rc)
{
	switch (rc) {
	case UBS_OK:
		return 0;
	case UBS_ENOTFOUND:
		return -ENOENT;
	case UBS_ENOSPC:
		return -ENOSPC;
	case UBS_EINVAL:
		/* Every argument is checked before a call: this is our bug. */
		fprintf(stderr, "offloadfs: ubsio: the library refused a call's arguments "
				"(code 3): a bug in offloadfs\n");
		return -EINVAL;
	default:
		return -EIO;
	}
}

bool ubs_key_ok(const char *key)
{
	size_t n = key ? strnlen(key, UBS_KEY_MAX + 1) : 0;

	return n >= 1 && n <= UBS_KEY_MAX;
}

/*
 * One batch call over n keys (at most UBS_BATCH), each with its result in
 * res (preset by the caller).  The library fails a whole call for one bad
 * entry and then leaves the results alone (ubsio_kvc.cpp); every entry is
 * checked first, but should a call still fail as a whole, each key is
 * tried in a call of its own so that one key cannot fail the others.
 * Returns how many calls were made.
 */
unsigned ubs_batch_call(ubs_batch_fn call, const char **keys, void **bufs, size_t *lens,
			int *res, uint32_t n)
{
	unsigned calls = 1;
	uint32_t i;

	if (call(keys, bufs, lens, res, n) == 0 || n == 1)
		return calls;
	for (i = 0; i < n; i++, calls++)
		call(keys + i, bufs ? bufs + i : NULL, lens ? lens + i : NULL, res + i, 1);
	return calls;
}

int32_t ubs_bput_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n)
{
	return UBS_CALL(SYM_BPUT, ubs_bput_fn)(keys, n, bufs, lens, res, 0);
}

int32_t ubs_bdel_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n)
{
	(void)bufs;
	(void)lens;
	return UBS_CALL(SYM_BDELETE, ubs_bdel_fn)(keys, n, res, 0);
}

int32_t ubs_bget_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n)
{
	return UBS_CALL(SYM_BGET, ubs_bget_fn)(keys, n, bufs, lens, res, 0);
}

int32_t ubs_get_call(const char *key, void *buf, size_t len)
{
	return UBS_CALL(SYM_GET, ubs_get_fn)(key, buf, len, 0);
}

void ubs_bfree_call(void **pool, uint32_t n)
{
	UBS_CALL(SYM_BFREE, ubs_bfree_fn)(pool, n);
}

int32_t ubs_bexist_call(const char **keys, uint32_t n, bool *exist)
{
	return UBS_CALL(SYM_BEXIST, ubs_bexist_fn)(keys, n, exist, 0);
}

int32_t ubs_bgetlen_call(const char **keys, uint32_t n, size_t *lens, int32_t *res)
{
	return UBS_CALL(SYM_BGETLEN, ubs_bgetlen_fn)(keys, n, lens, res, 0);
}

/* Read by start's log line, while the store holds the library. */
const char *ubs_lib_path(void)
{
	return ubs_lib.path;
}

/* ---- a client outside a store (offloadctl scrub) ---- */

int kvb_ubsio_client_open(const struct kvb_ubsio_config *c, char *err, size_t errlen)
{
	return ubs_lib_load(c, err, errlen);
}

ssize_t kvb_ubsio_client_get(const char *key, unsigned char **out)
{
	size_t len = 0;
	unsigned char *buf;
	int32_t rc;

	*out = NULL;
	if (!ubs_key_ok(key))
		return -EINVAL;
	/* GetLength fails alike for a missing key and an error: Exist tells them apart. */
	rc = UBS_CALL(SYM_GETLEN, ubs_getlen_fn)(key, &len, 0);
	if (rc)
		return UBS_CALL(SYM_EXIST, ubs_exist_fn)(key, 0) ? ubs_errno(rc) : -ENOENT;
	if (len == 0 || len > (size_t)SSIZE_MAX)
		return -EIO;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	rc = UBS_CALL(SYM_GET, ubs_get_fn)(key, buf, len, 0);
	if (rc) {
		free(buf);
		return ubs_errno(rc);
	}
	*out = buf;
	return (ssize_t)len;
}

void kvb_ubsio_client_close(void)
{
	ubs_lib_unload();
}
