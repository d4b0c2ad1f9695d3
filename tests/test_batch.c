/*
 * Batch requests (store/batch.c) on a whole store, without FUSE: the
 * requests a client writes into a tenant's control file, built here as
 * lib/batch.c builds them (lib/offloadfs_batch_proto.h), and the bytes
 * moved through the bucket files as a client moves them.  What the kernel
 * would be told comes back through the caller's callbacks, recorded.
 * The mount tests (t-batch, t-batchkeep) run the same over FUSE with the
 * client library.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "batch.h"
#include "evict.h"
#include "helpers.h"
#include "kvb.h"
#include "meta.h"
#include "ns.h"
#include "offloadfs_batch_proto.h"
#include "store.h"

#define PS 4096u
#define NB 2u
#define BS (64 * PS)

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ofs-test-batch-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* What a request told the kernel's side. */
struct seen {
	int added, removed, used;
	char last[64];
};

static void rec_added(void *arg, uint64_t d, const char *name, size_t len)
{
	struct seen *w = arg;

	(void)d;
	w->added++;
	snprintf(w->last, sizeof(w->last), "%.*s", (int)len, name);
}

static void rec_removed(void *arg, uint64_t d, const char *name, size_t len)
{
	struct seen *w = arg;

	(void)d;
	w->removed++;
	snprintf(w->last, sizeof(w->last), "%.*s", (int)len, name);
}

static void rec_used(void *arg, uint64_t ino)
{
	(void)ino;
	((struct seen *)arg)->used++;
}

struct fixture {
	struct ofs_store s;
	uint64_t tenant;
	struct ofs_batch *b;
	struct seen seen;
	struct ofs_batch_caller c;
};

static void open_fixture(struct fixture *f)
{
	struct ofs_config cfg = { 0 };
	struct meta_inode t;
	char err[512];

	memset(f, 0, sizeof(*f));
	cfg.root = dir;
	cfg.geom.page_size = PS;
	cfg.geom.bucket_size = BS;
	cfg.geom.bucket_count = NB;
	ck_assert_msg(ofs_store_open(&f->s, &cfg, err, sizeof(err)) == 0, "%s", err);
	/* As the daemon runs it: lookups are uses that eviction keeps track of. */
	ofs_evict_init(&f->s, 1, 90, 80, 10);
	pthread_mutex_lock(&f->s.lock);
	ck_assert_int_eq(ofs_ns_make(&f->s, 1, "t1", S_IFDIR | 0755, 0, 0, META_COMMITTED, &t), 0);
	pthread_mutex_unlock(&f->s.lock);
	f->tenant = t.ino;
	ck_assert_int_eq(ofs_batch_open(&f->s, f->tenant, &f->b), 0);
	f->c = (struct ofs_batch_caller){ .uid = 1000, .gid = 100, .umask = 022,
					  .added = rec_added, .removed = rec_removed,
					  .used = rec_used, .arg = &f->seen };
}

static void close_fixture(struct fixture *f)
{
	ofs_batch_close(&f->s, f->b);
	ofs_evict_fini(&f->s);
	ck_assert_int_eq(ofs_store_close(&f->s), 0);
}

/* A request as lib/batch.c lays it out: *len its bytes.  sizes and pcs may be NULL. */
static char *build(int op, unsigned n, const char *const *keys, const uint64_t *sizes,
		   const uint64_t *const *pcs, size_t *len)
{
	size_t cap = sizeof(struct ofs_batch_hdr), pos;
	struct ofs_batch_hdr *h;
	char *buf;
	unsigned i;

	for (i = 0; i < n; i++)
		cap += sizeof(struct ofs_batch_ent) + ofs_batch_pad8((uint32_t)strlen(keys[i])) +
		       (pcs ? (sizes[i] + PS - 1) / PS * 8 : 0);
	buf = calloc(1, cap);
	ck_assert_ptr_nonnull(buf);
	h = (void *)buf;
	h->magic = OFS_BATCH_MAGIC;
	h->op = (uint16_t)op;
	h->n = n;
	h->len = (uint32_t)cap;
	pos = sizeof(*h);
	for (i = 0; i < n; i++) {
		struct ofs_batch_ent *e = (void *)(buf + pos);

		e->klen = (uint32_t)strlen(keys[i]);
		e->size = sizes ? sizes[i] : 0;
		e->npcs = pcs ? (uint32_t)((e->size + PS - 1) / PS) : 0;
		pos += sizeof(*e);
		memcpy(buf + pos, keys[i], e->klen);
		pos += ofs_batch_pad8(e->klen);
		if (e->npcs) {
			memcpy(buf + pos, pcs[i], e->npcs * 8u);
			pos += e->npcs * 8u;
		}
	}
	*len = pos;
	return buf;
}

struct reply {
	char buf[1 << 16];
	size_t len;
};

static int take(void *arg, const char *p, size_t len)
{
	struct reply *r = arg;

	ck_assert_uint_le(len, sizeof(r->buf));
	if (len)
		memcpy(r->buf, p, len);
	r->len = len;
	return 0;
}

/* Run one request and read its reply; the batch's status. */
static int run(struct fixture *f, int op, unsigned n, const char *const *keys,
	       const uint64_t *sizes, const uint64_t *const *pcs, struct reply *r)
{
	size_t len;
	char *req = build(op, n, keys, sizes, pcs, &len);
	const struct ofs_batch_hdr *h = (const void *)r->buf;

	ck_assert_int_eq(ofs_batch_request(&f->s, f->b, req, len, &f->c), 0);
	free(req);
	ck_assert_int_eq(ofs_batch_reply(f->b, 0, sizeof(r->buf), take, r), 0);
	ck_assert_uint_ge(r->len, sizeof(*h));
	ck_assert_uint_eq(h->magic, OFS_BATCH_MAGIC);
	ck_assert_uint_eq(h->len, r->len);
	return h->status;
}

static const struct ofs_batch_desc *desc(const struct reply *r, unsigned i)
{
	return (const void *)(r->buf + sizeof(struct ofs_batch_hdr) + i * sizeof(struct ofs_batch_desc));
}

static const struct ofs_batch_status *status(const struct reply *r, unsigned i)
{
	return (const void *)(r->buf + sizeof(struct ofs_batch_hdr) +
			      i * sizeof(struct ofs_batch_status));
}

/* The client's part: its bytes into the reserved run, and their page sums. */
static void client_write(const struct ofs_batch_desc *d, const char *data, uint64_t *pcs)
{
	char path[512];
	uint64_t off;
	int fd;

	ck_assert_int_eq(d->err, 0);
	snprintf(path, sizeof(path), "%s/bucket_%02x.data", dir, (unsigned)d->bucket);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, data, d->size, (off_t)d->offset), (ssize_t)d->size);
	close(fd);
	for (off = 0; off < d->size; off += PS)
		pcs[off / PS] = XXH3_64bits(data + off, d->size - off < PS ? d->size - off : PS);
}

static uint64_t free_pages(struct fixture *f)
{
	struct kvb_statfs st;

	ck_assert_int_eq(kvb_statfs(&f->s.kvb, &st), 0);
	return st.blocks_free;
}

START_TEST(test_put_lookup_delete)
{
	static const char *keys[] = { "a", "b", "c" };
	uint64_t sizes[] = { 3 * PS + 5, PS, 0 }, p0[4], p1[1], p2[1];
	const uint64_t *pcs[] = { p0, p1, p2 };
	char *data[3];
	struct reply r;
	struct fixture f;
	struct meta_inode m;
	uint64_t free0;
	unsigned i;

	open_fixture(&f);
	free0 = free_pages(&f);
	ck_assert_int_eq(run(&f, OFS_BATCH_RESERVE, 3, keys, sizes, NULL, &r), 0);
	ck_assert_uint_eq(free_pages(&f), free0 - 5);
	for (i = 0; i < 3; i++) {
		data[i] = malloc(sizes[i] + 1);
		fill(data[i], sizes[i], i + 1);
		if (sizes[i])
			client_write(desc(&r, i), data[i], (uint64_t *)pcs[i]);
		else
			ck_assert_int_eq(desc(&r, i)->bucket, -1);
	}
	ck_assert_int_eq(run(&f, OFS_BATCH_COMMIT, 3, keys, sizes, pcs, &r), 0);
	ck_assert_int_eq(f.seen.added, 3);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(desc(&r, i)->err, 0);
		ck_assert_uint_eq(desc(&r, i)->csum, XXH3_64bits(data[i], sizes[i]));
		ck_assert_uint_eq(desc(&r, i)->size, sizes[i]);
	}
	/* Made as a create by the caller is: its owner, 0666 less its umask. */
	pthread_mutex_lock(&f.s.lock);
	ck_assert_int_eq(meta_lookup(f.s.meta, f.tenant, "a", 1, &m), 0);
	pthread_mutex_unlock(&f.s.lock);
	ck_assert_uint_eq(m.uid, 1000);
	ck_assert_uint_eq(m.gid, 100);
	ck_assert_uint_eq(m.mode, S_IFREG | 0644);
	ck_assert_uint_eq(m.size, sizes[0]);

	/* A lookup gives what the commit gave, and counts as a use. */
	ck_assert_int_eq(run(&f, OFS_BATCH_LOOKUP, 3, keys, NULL, NULL, &r), 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(desc(&r, i)->err, 0);
		ck_assert_uint_eq(desc(&r, i)->csum, XXH3_64bits(data[i], sizes[i]));
	}
	/* Another key, a name that is no key, a directory's: each its own answer. */
	{
		static const char *odd[] = { "zz", "../x", "t" };

		pthread_mutex_lock(&f.s.lock);
		ck_assert_int_eq(ofs_ns_make(&f.s, f.tenant, "t", S_IFDIR | 0755, 0, 0,
					     META_COMMITTED, &m), 0);
		pthread_mutex_unlock(&f.s.lock);
		ck_assert_int_eq(run(&f, OFS_BATCH_LOOKUP, 3, odd, NULL, NULL, &r), 0);
		ck_assert_int_eq(desc(&r, 0)->err, -ENOENT);
		ck_assert_int_eq(desc(&r, 1)->err, -EINVAL);
		ck_assert_int_eq(desc(&r, 2)->err, -EISDIR);
	}

	ck_assert_int_eq(run(&f, OFS_BATCH_DELETE, 3, keys, NULL, NULL, &r), 0);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(status(&r, i)->err, 0);
	ck_assert_int_eq(f.seen.removed, 3);
	ck_assert_str_eq(f.seen.last, "c");
	ck_assert_int_eq(run(&f, OFS_BATCH_LOOKUP, 3, keys, NULL, NULL, &r), 0);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(desc(&r, i)->err, -ENOENT);
	/* Freed at the barrier after the delete. */
	ck_assert_int_eq(ofs_store_sync(&f.s, NULL, NULL), 0);
	ck_assert_uint_eq(free_pages(&f), free0);
	for (i = 0; i < 3; i++)
		free(data[i]);
	close_fixture(&f);
}
END_TEST

/* A wrong page sum fails the whole commit: nothing visible, the runs still reserved. */
START_TEST(test_bad_sum)
{
	static const char *keys[] = { "x", "y" };
	uint64_t sizes[] = { 2 * PS, 2 * PS }, p0[2], p1[2];
	const uint64_t *pcs[] = { p0, p1 };
	char data[2 * PS];
	struct reply r;
	struct fixture f;
	uint64_t free0;

	open_fixture(&f);
	free0 = free_pages(&f);
	ck_assert_int_eq(run(&f, OFS_BATCH_RESERVE, 2, keys, sizes, NULL, &r), 0);
	fill(data, sizeof(data), 7);
	client_write(desc(&r, 0), data, p0);
	client_write(desc(&r, 1), data, p1);
	p1[1] ^= 1;
	ck_assert_int_eq(run(&f, OFS_BATCH_COMMIT, 2, keys, sizes, pcs, &r), -EBADMSG);
	ck_assert_int_eq(desc(&r, 1)->err, -EBADMSG);
	ck_assert_int_eq(desc(&r, 0)->err, 0);
	ck_assert_int_eq(f.seen.added, 0);
	ck_assert_int_eq(run(&f, OFS_BATCH_LOOKUP, 2, keys, NULL, NULL, &r), 0);
	ck_assert_int_eq(desc(&r, 0)->err, -ENOENT);
	ck_assert_int_eq(desc(&r, 1)->err, -ENOENT);
	ck_assert_uint_eq(free_pages(&f), free0 - 4);
	/* The right sums on the same reservations: committed. */
	p1[1] ^= 1;
	ck_assert_int_eq(run(&f, OFS_BATCH_COMMIT, 2, keys, sizes, pcs, &r), 0);
	ck_assert_int_eq(f.seen.added, 2);
	close_fixture(&f);
}
END_TEST

/* Closing the description (the client closed or died) frees what it reserved. */
START_TEST(test_close_frees_reservations)
{
	static const char *keys[] = { "p", "q" };
	uint64_t sizes[] = { 5 * PS, PS };
	struct reply r;
	struct fixture f;
	uint64_t free0;

	open_fixture(&f);
	free0 = free_pages(&f);
	ck_assert_int_eq(run(&f, OFS_BATCH_RESERVE, 2, keys, sizes, NULL, &r), 0);
	ck_assert_uint_eq(free_pages(&f), free0 - 6);
	/* An abort gives one back; the same key twice on the description is EBUSY. */
	ck_assert_int_eq(run(&f, OFS_BATCH_ABORT, 1, keys + 1, NULL, NULL, &r), 0);
	ck_assert_int_eq(status(&r, 0)->err, 0);
	ck_assert_uint_eq(free_pages(&f), free0 - 5);
	ck_assert_int_eq(run(&f, OFS_BATCH_RESERVE, 1, keys, sizes, NULL, &r), 0);
	ck_assert_int_eq(desc(&r, 0)->err, -EBUSY);
	ofs_batch_drop_reserved(&f.s, f.b);
	ck_assert_uint_eq(free_pages(&f), free0);
	ck_assert_int_eq(run(&f, OFS_BATCH_RESERVE, 2, keys, sizes, NULL, &r), 0);
	ofs_batch_close(&f.s, f.b);
	ck_assert_uint_eq(free_pages(&f), free0);
	ck_assert_int_eq(ofs_batch_open(&f.s, f.tenant, &f.b), 0);
	close_fixture(&f);
}
END_TEST

START_TEST(test_refused_requests)
{
	static const char *dup[] = { "k", "k" };
	uint64_t sizes[] = { PS, PS };
	struct ofs_batch_hdr h = { .magic = OFS_BATCH_MAGIC, .op = OFS_BATCH_LOOKUP,
				   .len = sizeof(h) };
	struct ofs_batch *other;
	struct meta_inode m;
	struct reply r;
	struct fixture f;
	size_t len;
	char *req;

	open_fixture(&f);
	/* Malformed: no reply, the request refused as a whole. */
	ck_assert_int_eq(ofs_batch_request(&f.s, f.b, NULL, 0, &f.c), -EINVAL);
	ck_assert_int_eq(ofs_batch_reply(f.b, 0, sizeof(r.buf), take, &r), 0);
	ck_assert_uint_eq(r.len, 0);
	h.magic ^= 1;
	ck_assert_int_eq(ofs_batch_request(&f.s, f.b, (char *)&h, sizeof(h), &f.c), -EINVAL);
	h.magic ^= 1;
	h.len++;
	ck_assert_int_eq(ofs_batch_request(&f.s, f.b, (char *)&h, sizeof(h), &f.c), -EINVAL);
	h.len--;
	h.n = OFS_BATCH_KEYS_MAX + 1;
	ck_assert_int_eq(ofs_batch_request(&f.s, f.b, (char *)&h, sizeof(h), &f.c), -EINVAL);
	/* Entries past the bytes sent. */
	req = build(OFS_BATCH_LOOKUP, 1, dup, NULL, NULL, &len);
	ck_assert_int_eq(ofs_batch_request(&f.s, f.b, req, len - 8, &f.c), -EINVAL);
	free(req);
	/* Keys that name no file: each its own error, as through the mount. */
	{
		static char longname[300], longkey[OFS_KEY_MAX + 8];
		static const char *bad[] = { "", "a//b", "x/..", longname, longkey };

		memset(longname, 'n', sizeof(longname) - 1);
		memset(longkey, 'k', sizeof(longkey) - 1);
		for (size_t i = 100; i < sizeof(longkey) - 1; i += 100)
			longkey[i] = '/';
		ck_assert_int_eq(run(&f, OFS_BATCH_LOOKUP, 5, bad, NULL, NULL, &r), 0);
		ck_assert_int_eq(desc(&r, 0)->err, -EINVAL);
		ck_assert_int_eq(desc(&r, 1)->err, -EINVAL);
		ck_assert_int_eq(desc(&r, 2)->err, -EINVAL);
		ck_assert_int_eq(desc(&r, 3)->err, -ENAMETOOLONG);
		ck_assert_int_eq(desc(&r, 4)->err, -ENAMETOOLONG);
	}
	/* A key twice in one reserve or commit: the batch refused. */
	ck_assert_int_eq(run(&f, OFS_BATCH_RESERVE, 2, dup, sizes, NULL, &r), -EINVAL);
	/* Only a tenant's control file opens. */
	ck_assert_int_eq(ofs_batch_open(&f.s, 1, &other), -ENOENT);
	pthread_mutex_lock(&f.s.lock);
	ck_assert_int_eq(ofs_ns_make(&f.s, f.tenant, "sub", S_IFDIR | 0755, 0, 0, META_COMMITTED,
				     &m), 0);
	pthread_mutex_unlock(&f.s.lock);
	ck_assert_int_eq(ofs_batch_open(&f.s, m.ino, &other), -ENOENT);
	close_fixture(&f);
}
END_TEST

static Suite *batch_suite(void)
{
	Suite *s = suite_create("batch");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_put_lookup_delete);
	tcase_add_test(tc, test_bad_sum);
	tcase_add_test(tc, test_close_frees_reservations);
	tcase_add_test(tc, test_refused_requests);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(batch_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
