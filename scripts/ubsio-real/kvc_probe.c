/*
 * kvc_probe.c: calls the real libubsio_kvc.so (over bio_sdk_standin.c) through
 * its C ABI.  A check tool for scripts/ubsio-real-check.
 *
 *   kvc-probe LIB old|new exist KEY...   Init(-1), then "yes"/"no" per key from
 *                                        UbsioKvCacheExist; exit 0 when all are "no"
 *   kvc-probe LIB old|new abi            Init and the documented ABI facts, one
 *                                        "ok - ..." / "not ok - ..." line each
 *
 * old: UbsioKvCacheInit(int32_t devId) (7e38ed07); new: Init(devId, ssdSize)
 * (develop).  K/ = ubsio-kv/src/csrc/ of the ubs-io source; every fact below
 * names the line it comes from.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int32_t (*init1_fn)(int32_t);
typedef int32_t (*init2_fn)(int32_t, uint64_t);
typedef void (*exit_fn)(void);
typedef int32_t (*put_fn)(const char *, void *, size_t, uint32_t);
typedef int32_t (*get_fn)(const char *, void *, size_t, uint32_t);
typedef bool (*exist_fn)(const char *, uint32_t);
typedef int32_t (*del_fn)(const char *, uint32_t);
typedef int32_t (*getlen_fn)(const char *, size_t *, uint32_t);
typedef int32_t (*bput_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*bget_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*bgetd_fn)(const char **, uint32_t, void ***, size_t **, uint32_t, uint32_t, int *,
			    uint32_t);
typedef int32_t (*bgetlen_fn)(const char **, uint32_t, size_t *, int32_t *, uint32_t);
typedef int32_t (*bfree_fn)(void **, uint32_t);
typedef int32_t (*bdel_fn)(const char **, uint32_t, int32_t *, uint32_t);

static void *h;
static int newabi, npass, nfail;

static void *sym(const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "kvc-probe: the library lacks %s\n", name);
		exit(2);
	}
	return p;
}

static int32_t kinit(int32_t dev)
{
	return newabi ? ((init2_fn)sym("UbsioKvCacheInit"))(dev, 0)
		      : ((init1_fn)sym("UbsioKvCacheInit"))(dev);
}

static void check(int cond, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void check(int cond, const char *what, const char *fmt, ...)
{
	va_list ap;

	printf("%s - %s (%s)", cond ? "ok" : "not ok", what, newabi ? "develop" : "7e38ed07");
	if (!cond && fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
	fflush(stdout);
	cond ? npass++ : nfail++;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void fill(char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)(seed * 131 + i * 7 + (i >> 12));
}

static int abi(void)
{
	put_fn put = (put_fn)sym("UbsioKvCachePut");
	get_fn get = (get_fn)sym("UbsioKvCacheGet");
	exist_fn exist = (exist_fn)sym("UbsioKvCacheExist");
	del_fn del = (del_fn)sym("UbsioKvCacheDelete");
	getlen_fn getlen = (getlen_fn)sym("UbsioKvCacheGetLength");
	bput_fn bput = (bput_fn)sym("UbsioKvCacheBatchPut");
	bget_fn bget = (bget_fn)sym("UbsioKvCacheBatchGet");
	bgetd_fn bgetd = (bgetd_fn)sym("UbsioKvCacheBatchGetDirect");
	bgetlen_fn bgetlen = (bgetlen_fn)sym("UbsioKvCacheBatchGetLength");
	bfree_fn bfree = (bfree_fn)sym("UbsioKvCacheBatchFree");
	bdel_fn bdel = (bdel_fn)sym("UbsioKvCacheBatchDelete");
	exit_fn kexit = (exit_fn)sym("UbsioKvCacheExit");
	char k255[256], k256[257], small[64], big[64];
	size_t len, lens[3];
	int32_t rc, res[3];
	int r3[3];
	size_t nbig = (9u << 20) + 123;
	char *vbig = malloc(nbig), *out = malloc(nbig + 4096);

	/* Init: devId >= 0 loads Ascend ACL first (K/kvc/ubsio_kvc_operation.cpp:208-215,
	 * K/kvc/dl_acl_api.cpp:55-66): fails without ASCEND_HOME_PATH. */
	unsetenv("ASCEND_HOME_PATH");
	rc = kinit(0);
	check(rc == 1, "Init(0) without Ascend fails with 1 (ACL is loaded for devId >= 0)", "got %d", rc);
	rc = kinit(-2);
	if (newabi)
		check(rc == 1, "Init(-2) fails with 1 (dl_biosdk_api.cpp:120-123)", "got %d", rc);
	else
		check(rc == 0, "Init(-2) succeeds: any negative devId is accepted", "got %d", rc);
	rc = kinit(-1);
	check(rc == 0, "Init(-1) succeeds without Ascend", "got %d", rc);
	if (rc)
		return 1;

	/* Keys: 1..255 bytes (K/kvc/ubsio_kvc.cpp:24,51). */
	memset(k255, 'k', 255), k255[255] = 0;
	memset(k256, 'k', 256), k256[256] = 0;
	fill(small, sizeof(small), 1);
	rc = put(k255, small, 10, 0);
	check(rc == 0, "Put with a 255-byte key succeeds", "got %d", rc);
	rc = put(k256, small, 10, 0);
	check(rc == 3, "Put with a 256-byte key fails with 3 (ubsio_kvc.cpp:51)", "got %d", rc);
	rc = put("", small, 10, 0);
	check(rc == 3, "Put with an empty key fails with 3", "got %d", rc);
	rc = put("p/zero", small, 0, 0);
	check(rc == 3, "Put of a zero-length value fails with 3 (ubsio_kvc.cpp:47)", "got %d", rc);
	rc = get("p/zero", small, 0, 0);
	check(rc == 3, "Get with length 0 fails with 3 (ubsio_kvc.cpp:112)", "got %d", rc);

	/* GetLength / Get / Exist / Delete of a missing key. */
	len = 77;
	rc = getlen("p/missing", &len, 0);
	check(rc == 1 && len == 77, "GetLength of a missing key: 1, length untouched (kv_operation.cpp:114-116)",
	      "got %d, length %zu", rc, len);
	rc = get("p/missing", big, sizeof(big), 0);
	check(rc == 7, "Get of a missing key: 7 = RET_CACHE_NOT_FOUND (kv_operation.cpp:72)", "got %d", rc);
	check(!exist("p/missing", 0), "Exist of a missing key: false", NULL);
	rc = del("p/missing", 0);
	check(rc == 0, "Delete of a missing key succeeds (cache.cpp:573-576)", "got %d", rc);

	/* Get with a shorter and a longer buffer: realLength is dropped (kv_operation.cpp:71-72). */
	fill(small, 40, 2);
	rc = put("p/forty", small, 40, 0);
	check(rc == 0, "Put of 40 bytes", "got %d", rc);
	rc = getlen("p/forty", &len, 0);
	check(rc == 0 && len == 40, "GetLength gives 40", "got %d, %zu", rc, len);
	memset(big, 0x5a, sizeof(big));
	rc = get("p/forty", big, 16, 0);
	check(rc == 0 && !memcmp(big, small, 16) && (unsigned char)big[16] == 0x5a,
	      "Get into a 16-byte buffer: 0, the first 16 bytes", "got %d", rc);
	memset(big, 0x5a, sizeof(big));
	rc = get("p/forty", big, 64, 0);
	check(rc == 0 && !memcmp(big, small, 40) && (unsigned char)big[40] == 0x5a,
	      "Get into a 64-byte buffer: 0, 40 bytes, the rest untouched (length not reported)",
	      "got %d", rc);

	/* BatchGetLength: 1 for a missing key; its length is not written (ubsio_kvc.cpp:210-233). */
	{
		const char *ks[2] = { "p/forty", "p/missing" };

		lens[0] = lens[1] = 12345;
		res[0] = res[1] = -9;
		rc = bgetlen(ks, 2, lens, res, 0);
		check(rc == 0 && res[0] == 0 && lens[0] == 40 && res[1] == 1,
		      "BatchGetLength: 0/40 for a value, result 1 for a missing key", "rc %d res %d,%d len %zu",
		      rc, res[0], res[1], lens[0]);
		note("BatchGetLength's length for the missing key: %zu (not written by the SDK: whatever "
		     "std::vector::reserve left there)", lens[1]);
	}

	/* BatchPut: one bad key fails the whole batch with 3 before any put (ubsio_kvc.cpp:86-89). */
	{
		const char *ks[2] = { "p/bp-good", k256 };
		void *bs[2] = { small, small };
		size_t ls[2] = { 8, 8 };

		r3[0] = r3[1] = -9;
		rc = bput(ks, 2, bs, ls, r3, 0);
		check(rc == 3 && r3[0] == -9 && !exist("p/bp-good", 0),
		      "BatchPut with one 256-byte key: 3, nothing stored, results untouched", "rc %d res0 %d", rc,
		      r3[0]);
	}

	/* BatchGet. */
	fill(vbig, nbig, 3);
	rc = put("p/nine", vbig, nbig, 0);
	check(rc == 0, "Put of a 9 MiB value", "got %d", rc);
	{
		const char *ks[3] = { "p/forty", "p/missing", "p/nine" };
		void *bs[3], *mine[3];
		size_t ls[3] = { 40, 40, nbig };

		mine[0] = big, mine[1] = small, mine[2] = out;
		memcpy(bs, mine, sizeof(bs));
		memset(big, 0x5a, sizeof(big));
		memset(out, 0x5a, nbig);
		r3[0] = r3[1] = r3[2] = -9;
		rc = bget(ks, 3, bs, ls, r3, 0);
		check(rc == 0 && r3[0] == 0 && r3[1] == 7 && r3[2] == 0,
		      "BatchGet: results 0 / 7 (missing, BIO_NOT_EXISTS) / 0", "rc %d res %d,%d,%d", rc, r3[0],
		      r3[1], r3[2]);
		if (newabi) {
			check(bs[0] == mine[0] && bs[2] == mine[2] && !memcmp(out, vbig, nbig),
			      "develop: BatchGet fills the caller's buffers, 9 MiB whole", NULL);
			fill(small, 40, 2);
			check(!memcmp(big, small, 40), "develop: the 40-byte value is in the caller's buffer",
			      NULL);
			rc = bfree(bs, 3);
			check(rc == 0 && !bs[0] && !bs[1] && !bs[2],
			      "develop: BatchFree of caller buffers: 0, every entry set to NULL, nothing freed",
			      "rc %d", rc);
		} else {
			int moved = bs[0] != mine[0] && bs[2] != mine[2];

			check(moved, "7e38ed07: BatchGet replaces bufs[i] with the SDK's pool blocks", NULL);
			fill(small, 40, 2);
			check(moved && !memcmp(bs[0], small, 40), "7e38ed07: the 40-byte value is in the block",
			      NULL);
			if (moved) {
				int head = !memcmp(bs[2], vbig, 4u << 20);
				int whole = !memcmp(bs[2], vbig, nbig);

				check(head && !whole,
				      "7e38ed07: a 9 MiB value comes back cut to the 4 MiB block, result 0",
				      "first 4 MiB %s, whole %s", head ? "right" : "wrong",
				      whole ? "right" : "wrong");
			}
			rc = bfree(bs, 3);
			check(rc == 0, "7e38ed07: BatchFree of the blocks: 0", "rc %d", rc);
		}
	}
	{
		/* A request longer than the value fails that key with 3 (BIO_INVALID_PARAM). */
		const char *ks[1] = { "p/forty" };
		void *bs[1] = { big };
		size_t ls[1] = { 64 };

		r3[0] = -9;
		rc = bget(ks, 1, bs, ls, r3, 0);
		check(rc == 0 && r3[0] == 3,
		      "BatchGet of 64 bytes from a 40-byte value: result 3 (slice lengths must match)",
		      "rc %d res %d", rc, r3[0]);
		if (!newabi && bs[0] != big)
			bfree(bs, 1);
		ls[0] = 16;
		bs[0] = big;
		rc = bget(ks, 1, bs, ls, r3, 0);
		check(rc == 0 && r3[0] == 0, "BatchGet of 16 bytes from a 40-byte value: result 0 (a prefix)",
		      "rc %d res %d", rc, r3[0]);
		if (!newabi && bs[0] != big)
			bfree(bs, 1);
	}
	if (newabi) {
		const char *ks[2] = { "p/forty", "p/nine" };
		void *bs[2] = { big, NULL };
		size_t ls[2] = { 40, nbig };

		r3[0] = r3[1] = -9;
		rc = bget(ks, 2, bs, ls, r3, 0);
		check(rc == 1 && !bs[0] && r3[0] == -9,
		      "develop: BatchGet with one NULL buffer: 1, the caller's bufs[] zeroed, results untouched",
		      "rc %d bufs[0] %p res0 %d", rc, bs[0], r3[0]);
	}
	{
		/* BatchGetDirect needs NDS or ACL (K/kvc/ubsio_kvc_instance.cpp:51-122). */
		const char *ks[1] = { "p/forty" };
		void *row[1] = { big }, **bs[1] = { row };
		size_t lrow[1] = { 40 }, *ls[1] = { lrow };

		rc = bgetd(ks, 1, bs, ls, 1, 1, r3, 0);
		check(rc != 0, "BatchGetDirect without Ascend fails", "rc %d", rc);
		note("BatchGetDirect returned %d", rc);
	}
	{
		const char *ks[3] = { "p/forty", "p/nine", k255 };

		res[0] = res[1] = res[2] = -9;
		rc = bdel(ks, 3, res, 0);
		check(rc == 0 && !res[0] && !res[1] && !res[2] && !exist("p/nine", 0), "BatchDelete: 0s, gone",
		      "rc %d", rc);
	}
	kexit();
	rc = put("p/after-exit", small, 4, 0);
	note("Put after Exit returned %d (RET_CACHE_NOT_READY is 6)", rc);
	printf("%d passed, %d failed\n", npass, nfail);
	free(vbig);
	free(out);
	return nfail ? 1 : 0;
}

int main(int argc, char **argv)
{
	int i, present = 0;

	if (argc < 4 || (strcmp(argv[2], "old") && strcmp(argv[2], "new"))) {
		fprintf(stderr, "usage: %s LIB old|new exist KEY... | abi\n", argv[0]);
		return 2;
	}
	newabi = !strcmp(argv[2], "new");
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "kvc-probe: %s\n", dlerror());
		return 2;
	}
	if (!strcmp(argv[3], "abi")) {
		i = abi();
		fflush(stdout);
		_exit(i); /* no static destructors under the library's live threads */
	}
	if (strcmp(argv[3], "exist"))
		return 2;
	if (kinit(-1)) {
		fprintf(stderr, "kvc-probe: Init(-1) failed\n");
		return 2;
	}
	for (i = 4; i < argc; i++) {
		bool e = ((exist_fn)sym("UbsioKvCacheExist"))(argv[i], 0);

		printf("%s %s\n", e ? "yes" : "no", argv[i]);
		present |= e;
	}
	((exit_fn)sym("UbsioKvCacheExit"))();
	/* Never dlclose: the library's thread pools live on (ubsio_kvc_operation.cpp:240-243). */
	fflush(stdout);
	_exit(present ? 1 : 0);
}
