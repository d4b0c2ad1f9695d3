/*
 * The ubsio backend through a whole store (store/, a real database)
 * over the stand-in library (tests/ubsio), loaded through dlopen from the
 * path given as argv[1].  What the mount tests cannot reach cheaply: a
 * metadata commit failing after the put, a crash between them, key
 * shortening, and the accounting behind the limits.
 *
 * After each scenario: the KV store holds exactly the values the records
 * name (invariant 11, DESIGN.md), and every record's value matches its
 * checksum (invariant 2).
 */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "helpers.h"
#include "kvb.h"
#include "meta.h"
#include "meta_test.h"
#include "store.h"

#define PS 4096u

static const char *lib;
static char dir[256], kvdir[300];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ofs-test-ubsio-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(kvdir, sizeof(kvdir), "%s.kv", dir);
	ck_assert_int_eq(mkdir(kvdir, 0755), 0);
	/*
	 * The stand-in reads its store directory at Init; it writes values
	 * through at once, so the tests can count them in it.
	 */
	setenv("UBSIO_STUB_DIR", kvdir, 1);
	setenv("UBSIO_STUB_FLUSH_MS", "0", 1);
}

static void teardown(void)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, kvdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void open_limited(struct ofs_store *s, uint64_t max_bytes, uint64_t max_keys,
			 uint64_t buffer_max, uint32_t key_max)
{
	struct ofs_config cfg = { 0 };
	char err[1024];

	cfg.root = dir;
	cfg.backend = "ubsio";
	cfg.geom.page_size = PS;
	cfg.geom.bucket_size = 16 * PS;
	cfg.geom.bucket_count = 1;
	cfg.ubsio.lib = lib;
	cfg.ubsio.new_init = 1;
	cfg.ubsio.device_id = KVB_UBSIO_DEVICE_UNSET;
	cfg.ubsio.max_bytes = max_bytes;
	cfg.ubsio.max_keys = max_keys;
	cfg.ubsio.buffer_max = buffer_max;
	cfg.ubsio.cache_max = 1 << 20;
	cfg.ubsio.key_max = key_max;
	ck_assert_msg(ofs_store_open(s, &cfg, err, sizeof(err)) == 0, "%s", err);
}

static void open_store(struct ofs_store *s)
{
	open_limited(s, 0, 0, 64 << 20, KVB_UBSIO_KEY_MAX);
}

/* Lines of the stand-in's call log that start with prefix. */
static int log_count(const char *path, const char *prefix)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strncmp(line, prefix, strlen(prefix)) == 0;
	fclose(f);
	return n;
}

/* Values in the stand-in's directory (one file each, or a "+" directory chain). */
static int count_values(const char *d)
{
	struct dirent *de;
	DIR *dp = opendir(d);
	int n = 0;

	ck_assert_ptr_nonnull(dp);
	while ((de = readdir(dp))) {
		char sub[1024];
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", d, de->d_name);
		ck_assert_int_eq(stat(sub, &st), 0);
		n += S_ISDIR(st.st_mode) ? count_values(sub) : 1;
	}
	closedir(dp);
	return n;
}

struct census {
	struct ofs_store *s;
	int values, bad;
};

static int census_one(void *ctx, const struct meta_inode *in, const char *skey,
		      const char *prev)
{
	struct census *c = ctx;
	struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };
	uint64_t csum;

	(void)prev;
	if (!skey)
		return 0;
	c->values++;
	if (kvb_checksum(&c->s->kvb, &map, &csum) || csum != in->csum)
		c->bad++;
	return 0;
}

/* Invariants 11 and 2: the store holds exactly the recorded values, all intact. */
static void check_invariants(struct ofs_store *s)
{
	struct census c = { .s = s };

	ck_assert_int_eq(meta_foreach_value(s->meta, census_one, &c), 0);
	ck_assert_int_eq(c.bad, 0);
	ck_assert_int_eq(count_values(kvdir), c.values);
}

/* Write len bytes of pattern seed as the whole new content of m and commit. */
/* The metadata lock, as the daemon's ofs.lock: one sqlite connection, two threads. */
static pthread_mutex_t meta_mu = PTHREAD_MUTEX_INITIALIZER;

static int put(struct ofs_store *s, struct meta_inode *m, const char *key, size_t len,
	       unsigned seed)
{
	struct kvb_map c = { m->bucket, m->page, m->npages, m->size, NULL };
	struct kvb_obj *o;
	char *buf = malloc(len + 1);
	int ret;

	ck_assert_int_eq(kvb_obj_open(&s->kvb, &c, key, strlen(key), &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&s->kvb, o, 0), 0);
	fill(buf, len, seed);
	ret = (int)kvb_obj_write(&s->kvb, o, buf, len, 0);
	if (ret == (int)len)
		ret = ofs_store_commit(s, &meta_mu, m, o);
	kvb_obj_close(&s->kvb, o);
	free(buf);
	return ret;
}

static void expect(struct ofs_store *s, const struct meta_inode *m, size_t len, unsigned seed)
{
	struct kvb_map map = { m->bucket, m->page, m->npages, m->size, NULL };
	char *want = malloc(len + 1), *got = malloc(len + 1);

	ck_assert_uint_eq(m->size, len);
	fill(want, len, seed);
	ck_assert_int_eq(kvb_read(&s->kvb, &map, got, len + 1, 0), (ssize_t)len);
	ck_assert_mem_eq(got, want, len);
	free(want);
	free(got);
}

/* An overwrite keeps the old value until the barrier, then deletes it. */
START_TEST(test_overwrite_deletes_after_barrier)
{
	struct ofs_store s;
	struct meta_inode m;

	open_store(&s);
	m = new_record(&s, "a");
	ck_assert_int_eq(put(&s, &m, "t/a", 100000, 1), 0);
	ck_assert_int_eq(count_values(kvdir), 1);
	ck_assert_int_eq(put(&s, &m, "t/a", 5000, 2), 0);
	/* The old value may still be what a durable record names. */
	ck_assert_int_eq(count_values(kvdir), 2);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 1);
	expect(&s, &m, 5000, 2);
	/* Truncating to empty leaves no value at all. */
	ck_assert_int_eq(put(&s, &m, "t/a", 0, 3), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 0);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* A metadata commit that fails after the put: the record stays, the new value goes. */
START_TEST(test_failed_record_dooms_the_put)
{
	struct ofs_store s;
	struct meta_inode m, before;

	open_store(&s);
	m = new_record(&s, "b");
	ck_assert_int_eq(put(&s, &m, "t/b", 30000, 1), 0);
	before = m;
	meta_inject_fault(s.meta, 1);
	ck_assert_int_eq(put(&s, &m, "t/b", 40000, 2), -EIO);
	meta_inject_fault(s.meta, 0);
	ck_assert_uint_eq(m.page, before.page);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 1);
	expect(&s, &m, 30000, 1);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A crash after the put and before the record (the failed commit stands
 * for it; the crash comes before any release): the journal names the key,
 * and the next start deletes it.
 */
START_TEST(test_crash_between_put_and_record)
{
	struct ofs_store s;
	struct meta_inode m;

	open_store(&s);
	m = new_record(&s, "c");
	ck_assert_int_eq(put(&s, &m, "t/c", 20000, 1), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	meta_inject_fault(s.meta, 1);
	ck_assert_int_eq(put(&s, &m, "t/c", 20000, 2), -EIO);
	meta_inject_fault(s.meta, 0);
	ck_assert_int_eq(count_values(kvdir), 2);
	ofs_store_crash(&s);

	open_store(&s);
	ck_assert_ptr_nonnull(strstr(s.start_msg, "1 orphaned values deleted (1 journalled"));
	ck_assert_int_eq(count_values(kvdir), 1);
	ck_assert_int_eq(meta_get(s.meta, m.ino, &m), 0);
	expect(&s, &m, 20000, 1);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* A crash with a replaced value not yet deleted: the next start deletes it. */
START_TEST(test_crash_before_delete)
{
	struct ofs_store s;
	struct meta_inode m;

	open_store(&s);
	m = new_record(&s, "d");
	ck_assert_int_eq(put(&s, &m, "t/d", 9000, 1), 0);
	ck_assert_int_eq(put(&s, &m, "t/d", 9001, 2), 0);
	ck_assert_int_eq(count_values(kvdir), 2);
	ofs_store_crash(&s);
	open_store(&s);
	ck_assert_int_eq(count_values(kvdir), 1);
	ck_assert_int_eq(meta_get(s.meta, m.ino, &m), 0);
	expect(&s, &m, 9001, 2);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* A path longer than key_max keeps its head, gains a hash, stays unique. */
START_TEST(test_long_key_shortened)
{
	struct ofs_store s;
	struct meta_inode a, b;
	struct kvb_map map;
	char key[1500], desc[4096], *k;

	open_limited(&s, 0, 0, 64 << 20, 200);
	memset(key, 'x', sizeof(key));
	memcpy(key, "t/", 2);
	key[sizeof(key) - 1] = '\0';
	a = new_record(&s, "a");
	b = new_record(&s, "b");
	ck_assert_int_eq(put(&s, &a, key, 1000, 1), 0);
	key[sizeof(key) - 2] = 'y'; /* the same head, another path */
	ck_assert_int_eq(put(&s, &b, key, 1000, 2), 0);
	map = (struct kvb_map){ a.bucket, a.page, a.npages, a.size, NULL };
	ck_assert_int_gt(kvb_describe(&s.kvb, &map, desc, sizeof(desc)), 0);
	k = strstr(desc, "key=");
	ck_assert_ptr_nonnull(k);
	ck_assert_uint_le(strcspn(k + 4, "\n"), 200);
	ck_assert_ptr_nonnull(strstr(k, "~"));
	ck_assert_int_eq(strncmp(k + 4, "t/xxx", 5), 0);
	expect(&s, &a, 1000, 1);
	expect(&s, &b, 1000, 2);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* kv_max_keys, kv_max_bytes, kv_buffer_max, and room coming back after deletes. */
START_TEST(test_limits)
{
	struct ofs_store s;
	struct meta_inode a, b, c;
	struct kvb_statfs st = { 0 };
	struct kvb_obj *o1, *o2;
	struct kvb_map empty = KVB_MAP_EMPTY;
	static char buf[700 << 10];

	open_limited(&s, 64 * PS, 2, 64 << 20, KVB_UBSIO_KEY_MAX);
	a = new_record(&s, "a");
	b = new_record(&s, "b");
	c = new_record(&s, "c");
	ck_assert_int_eq(put(&s, &a, "t/a", 10 * PS, 1), 0);
	ck_assert_int_eq(put(&s, &b, "t/b", 10, 2), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st), 0);
	ck_assert_uint_eq(st.blocks, 64);
	ck_assert_uint_eq(st.blocks_free, (64 * PS - 10 * PS - 10) / PS);
	ck_assert_uint_eq(st.files, 2);
	ck_assert_uint_eq(st.files_free, 0);
	/* A third key: ENOSPC; after b's value is deleted: room. */
	ck_assert_int_eq(put(&s, &c, "t/c", 10, 3), -ENOSPC);
	ck_assert_int_eq(put(&s, &b, "t/b", 0, 2), 0);
	ck_assert_int_eq(put(&s, &c, "t/c", 10, 3), -ENOSPC); /* b's value awaits the barrier */
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(put(&s, &c, "t/c", 10, 3), 0);
	/* Bytes: a rewrite of a to 60 pages needs both versions: over 64 pages. */
	ck_assert_int_eq(put(&s, &a, "t/a", 60 * PS, 4), -ENOSPC);
	expect(&s, &a, 10 * PS, 1);

	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);

	/* The writers' memory bound: one file over it, or two that together are. */
	open_limited(&s, 0, 0, 1 << 20, KVB_UBSIO_KEY_MAX);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "t/x", 3, &o1), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o1, buf, sizeof(buf), 0),
			 (ssize_t)sizeof(buf));
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o1, buf, sizeof(buf), sizeof(buf)),
			 -EFBIG);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "t/y", 3, &o2), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o2, buf, sizeof(buf), 0), -ENOMEM);
	kvb_obj_close(&s.kvb, o1);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o2, buf, 1000, 0), 1000);
	kvb_obj_close(&s.kvb, o2);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* A restart reads the keys from the records: the values are found, no scan. */
START_TEST(test_restart_finds_values)
{
	struct ofs_store s;
	struct meta_inode m[5];
	char name[8], key[16];
	int i;

	open_store(&s);
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		snprintf(key, sizeof(key), "t/f%d", i);
		m[i] = new_record(&s, name);
		ck_assert_int_eq(put(&s, &m[i], key, 1000u * (unsigned)(i + 1), (unsigned)i), 0);
	}
	ck_assert_int_eq(ofs_store_close(&s), 0);
	open_store(&s);
	ck_assert_ptr_nonnull(strstr(s.start_msg, "5 values (15000 bytes) from a clean unmount"));
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(meta_get(s.meta, m[i].ino, &m[i]), 0);
		expect(&s, &m[i], 1000u * (unsigned)(i + 1), (unsigned)i);
	}
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * Delete the record of ino (its value prepared for removal), crash before
 * the value is deleted, reopen: the start's sweep must delete the value.
 */
static void delete_crash_reopen(struct ofs_store *s, uint64_t ino)
{
	ck_assert_int_eq(meta_delete(s->meta, ino), 0);
	ofs_store_crash(s);
	ck_assert_int_eq(count_values(kvdir), 1);
	open_store(s);
	ck_assert_int_eq(count_values(kvdir), 0);
	check_invariants(s);
	ck_assert_int_eq(ofs_store_close(s), 0);
}

/*
 * An unlink: remove_prepare journals the key before the record goes; a
 * crash right after the record is deleted (before remove) leaves nothing.
 */
START_TEST(test_unlink_crash_after_record)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_map map;

	open_store(&s);
	a = new_record(&s, "a");
	ck_assert_int_eq(put(&s, &a, "t/a", 5000, 1), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	map = (struct kvb_map){ a.bucket, a.page, a.npages, a.size, NULL };
	ck_assert(kvb_has_remove_prepare(&s.kvb));
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	delete_crash_reopen(&s, a.ino);
}
END_TEST

/* A vid is never reused, even after the values and journal lines naming it are gone. */
START_TEST(test_vids_never_reused)
{
	struct ofs_store s;
	struct meta_inode a, b;
	uint64_t first;

	open_store(&s);
	a = new_record(&s, "a");
	ck_assert_int_eq(put(&s, &a, "t/a", 100, 1), 0);
	ck_assert_int_eq(put(&s, &a, "t/a", 100, 2), 0);
	first = a.page;
	/* Empty it: no record names any value; the barrier deletes and resets the journal. */
	ck_assert_int_eq(put(&s, &a, "t/a", 0, 3), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 0);
	ofs_store_crash(&s);
	open_store(&s);
	b = new_record(&s, "b");
	ck_assert_int_eq(put(&s, &b, "t/b", 100, 4), 0);
	ck_assert_uint_gt(b.page, first);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* The journal's text (malloc'd). */
static char *journal_text(void)
{
	char path[300], *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/ubsio.journal", dir);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* The mapping of record a, as fuse/ passes it to remove_prepare. */
static struct kvb_map map_of(const struct meta_inode *a)
{
	return (struct kvb_map){ a->bucket, a->page, a->npages, a->size, NULL };
}

/* A store with one value, t/a, whose P line a group commit has emptied away. */
static struct meta_inode one_value_unjournalled(struct ofs_store *s)
{
	struct meta_inode a;

	open_store(s);
	a = new_record(s, "a");
	ck_assert_int_eq(put(s, &a, "t/a", 5000, 1), 0);
	ck_assert_int_eq(ofs_store_sync(s, NULL, NULL), 0);
	return a;
}

/* The journal has a D line for vid (why: what it would mean if not). */
static void expect_d_line(uint64_t vid, const char *why)
{
	char line[64], *j = journal_text();

	snprintf(line, sizeof(line), "D %llu ", (unsigned long long)vid);
	ck_assert_msg(strstr(j, line), "%s: %s", why, j);
	free(j);
}

/*
 * fuse/ prepares an unlink before it takes its metadata lock, then again
 * under it: the second call costs nothing unless the journal was reset in
 * between, when it must write the line again (else a crash after the
 * record's deletion leaves the value unnamed).
 */
START_TEST(test_prepare_again_after_journal_reset)
{
	struct ofs_store s;
	struct meta_inode a = one_value_unjournalled(&s);
	struct kvb_map map = map_of(&a);
	char *j1, *j2, *j3, *j4, line[64];

	snprintf(line, sizeof(line), "D %llu ", (unsigned long long)a.page);
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	j1 = journal_text();
	ck_assert_msg(strstr(j1, line), "no D line after the first prepare: %s", j1);
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	j2 = journal_text();
	ck_assert_str_eq(j1, j2); /* already journalled and synced: nothing written */
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0); /* a group commit resets it */
	j3 = journal_text();
	ck_assert_msg(!strstr(j3, line), "the journal was not reset: %s", j3);
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	j4 = journal_text();
	ck_assert_msg(strstr(j4, line), "no D line after the reset: %s", j4);
	delete_crash_reopen(&s, a.ino);
	free(j1);
	free(j2);
	free(j3);
	free(j4);
}
END_TEST

/*
 * fdatasync, interposed for the whole test binary.  sync_hook_fail: the
 * next call fails with EIO.  sync_hook_armed: the next call starts a group
 * commit on another thread, as the daemon's syncer may run one, and waits
 * 100 ms before it syncs, long enough for that commit to finish were it
 * not held back; sync_hook_early says whether it finished in that time.
 */
static struct ofs_store *sync_hook_store;
static int sync_hook_armed, sync_hook_fail, sync_hook_early, sync_hook_done;
static pthread_t sync_hook_thread;

static void *sync_hook_commit(void *arg)
{
	(void)arg;
	ck_assert_int_eq(ofs_store_sync(sync_hook_store, &meta_mu, NULL), 0);
	__atomic_store_n(&sync_hook_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Whether fd is the journal. */
static int is_journal(int fd)
{
	char link[64], path[512];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return 0;
	path[n] = '\0';
	n = (ssize_t)strlen(path);
	return n >= 13 && strcmp(path + n - 13, "ubsio.journal") == 0;
}

/*
 * journal_sync_fail: the next sync of the journal fails with EIO.
 * journal_write_short: the next journal write stops half-way;
 * journal_write_cut = N: it stops N bytes short.  journal_trunc_fail: the
 * next ftruncate of the journal fails.
 */
static int journal_sync_fail, journal_write_short, journal_write_cut, journal_trunc_fail;

ssize_t write(int fd, const void *buf, size_t len)
{
	if ((journal_write_short || journal_write_cut) && len > 1 && is_journal(fd)) {
		size_t n = journal_write_short ? len / 2 : len - (size_t)journal_write_cut;

		journal_write_short = journal_write_cut = 0;
		return (ssize_t)syscall(SYS_write, fd, buf, n);
	}
	return (ssize_t)syscall(SYS_write, fd, buf, len);
}

int ftruncate(int fd, off_t len)
{
	if (journal_trunc_fail && is_journal(fd)) {
		journal_trunc_fail = 0;
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_ftruncate, fd, len);
}

int fdatasync(int fd)
{
	if (journal_sync_fail && is_journal(fd)) {
		journal_sync_fail = 0;
		errno = EIO;
		return -1;
	}
	if (sync_hook_fail) {
		sync_hook_fail = 0;
		errno = EIO;
		return -1;
	}
	if (sync_hook_armed) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		sync_hook_armed = 0;
		sync_hook_done = 0;
		ck_assert_int_eq(pthread_create(&sync_hook_thread, NULL, sync_hook_commit, NULL), 0);
		nanosleep(&ts, NULL);
		sync_hook_early = __atomic_load_n(&sync_hook_done, __ATOMIC_ACQUIRE);
	}
	return (int)syscall(SYS_fdatasync, fd);
}

/*
 * A group commit starting while remove_prepare syncs its line waits for
 * that sync (resets and syncs are serialised), and cannot then empty the
 * journal before the record is deleted (the prepare holds resets off).
 */
START_TEST(test_group_commit_during_prepare_sync)
{
	struct ofs_store s;
	struct meta_inode a = one_value_unjournalled(&s);
	struct kvb_map map = map_of(&a);

	sync_hook_store = &s;
	sync_hook_armed = 1;
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	ck_assert_msg(!sync_hook_armed, "the prepare did not sync");
	ck_assert_msg(!sync_hook_early, "a group commit ran during the prepare's sync");
	ck_assert_int_eq(pthread_join(sync_hook_thread, NULL), 0);
	expect_d_line(a.page, "the group commit emptied the journal");
	delete_crash_reopen(&s, a.ino);
}
END_TEST

/*
 * An overwrite with nothing (truncate to 0, close) lets the old value go
 * with no put: a group commit starting during its line's sync waits for
 * it, and the line outlives the commit (it counts as a put in flight
 * until the record changes, and the value is doomed after).
 */
START_TEST(test_group_commit_during_empty_commit)
{
	struct ofs_store s;
	struct meta_inode a = one_value_unjournalled(&s);
	uint64_t vid = a.page;

	sync_hook_store = &s;
	sync_hook_armed = 1;
	ck_assert_int_eq(put(&s, &a, "t/a", 0, 0), 0);
	ck_assert_msg(!sync_hook_armed, "the empty commit did not sync");
	ck_assert_msg(!sync_hook_early, "a group commit ran during the empty commit's sync");
	ck_assert_int_eq(pthread_join(sync_hook_thread, NULL), 0);
	ck_assert_int_eq(a.size, 0);
	expect_d_line(vid, "the old value's line is gone");
	/*
	 * A crash before the old value is deleted: the next start deletes it,
	 * or keeps it as the record's durable previous version (when the group
	 * commit made the old version durable first) until the next barrier.
	 */
	ofs_store_crash(&s);
	ck_assert_int_eq(count_values(kvdir), 1);
	open_store(&s);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 0);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A commit that lands while a barrier begins may get the generation after
 * the one the barrier syncs: the value it doomed must wait for the next
 * barrier, since the object's next commit keeps the version before it
 * for recovery.  The hook commits at the first point of the barrier where
 * the metadata lock is free, as another thread could.
 */
static void commit_6000(void *arg)
{
	struct store_obj *so = arg;

	ck_assert_int_eq(put(so->s, so->m, "t/a", 6000, 2), 0);
}

START_TEST(test_commit_during_barrier_keeps_its_prev)
{
	struct ofs_store s;
	struct meta_inode a;
	struct store_obj so;
	struct kvb_map prev;
	uint64_t csum;

	open_store(&s);
	a = new_record(&s, "a");
	ck_assert_int_eq(put(&s, &a, "t/a", 5000, 1), 0);
	ck_assert_int_eq(ofs_store_sync(&s, &meta_mu, NULL), 0);
	so = (struct store_obj){ &s, &a };
	ck_assert_int_eq(sync_with_commit_inside(&s, &meta_mu, commit_6000, &so), 0);
	expect(&s, &a, 6000, 2);
	/* Unless this barrier's generation covers it, the next commit keeps the first value. */
	ck_assert_int_eq(put(&s, &a, "t/a", 7000, 3), 0);
	ck_assert_int_eq(a.prev_bucket, 0);
	prev = (struct kvb_map){ a.prev_bucket, a.prev_page, a.prev_npages, a.prev_size, NULL };
	ck_assert_msg(kvb_checksum(&s.kvb, &prev, &csum) == 0 && csum == a.prev_csum,
		      "the value kept for recovery was deleted");
	ck_assert_int_eq(ofs_store_sync(&s, &meta_mu, NULL), 0);
	ck_assert_int_eq(ofs_store_sync(&s, &meta_mu, NULL), 0);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A group commit whose barrier has begun (its release may be about to
 * empty the journal) when a prepare writes its line: that release must
 * not empty the journal, since the record is deleted right after.
 */
START_TEST(test_prepare_holds_off_running_reset)
{
	struct ofs_store s;
	struct meta_inode a = one_value_unjournalled(&s);
	struct kvb_map map = map_of(&a);
	uint64_t mark;

	ck_assert_int_eq(kvb_barrier(&s.kvb, &mark), 0);
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	(void)kvb_release_freed(&s.kvb, mark);
	expect_d_line(a.page, "the release emptied the journal after the prepare");
	delete_crash_reopen(&s, a.ino);
}
END_TEST

/*
 * A reset whose sync fails has still written its V line: appends go after
 * it.  Counting the journal as empty made the cut-back of the next torn
 * append cut into the line before, already synced.
 */
START_TEST(test_failed_reset_keeps_journal_length)
{
	struct ofs_store s;
	struct meta_inode a, b, c;
	char *j, *pb, bline[256], prefix[64];
	size_t n;

	open_store(&s);
	a = new_record(&s, "a");
	b = new_record(&s, "b");
	c = new_record(&s, "c");
	ck_assert_int_eq(put(&s, &a, "t/a", 5000, 1), 0);
	journal_sync_fail = 1; /* the reset at the group commit's release */
	(void)ofs_store_sync(&s, NULL, NULL);
	ck_assert_msg(!journal_sync_fail, "no journal sync failed");
	ck_assert_int_eq(put(&s, &b, "t/b", 4000, 2), 0);
	j = journal_text();
	snprintf(prefix, sizeof(prefix), "P %llu ", (unsigned long long)b.page);
	pb = strstr(j, prefix);
	ck_assert_msg(pb, "no P line for b: %s", j);
	n = strcspn(pb, "\n") + 1;
	ck_assert_uint_lt(n, sizeof(bline));
	memcpy(bline, pb, n);
	bline[n] = '\0';
	free(j);
	journal_write_short = 1; /* c's P line is torn, and cut back */
	ck_assert_int_ne(put(&s, &c, "t/c", 3000, 3), 0);
	j = journal_text();
	ck_assert_msg(strstr(j, bline), "b's synced line was damaged: [%s]", j);
	free(j);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * Unlinks in every group-commit interval must not keep the journal from
 * being emptied: it would grow with every put, and the start replays it.
 */
START_TEST(test_journal_emptied_under_steady_unlinks)
{
	struct ofs_store s;
	char name[16], key[24], *j;
	int i, lines = 0;

	open_store(&s);
	for (i = 0; i < 20; i++) {
		struct meta_inode a;
		struct kvb_map map;

		snprintf(name, sizeof(name), "f%d", i);
		snprintf(key, sizeof(key), "t/f%d", i);
		a = new_record(&s, name);
		ck_assert_int_eq(put(&s, &a, key, 2000, (unsigned)i), 0);
		map = map_of(&a);
		ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
		ck_assert_int_eq(meta_delete(s.meta, a.ino), 0);
		ck_assert_int_eq(kvb_remove(&s.kvb, &map), 0);
		ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	}
	j = journal_text();
	for (char *p = j; (p = strchr(p, '\n')); p++)
		lines++;
	ck_assert_msg(lines <= 3, "the journal kept %d lines after 20 puts and unlinks: %s", lines, j);
	free(j);
	ck_assert_int_eq(count_values(kvdir), 0);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A D line torn one byte of key short, and not cut back (ftruncate
 * failed), then written whole by the prepare under the lock: replay must
 * delete under the whole key, not the torn one.
 */
START_TEST(test_torn_line_then_whole_line)
{
	struct ofs_store s;
	struct meta_inode a = one_value_unjournalled(&s);
	struct kvb_map map = map_of(&a);

	journal_write_cut = 3; /* the last key byte's two hex digits and the newline */
	journal_trunc_fail = 1;
	ck_assert_int_ne(kvb_remove_prepare(&s.kvb, &map), 0);
	ck_assert_msg(!journal_write_cut && !journal_trunc_fail, "the journal was not torn");
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	delete_crash_reopen(&s, a.ino);
}
END_TEST

/* How many times the journal has line (a substring). */
static int journal_count(const char *line)
{
	char *j = journal_text(), *p = j;
	int n = 0;

	while ((p = strstr(p, line))) {
		n++;
		p++;
	}
	free(j);
	return n;
}

/*
 * A failed journal sync: Linux reports a writeback error to one sync only,
 * so lines written before it count as lost, and the next prepare of a key
 * already journalled and synced writes and syncs its line again.
 */
START_TEST(test_prepare_after_failed_sync)
{
	struct ofs_store s;
	struct meta_inode a, b;
	struct kvb_map map;
	char line[64];

	open_store(&s);
	a = new_record(&s, "a");
	b = new_record(&s, "b");
	ck_assert_int_eq(put(&s, &a, "t/a", 5000, 1), 0);
	map = map_of(&a);
	snprintf(line, sizeof(line), " %llu ", (unsigned long long)a.page);
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	ck_assert_int_eq(journal_count(line), 1); /* the put's P line names it, synced */
	sync_hook_fail = 1; /* b's put: its journal sync fails */
	ck_assert_int_ne(put(&s, &b, "t/b", 3000, 2), 0);
	ck_assert_int_eq(kvb_remove_prepare(&s.kvb, &map), 0);
	ck_assert_int_eq(journal_count(line), 2);
	delete_crash_reopen(&s, a.ino);
}
END_TEST

/* Whether the library is in this process: RTLD_NOLOAD never loads it. */
/* Remove the stand-in's file for m's value: the store has evicted it. */
static void evict(struct ofs_store *s, const struct meta_inode *m)
{
	struct kvb_map map = { m->bucket, m->page, m->npages, m->size, NULL };
	char desc[4096], path[2048], *k;
	size_t i, n, o = 0;

	ck_assert_int_gt(kvb_describe(&s->kvb, &map, desc, sizeof(desc)), 0);
	k = strstr(desc, "key=");
	ck_assert_ptr_nonnull(k);
	k += 4;
	n = strcspn(k, "\n");
	ck_assert_uint_le(n, 100); /* one file, no "+" directories */
	o = (size_t)snprintf(path, sizeof(path), "%s/", kvdir);
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(path + o, sizeof(path) - o, "%02x", (unsigned char)k[i]);
	ck_assert_int_eq(unlink(path), 0);
}

/*
 * A value the store no longer has reads as -ENOENT, not as corruption: the
 * library evicts by itself, and Get of a missing key returns 7
 * (ubsio-kv/src/csrc/kvc/kv_operation.cpp, KvGetData: BioGet's NOT_FOUND).
 */
START_TEST(test_missing_value_reads_enoent)
{
	struct ofs_store s;
	struct meta_inode m;
	struct kvb_map map;
	char buf[100];

	open_store(&s);
	m = new_record(&s, "m");
	ck_assert_int_eq(put(&s, &m, "t/m", 10000, 1), 0);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	open_store(&s);
	ck_assert_int_eq(meta_get(s.meta, m.ino, &m), 0);
	evict(&s, &m);
	map = (struct kvb_map){ m.bucket, m.page, m.npages, m.size, NULL };
	ck_assert_int_eq(kvb_read(&s.kvb, &map, buf, sizeof(buf), 0), -ENOENT);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * The library's newest values live in a write-back cache inside the
 * process (ubsio-kv/src/csrc/kvc/dl_biosdk_api.cpp: the cache is created
 * WRITE_BACK), so a kill loses values whose records survived: after an
 * unclean stop every recorded value is probed, and files whose value is
 * gone are dropped.
 */
START_TEST(test_unclean_start_drops_missing)
{
	struct ofs_store s;
	struct meta_inode a, b, c;

	open_store(&s);
	a = new_record(&s, "a");
	b = new_record(&s, "b");
	c = new_record(&s, "c");
	ck_assert_int_eq(put(&s, &a, "t/a", 3000, 1), 0);
	ck_assert_int_eq(put(&s, &b, "t/b", 70000, 2), 0);
	ck_assert_int_eq(put(&s, &c, "t/c", 5000, 3), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	evict(&s, &b);
	ofs_store_crash(&s);

	open_store(&s);
	ck_assert_uint_eq(s.dropped_missing, 1);
	ck_assert_int_eq(meta_get(s.meta, b.ino, &b), -ENOENT);
	expect(&s, &a, 3000, 1);
	expect(&s, &c, 5000, 3);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	/* A clean stop probes nothing. */
	open_store(&s);
	ck_assert_uint_eq(s.dropped_missing, 0);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * Values up to a pool block (4 MiB) are read with BatchGet, longer ones
 * with Get: an older release's BatchGet cuts a longer value to its first
 * block without a word (its pool blocks are 4 MiB,
 * ubsio-boostio/src/sdk/mirror_client.cpp at 7e38ed07).  Run under both
 * BatchGet conventions (UBSIO_STUB_BATCHGET, see tests/meson.build).
 */
START_TEST(test_reads_use_batchget_and_get)
{
	struct ofs_store s;
	struct meta_inode small, big;
	char log[400];

	snprintf(log, sizeof(log), "%s/stub.log", dir);
	open_store(&s);
	small = new_record(&s, "small");
	big = new_record(&s, "big");
	ck_assert_int_eq(put(&s, &small, "t/small", 65537, 1), 0);
	ck_assert_int_eq(put(&s, &big, "t/big", (5 << 20) + 3, 2), 0);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	setenv("UBSIO_STUB_LOG", log, 1);
	open_store(&s);
	expect(&s, &small, 65537, 1);
	expect(&s, &big, (5 << 20) + 3, 2);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	unsetenv("UBSIO_STUB_LOG");
	ck_assert_int_eq(log_count(log, "BatchGet 1 0"), 1);
	ck_assert_int_eq(log_count(log, "Get "), 1);
	ck_assert_int_eq(log_count(log, "BatchGetDirect"), 0);
}
END_TEST

/*
 * A staged writer (obj_stage, what store/extent.c asks of each extent
 * filled in order, or when kv_buffer_max is reached): its bytes are put
 * then and its buffer freed; reads of its view come from that value, and
 * the commit records it without a second put.
 */
START_TEST(test_staged_value_is_the_commit)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_obj *o1, *o2;
	struct kvb_map empty = KVB_MAP_EMPTY, view;
	static char buf[700 << 10];
	char got[1000], log[400];

	snprintf(log, sizeof(log), "%s/stub.log", dir);
	setenv("UBSIO_STUB_LOG", log, 1);
	open_limited(&s, 0, 0, 1 << 20, KVB_UBSIO_KEY_MAX);
	a = new_record(&s, "a");
	fill(buf, sizeof(buf), 1);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "t/a", 3, &o1), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o1, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_int_eq(kvb_obj_stage(&s.kvb, o1), 0);
	ck_assert_int_eq(count_values(kvdir), 1);
	/* Its buffer is free: a second writer takes as much (ENOMEM in test_limits). */
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "t/b", 3, &o2), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o2, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	kvb_obj_close(&s.kvb, o2);
	kvb_obj_view(&s.kvb, o1, &view);
	ck_assert_uint_eq(view.size, sizeof(buf));
	ck_assert_int_eq(kvb_read(&s.kvb, &view, got, sizeof(got), 5000), (ssize_t)sizeof(got));
	ck_assert_mem_eq(got, buf + 5000, sizeof(got));
	ck_assert_int_eq(kvb_obj_dirty(&s.kvb, o1), 1);
	ck_assert_int_eq(ofs_store_commit(&s, &meta_mu, &a, o1), 0);
	kvb_obj_close(&s.kvb, o1);
	ck_assert_int_eq(log_count(log, "BatchPut "), 1);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	expect(&s, &a, sizeof(buf), 1);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	unsetenv("UBSIO_STUB_LOG");
}
END_TEST

/*
 * A change after the stage fetches the bytes back and dooms the staged
 * value; a staged writer closed without a commit dooms it; a failed
 * record change keeps it staged for the next commit.
 */
START_TEST(test_staged_changed_closed_failed)
{
	struct ofs_store s;
	struct meta_inode a, before;
	struct kvb_obj *o;
	struct kvb_map c, empty = KVB_MAP_EMPTY;
	char *want = malloc(100000), patch[10];

	open_store(&s);
	a = new_record(&s, "a");
	fill(want, 100000, 1);
	fill(patch, sizeof(patch), 2);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "t/a", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, want, 100000, 0), 100000);
	ck_assert_int_eq(kvb_obj_stage(&s.kvb, o), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, patch, sizeof(patch), 50000), sizeof(patch));
	memcpy(want + 50000, patch, sizeof(patch));
	ck_assert_int_eq(kvb_obj_stage(&s.kvb, o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&s.kvb, o, 90000), 0);
	ck_assert_int_eq(ofs_store_commit(&s, &meta_mu, &a, o), 0);
	kvb_obj_close(&s.kvb, o);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 1);
	c = (struct kvb_map){ a.bucket, a.page, a.npages, a.size, NULL };
	{
		char *got = malloc(90001);

		ck_assert_int_eq(kvb_read(&s.kvb, &c, got, 90001, 0), 90000);
		ck_assert_mem_eq(got, want, 90000);
		free(got);
	}

	/* Closed without a commit: the staged value goes, the committed one stays. */
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &c, "t/a", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, patch, sizeof(patch), 0), sizeof(patch));
	ck_assert_int_eq(kvb_obj_stage(&s.kvb, o), 0);
	ck_assert_int_eq(count_values(kvdir), 2);
	kvb_obj_close(&s.kvb, o);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 1);

	/* A record change that fails: still staged, and the next commit records it. */
	before = a;
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &c, "t/a", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, patch, sizeof(patch), 0), sizeof(patch));
	memcpy(want, patch, sizeof(patch));
	ck_assert_int_eq(kvb_obj_stage(&s.kvb, o), 0);
	meta_inject_fault(s.meta, 1);
	ck_assert_int_eq(ofs_store_commit(&s, &meta_mu, &a, o), -EIO);
	meta_inject_fault(s.meta, 0);
	ck_assert_uint_eq(a.page, before.page);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 2);
	ck_assert_int_eq(ofs_store_commit(&s, &meta_mu, &a, o), 0);
	kvb_obj_close(&s.kvb, o);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	{
		char *got = malloc(90001);

		c = (struct kvb_map){ a.bucket, a.page, a.npages, a.size, NULL };
		ck_assert_int_eq(kvb_read(&s.kvb, &c, got, 90001, 0), 90000);
		ck_assert_mem_eq(got, want, 90000);
		free(got);
	}
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	free(want);
}
END_TEST

/*
 * A crash with a staged value, after barriers that would have emptied the
 * journal: its P line stays, and the next start deletes the value and
 * keeps the committed version.  The crash is an image of ROOT and of the
 * KV store taken while the writer is open (the daemon's state on disk at
 * a kill -9), started from after the writer was let go.
 */
START_TEST(test_crash_with_staged_value)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_obj *o;
	struct kvb_map c, view;
	char patch[10], line[64], cmd[2048], *j;

	open_store(&s);
	a = new_record(&s, "a");
	ck_assert_int_eq(put(&s, &a, "t/a", 30000, 1), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	c = (struct kvb_map){ a.bucket, a.page, a.npages, a.size, NULL };
	fill(patch, sizeof(patch), 2);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &c, "t/a", 3, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, patch, sizeof(patch), 0), sizeof(patch));
	ck_assert_int_eq(kvb_obj_stage(&s.kvb, o), 0);
	kvb_obj_view(&s.kvb, o, &view);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(count_values(kvdir), 2);
	snprintf(line, sizeof(line), "P %llu ", (unsigned long long)view.page);
	j = journal_text();
	ck_assert_msg(strstr(j, line), "the staged value's P line is gone: %s", j);
	free(j);
	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s.img' && cp -a '%s' '%s.img'", dir, dir, kvdir,
		 kvdir);
	ck_assert_int_eq(system(cmd), 0);
	kvb_obj_close(&s.kvb, o);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s' && mv '%s.img' '%s' && mv '%s.img' '%s'", dir,
		 kvdir, dir, dir, kvdir, kvdir);
	ck_assert_int_eq(system(cmd), 0);

	open_store(&s);
	ck_assert_ptr_nonnull(strstr(s.start_msg, "1 orphaned values deleted (1 journalled"));
	ck_assert_int_eq(count_values(kvdir), 1);
	ck_assert_int_eq(meta_get(s.meta, a.ino, &a), 0);
	expect(&s, &a, 30000, 1);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

static int lib_mapped(void)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);

	if (h)
		dlclose(h); /* NOLOAD took a reference too */
	return h != NULL;
}

/*
 * The library is initialised once per process and let go (Exit) with the
 * last store that uses it, not before: two stores, two ROOTs.  It is never
 * unmapped: the real library's thread pools outlive Exit
 * (ubsio-kv/src/csrc/kvc/ubsio_kvc_instance.cpp, KvcInstance's pool).
 */
START_TEST(test_library_let_go_with_last_store)
{
	struct ofs_store a, b;
	char dir1[sizeof(dir)], cmd[600], log[400];

	snprintf(log, sizeof(log), "%s/stub.log", dir);
	setenv("UBSIO_STUB_LOG", log, 1);
	ck_assert(!kvb_ubsio_lib_in_use());
	open_store(&a);
	ck_assert(kvb_ubsio_lib_in_use());
	memcpy(dir1, dir, sizeof(dir));
	snprintf(dir, sizeof(dir), "%.240s.second", dir1);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	open_store(&b);
	ck_assert_int_eq(ofs_store_close(&a), 0);
	ck_assert_msg(kvb_ubsio_lib_in_use(), "let go while a store still uses it");
	ck_assert_int_eq(log_count(log, "Exit"), 0);
	ck_assert_int_eq(ofs_store_close(&b), 0);
	ck_assert_msg(!kvb_ubsio_lib_in_use(), "still in use after the last store closed");
	ck_assert_int_eq(log_count(log, "Init "), 1);
	ck_assert_int_eq(log_count(log, "Exit"), 1);
	ck_assert_msg(lib_mapped(), "the library was unmapped");
	/* A store opened later initialises the same mapping again. */
	open_store(&b);
	ck_assert_int_eq(log_count(log, "Init "), 2);
	ck_assert_int_eq(ofs_store_close(&b), 0);
	unsetenv("UBSIO_STUB_LOG");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(dir, dir1, sizeof(dir));
}
END_TEST

int main(int argc, char **argv)
{
	Suite *su = suite_create("ubsio");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-libubsio_kvc.so\n", argv[0]);
		return 2;
	}
	lib = argv[1];
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_overwrite_deletes_after_barrier);
	tcase_add_test(tc, test_failed_record_dooms_the_put);
	tcase_add_test(tc, test_crash_between_put_and_record);
	tcase_add_test(tc, test_crash_before_delete);
	tcase_add_test(tc, test_long_key_shortened);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_restart_finds_values);
	tcase_add_test(tc, test_vids_never_reused);
	tcase_add_test(tc, test_unlink_crash_after_record);
	tcase_add_test(tc, test_library_let_go_with_last_store);
	tcase_add_test(tc, test_missing_value_reads_enoent);
	tcase_add_test(tc, test_unclean_start_drops_missing);
	tcase_add_test(tc, test_reads_use_batchget_and_get);
	tcase_add_test(tc, test_prepare_again_after_journal_reset);
	tcase_add_test(tc, test_group_commit_during_prepare_sync);
	tcase_add_test(tc, test_prepare_after_failed_sync);
	tcase_add_test(tc, test_group_commit_during_empty_commit);
	tcase_add_test(tc, test_commit_during_barrier_keeps_its_prev);
	tcase_add_test(tc, test_prepare_holds_off_running_reset);
	tcase_add_test(tc, test_failed_reset_keeps_journal_length);
	tcase_add_test(tc, test_journal_emptied_under_steady_unlinks);
	tcase_add_test(tc, test_torn_line_then_whole_line);
	tcase_add_test(tc, test_staged_value_is_the_commit);
	tcase_add_test(tc, test_staged_changed_closed_failed);
	tcase_add_test(tc, test_crash_with_staged_value);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
