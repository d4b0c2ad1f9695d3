/*
 * Crash-consistency tests of a whole store (store/ over real bucket
 * files and a real database): failed metadata commits, and power cuts
 * simulated by restoring the files as they were at the last barrier.
 *
 * And an object's whole life through the store's own calls, as the daemon
 * makes them but without FUSE (test_object_life); a writer that finds the
 * store full waiting for the eviction worker
 * (test_writer_waits_for_the_eviction_worker), and a tenant at its quota
 * making that room from its own files (test_tenant_at_quota_makes_its_own_room),
 * and again when its writers outran a tick's pass (test_tick_quotas_again).
 *
 * Invariants checked after each scenario (DESIGN.md):
 *  1. committed runs are disjoint and in range (the rebuild succeeds, and
 *     free pages + pages of live objects = all pages: nothing leaked);
 *  2. every committed object's pages match its checksum.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <xxhash.h>

#include "helpers.h"
#include "kvb.h"
#include "kvb_hash.h"
#include "meta.h"
#include "meta_test.h"
#include "evict.h"
#include "ns.h"
#include "object.h"
#include "progress.h"
#include "store.h"

#define PS 4096u
#define NB 2u
#define BS (16 * PS)

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ofs-test-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void open_store(struct ofs_store *s)
{
	struct ofs_config cfg = { 0 };
	char err[512];

	cfg.root = dir;
	cfg.geom.page_size = PS;
	cfg.geom.bucket_size = BS;
	cfg.geom.bucket_count = NB;
	ck_assert_msg(ofs_store_open(s, &cfg, err, sizeof(err)) == 0, "%s", err);
}

/* Create name under the root with len bytes of pattern seed, committed. */
static struct meta_inode create(struct ofs_store *s, const char *name, size_t len, unsigned seed)
{
	struct meta_inode m = new_record(s, name);
	struct kvb_map empty = KVB_MAP_EMPTY;
	struct kvb_obj *o;
	char *buf = malloc(len + 1);

	ck_assert_int_eq(kvb_obj_open(&s->kvb, &empty, name, strlen(name), &o), 0);
	fill(buf, len, seed);
	ck_assert_int_eq(kvb_obj_write(&s->kvb, o, buf, len, 0), (ssize_t)len);
	ck_assert_int_eq(ofs_store_commit(s, NULL, &m, o), 0);
	kvb_obj_close(&s->kvb, o);
	free(buf);
	return m;
}

/* Overwrite m with len bytes of pattern seed (copy-on-write), committed. */
static int overwrite(struct ofs_store *s, struct meta_inode *m, size_t len, unsigned seed)
{
	struct kvb_map c = { m->bucket, m->page, m->npages, m->size, NULL };
	struct kvb_obj *o;
	char *buf = malloc(len + 1);
	int ret;

	ck_assert_int_eq(kvb_obj_open(&s->kvb, &c, "k", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&s->kvb, o, 0), 0);
	fill(buf, len, seed);
	ck_assert_int_eq(kvb_obj_write(&s->kvb, o, buf, len, 0), (ssize_t)len);
	ret = ofs_store_commit(s, NULL, m, o);
	kvb_obj_close(&s->kvb, o);
	free(buf);
	return ret;
}

/*
 * Write len bytes of pattern seed at off of m's committed content through
 * a new writer (copy-on-write in place, as an msync or a pwrite), and
 * commit; want (m's content) gets them too.
 */
static int patch(struct ofs_store *s, struct meta_inode *m, char *want, size_t len, uint64_t off,
		 unsigned seed)
{
	struct kvb_map c = { m->bucket, m->page, m->npages, m->size, NULL };
	struct kvb_obj *o;
	int ret;

	fill(want + off, len, seed);
	ck_assert_int_eq(kvb_obj_open(&s->kvb, &c, "k", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_write(&s->kvb, o, want + off, len, off), (ssize_t)len);
	ret = ofs_store_commit(s, NULL, m, o);
	kvb_obj_close(&s->kvb, o);
	return ret;
}

static void expect_content(struct ofs_store *s, const char *name, size_t len, unsigned seed)
{
	struct meta_inode m;
	struct kvb_map map;
	char *want = malloc(len + 1), *got = malloc(len + 1);

	ck_assert_int_eq(meta_lookup(s->meta, META_ROOT_INO, name, strlen(name), &m), 0);
	ck_assert_uint_eq(m.size, len);
	map = (struct kvb_map){ m.bucket, m.page, m.npages, m.size, NULL };
	fill(want, len, seed);
	ck_assert_int_eq(kvb_read(&s->kvb, &map, got, len + 1, 0), (ssize_t)len);
	ck_assert_mem_eq(got, want, len);
	free(want);
	free(got);
}

struct inv {
	struct ofs_store *s;
	uint64_t pages;
	int bad;
};

static int inv_one(void *ctx, const struct meta_inode *in)
{
	struct inv *v = ctx;
	struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };
	uint64_t csum;

	v->pages += in->npages;
	if (kvb_checksum_ok(&v->s->kvb, &map, in->csum, &csum) != 1)
		v->bad++;
	return 0;
}

/* Invariants 1 and 2 on a freshly opened store. */
static void check_invariants(struct ofs_store *s)
{
	struct inv v = { .s = s };
	struct kvb_statfs st;

	ck_assert_int_eq(meta_foreach_mapping(s->meta, inv_one, &v), 0);
	ck_assert_int_eq(v.bad, 0);
	ck_assert_int_eq(kvb_statfs(&s->kvb, &st), 0);
	ck_assert_uint_eq(st.blocks - st.blocks_free, v.pages);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s' 2>/dev/null || rm -f '%s'", from,
		 to, to);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * Copy the store's files aside (save) or back (restore): the files as a
 * power cut would leave them, as of the moment they were saved.
 */
static void image(const char *tag, int with_meta, int with_data, int restore)
{
	const char *names[] = { "offloadfs.db", "offloadfs.db-wal", "bucket_00.data",
				"bucket_01.data" };
	char live[600], saved[600];
	unsigned i;

	for (i = 0; i < 4; i++) {
		if ((i < 2 && !with_meta) || (i >= 2 && !with_data))
			continue;
		snprintf(live, sizeof(live), "%s/%s", dir, names[i]);
		snprintf(saved, sizeof(saved), "%s/.%s.%s", dir, tag, names[i]);
		if (!restore) {
			copy_file(live, saved);
		} else if (access(saved, F_OK) == 0) {
			copy_file(saved, live);
			unlink(saved);
		} else {
			unlink(live);
		}
	}
}

static void save_image(const char *tag, int with_meta, int with_data)
{
	image(tag, with_meta, with_data, 0);
}

static void restore_image(const char *tag, int with_meta, int with_data)
{
	image(tag, with_meta, with_data, 1);
}

START_TEST(test_failed_metadata_commit)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_statfs before, after;

	open_store(&s);
	a = create(&s, "a", 3 * PS + 7, 1);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &before), 0);
	/* The overwrite's record update fails: EIO, old content, nothing leaked. */
	meta_inject_fault(s.meta, 1);
	ck_assert_int_eq(overwrite(&s, &a, 5 * PS, 2), -EIO);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &after), 0);
	ck_assert_uint_eq(after.blocks_free, before.blocks_free);
	expect_content(&s, "a", 3 * PS + 7, 1);
	/* And the next attempt works, freeing the old run at the barrier. */
	ck_assert_int_eq(overwrite(&s, &a, 5 * PS, 2), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &after), 0);
	ck_assert_uint_eq(after.blocks_free, before.blocks_free + 4 - 5);
	expect_content(&s, "a", 5 * PS, 2);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	open_store(&s);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

START_TEST(test_failed_write_in_the_middle)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_statfs before, after;
	struct kvb_map c;
	struct kvb_obj *o;
	char buf[PS];

	open_store(&s);
	a = create(&s, "a", 2 * PS, 1);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &before), 0);
	/* A write that cannot fit half way through a growing file: the writer sees
	 * EFBIG, the pages the earlier writes took are freed at close. */
	c = (struct kvb_map){ a.bucket, a.page, a.npages, a.size, NULL };
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &c, "a", 1, &o), 0);
	memset(buf, 'z', sizeof(buf));
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, PS, 2 * PS), PS);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, PS, BS), -EFBIG);
	kvb_obj_close(&s.kvb, o);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &after), 0);
	ck_assert_uint_eq(after.blocks_free, before.blocks_free);
	expect_content(&s, "a", 2 * PS, 1);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

START_TEST(test_power_cut_loses_only_unsynced)
{
	struct ofs_store s;
	struct meta_inode a, b;
	uint64_t i;

	open_store(&s);
	a = create(&s, "a", 3 * PS, 1);
	b = create(&s, "b", PS + 1, 2);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	save_image("cut", 1, 0);
	/* After the barrier: overwrite a, unlink b, fill the space b held. */
	ck_assert_int_eq(overwrite(&s, &a, 2 * PS, 3), 0);
	ck_assert_int_eq(meta_delete(s.meta, b.ino), 0);
	{
		struct kvb_map bm = { b.bucket, b.page, b.npages, b.size, NULL };

		ck_assert_int_eq(kvb_remove(&s.kvb, &bm), 0);
	}
	for (i = 0; i < 6; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
		create(&s, name, PS, (unsigned)(10 + i));
	}
	/*
	 * Power cut: the metadata as at the barrier, but the data written
	 * since (on pages b or a's old version held) reached the disk.  Only
	 * never reusing freed pages before the barrier keeps a and b intact.
	 */
	ofs_store_crash(&s);
	restore_image("cut", 1, 0);
	open_store(&s);
	ck_assert_int_eq(s.was_clean, 0);
	expect_content(&s, "a", 3 * PS, 1);
	expect_content(&s, "b", PS + 1, 2);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

START_TEST(test_power_cut_keeps_metadata_loses_data)
{
	struct ofs_store s;
	struct meta_inode a;

	/*
	 * The worst order: the WAL reached the disk (the OS wrote it back) but
	 * the new pages did not.  Recovery finds the unsynced versions whose
	 * pages do not match, and falls back to the last synced one.
	 */
	open_store(&s);
	a = create(&s, "a", 3 * PS, 1);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	save_image("data", 0, 1);
	ck_assert_int_eq(overwrite(&s, &a, 2 * PS, 3), 0);
	create(&s, "fresh", PS, 4);
	ofs_store_crash(&s);
	restore_image("data", 0, 1);
	open_store(&s);
	ck_assert_uint_eq(s.reverted, 1);
	ck_assert_uint_eq(s.dropped_corrupt, 1);
	expect_content(&s, "a", 3 * PS, 1);
	{
		struct meta_inode m;

		ck_assert_int_eq(meta_lookup(s.meta, META_ROOT_INO, "fresh", 5, &m), -ENOENT);
	}
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A commit after a write in place hashes only the pages written, with the
 * committed version's page sums from its record: its checksum is the sum
 * of the page sums (kvb_hash.h).  A kill keeps it (recovery accepts that
 * kind); a power cut that lost its pages falls back to the version before.
 */
START_TEST(test_overwrite_in_place_checksum)
{
	static char want[8 * PS], old[8 * PS];
	struct ofs_store s;
	struct meta_inode a;
	int cut;

	for (cut = 0; cut < 2; cut++) {
		open_store(&s);
		a = create(&s, "a", sizeof(want), 1);
		fill(want, sizeof(want), 1);
		memcpy(old, want, sizeof(old));
		ck_assert_uint_eq(a.csum, XXH3_64bits(want, sizeof(want)));
		ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
		if (cut)
			save_image("inplace", 0, 1); /* the bucket files as of the barrier */
		ck_assert_int_eq(patch(&s, &a, want, 100, 3 * PS + 50, 2), 0);
		ck_assert_uint_eq(a.csum, kvb_pages_sum_buf(want, sizeof(want), PS));
		ck_assert_uint_ne(a.csum, XXH3_64bits(want, sizeof(want)));
		{
			/* Its page sums are the bytes' own. */
			uint64_t pcs[8], p;

			ck_assert_int_eq(meta_pcsums_get(s.meta, a.ino, pcs, 8), 0);
			for (p = 0; p < 8; p++)
				ck_assert_uint_eq(pcs[p], XXH3_64bits(want + p * PS, PS));
		}
		ofs_store_crash(&s);
		if (cut)
			restore_image("inplace", 0, 1);
		open_store(&s);
		ck_assert_uint_eq(s.reverted, (unsigned)cut);
		ck_assert_uint_eq(s.dropped_corrupt, 0);
		{
			struct meta_inode m;
			struct kvb_map map;
			char got[sizeof(want)];

			ck_assert_int_eq(meta_lookup(s.meta, META_ROOT_INO, "a", 1, &m), 0);
			map = (struct kvb_map){ m.bucket, m.page, m.npages, m.size, NULL };
			ck_assert_int_eq(kvb_read(&s.kvb, &map, got, sizeof(got), 0),
					 (ssize_t)sizeof(got));
			ck_assert_mem_eq(got, cut ? old : want, sizeof(got));
		}
		check_invariants(&s);
		ck_assert_int_eq(ofs_store_close(&s), 0);
		teardown();
		setup();
	}
}
END_TEST

START_TEST(test_kill_keeps_everything_committed)
{
	struct ofs_store s;
	struct meta_inode a;

	/* A daemon kill loses nothing that was committed, synced or not. */
	open_store(&s);
	a = create(&s, "a", 3 * PS, 1);
	ck_assert_int_eq(overwrite(&s, &a, 2 * PS, 3), 0);
	create(&s, "b", 5, 4);
	ofs_store_crash(&s);
	open_store(&s);
	ck_assert_uint_eq(s.reverted, 0);
	ck_assert_uint_eq(s.dropped_corrupt, 0);
	expect_content(&s, "a", 2 * PS, 3);
	expect_content(&s, "b", 5, 4);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * fsync and fdatasync, interposed for the whole test binary (sqlite's
 * calls included): while watching, count the syncs of the metadata log
 * (and those made with the metadata lock held) and of the database; on
 * request, fail the next syncs of either, or run commits inside a sync of
 * the log made without the lock, as another thread could.
 */
static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static int watch_syncs;
static unsigned log_syncs, log_syncs_locked, db_syncs;
/* The next N syncs of the log, or of the database, fail with EIO. */
static unsigned fail_log_syncs, fail_db_syncs;

static void commits_past_checkpoint(struct ofs_store *s, int from, pthread_mutex_t *lock);
/* When set, the next sync of the log made without the lock first runs these commits. */
static struct ofs_store *commit_during_sync;

/* 0, or -1 with errno set when this sync is to fail. */
static int seen_sync(int fd)
{
	char link[64], path[4096];
	ssize_t n;
	int db, wal;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	db = n >= 12 && !memcmp(path + n - 12, "offloadfs.db", 12);
	wal = n >= 4 && !memcmp(path + n - 4, "-wal", 4);
	if (wal && commit_during_sync && pthread_mutex_trylock(&meta_lock) == 0) {
		struct ofs_store *st = commit_during_sync;

		/* Another thread's commits, whose checkpoint's sync fails. */
		pthread_mutex_unlock(&meta_lock);
		commit_during_sync = NULL;
		fail_log_syncs = 1;
		commits_past_checkpoint(st, 100000, &meta_lock);
		ck_assert_uint_eq(fail_log_syncs, 0);
	}
	if ((db && fail_db_syncs && fail_db_syncs--) || (wal && fail_log_syncs && fail_log_syncs--)) {
		errno = EIO;
		return -1;
	}
	if (!watch_syncs)
		return 0;
	if (db)
		db_syncs++;
	if (!wal)
		return 0;
	log_syncs++;
	/* Held by this thread or another, trylock fails. */
	if (pthread_mutex_trylock(&meta_lock) == 0)
		pthread_mutex_unlock(&meta_lock);
	else
		log_syncs_locked++;
	return 0;
}

int fsync(int fd)
{
	return seen_sync(fd) ? -1 : (int)syscall(SYS_fsync, fd);
}

int fdatasync(int fd)
{
	return seen_sync(fd) ? -1 : (int)syscall(SYS_fdatasync, fd);
}

/*
 * The barrier's fsync of the metadata log runs without the metadata lock:
 * on a shared ROOT it is a network round trip, and every request that
 * touches metadata would wait for it.  It still makes the barrier's
 * record durable: the reopened store reads the generation back.
 */
START_TEST(test_log_sync_outside_the_lock)
{
	struct ofs_store s;
	uint64_t g;

	open_store(&s);
	create(&s, "a", 2 * PS, 1);
	watch_syncs = 1;
	ck_assert_int_eq(ofs_store_sync(&s, &meta_lock, NULL), 0);
	create(&s, "b", 3, 2);
	ck_assert_int_eq(ofs_store_sync(&s, &meta_lock, NULL), 0);
	watch_syncs = 0;
	ck_assert_uint_ge(log_syncs, 2);
	ck_assert_uint_eq(log_syncs_locked, 0);
	g = s.synced_gen;
	ck_assert_uint_ge(g, 2);
	ofs_store_crash(&s);
	open_store(&s);
	ck_assert_uint_eq(s.synced_gen, g);
	expect_content(&s, "a", 2 * PS, 1);
	expect_content(&s, "b", 3, 2);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* count namespace commits (NEW entries k<from>...), each under lock if given. */
static void namespace_commits(struct ofs_store *s, int from, int count, pthread_mutex_t *lock)
{
	char name[32];
	int i;

	for (i = from; i < from + count; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		if (lock)
			pthread_mutex_lock(lock);
		new_record(s, name);
		if (lock)
			pthread_mutex_unlock(lock);
	}
}

/* Namespace commits past the checkpoint threshold: some 8,000 pages of log. */
static void commits_past_checkpoint(struct ofs_store *s, int from, pthread_mutex_t *lock)
{
	namespace_commits(s, from, 1500, lock);
}

/*
 * Commits never fsync: sqlite's checkpoint, which syncs the log and the
 * database inside whichever commit fills the log, waits for 16 MiB of log
 * instead of 4 MiB.
 */
/*
 * A commit that lands while a barrier begins: its record may get the
 * generation after the one the barrier syncs, so the old run it freed
 * must wait for the next barrier (DESIGN.md, rule 6).  The hook runs that
 * commit at the first point of the barrier where the metadata lock is
 * free, as another thread's commit could.
 */
/* The object's next version (v1): two pages of seed 2. */
static void commit_v1(void *arg)
{
	struct store_obj *so = arg;
	struct kvb_map c = { so->m->bucket, so->m->page, so->m->npages, so->m->size, NULL };
	struct kvb_obj *o;
	char buf[2 * PS];

	ck_assert_int_eq(kvb_obj_open(&so->s->kvb, &c, "a", 1, &o), 0);
	ck_assert_int_eq(kvb_obj_truncate(&so->s->kvb, o, 0), 0);
	fill(buf, sizeof(buf), 2);
	ck_assert_int_eq(kvb_obj_write(&so->s->kvb, o, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_int_eq(ofs_store_commit(so->s, &meta_lock, so->m, o), 0);
	kvb_obj_close(&so->s->kvb, o);
}

/* One-page objects until the store is full; how many. */
static unsigned fill_up(struct ofs_store *s)
{
	unsigned n;

	for (n = 0;; n++) {
		struct kvb_map empty = KVB_MAP_EMPTY;
		struct meta_inode m;
		struct kvb_obj *o;
		char name[16], buf[PS];
		int ret;

		snprintf(name, sizeof(name), "f%u", n);
		m = new_record(s, name);
		ck_assert_int_eq(kvb_obj_open(&s->kvb, &empty, name, strlen(name), &o), 0);
		fill(buf, PS, 100 + n);
		ret = (int)kvb_obj_write(&s->kvb, o, buf, PS, 0);
		if (ret == (int)PS)
			ret = ofs_store_commit(s, NULL, &m, o);
		kvb_obj_close(&s->kvb, o);
		if (ret) {
			ck_assert_int_eq(ret, -ENOSPC);
			return n;
		}
	}
}

/* Copy the pages of run m in the bucket file back from the saved image "tag" (then dropped). */
static void revert_run(const char *tag, const struct meta_inode *m)
{
	char live[600], saved[600], buf[PS];
	uint64_t i;
	int fl, fs;

	snprintf(live, sizeof(live), "%s/bucket_%02x.data", dir, (unsigned)m->bucket);
	snprintf(saved, sizeof(saved), "%s/.%s.bucket_%02x.data", dir, tag, (unsigned)m->bucket);
	fl = open(live, O_WRONLY);
	fs = open(saved, O_RDONLY);
	ck_assert_int_ge(fl, 0);
	ck_assert_int_ge(fs, 0);
	for (i = 0; i < m->npages; i++) {
		off_t at = (off_t)((m->page + i) * PS);

		memset(buf, 0, sizeof(buf));
		ck_assert_int_ge(pread(fs, buf, PS, at), 0);
		ck_assert_int_eq(pwrite(fl, buf, PS, at), (ssize_t)PS);
	}
	close(fl);
	close(fs);
	for (i = 0; i < NB; i++) {
		snprintf(saved, sizeof(saved), "%s/.%s.bucket_%02x.data", dir, tag, (unsigned)i);
		unlink(saved);
	}
}

START_TEST(test_commit_during_barrier_keeps_its_prev)
{
	struct ofs_store s;
	struct meta_inode a;
	struct store_obj so;
	struct kvb_map prev;
	uint64_t csum;

	open_store(&s);
	a = create(&s, "a", PS, 1);
	ck_assert_int_eq(ofs_store_sync(&s, &meta_lock, NULL), 0);
	/* The barrier: a overwritten (v1) as it begins. */
	so = (struct store_obj){ &s, &a };
	ck_assert_int_eq(sync_with_commit_inside(&s, &meta_lock, commit_v1, &so), 0);
	ck_assert_uint_eq(a.size, 2 * PS);
	save_image("cut", 0, 1);
	/*
	 * a again (v2), then every free page written.  Unless this barrier's
	 * generation covers v1, the record keeps v0 for recovery: its pages
	 * must not have been given out.
	 */
	ck_assert_int_eq(overwrite(&s, &a, 3 * PS, 3), 0);
	fill_up(&s);
	ck_assert_int_ne(a.prev_bucket, -1);
	prev = (struct kvb_map){ a.prev_bucket, a.prev_page, a.prev_npages, a.prev_size, NULL };
	ck_assert_int_eq(kvb_checksum(&s.kvb, &prev, &csum), 0);
	ck_assert_msg(csum == a.prev_csum, "the version kept for recovery was overwritten");
	/* Power cut: v2's record reached the disk, its pages did not. */
	ofs_store_crash(&s);
	revert_run("cut", &a);
	open_store(&s);
	ck_assert_uint_eq(s.reverted, 1);
	expect_content(&s, "a", (size_t)a.prev_size, a.prev_size == PS ? 1 : 2);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

START_TEST(test_commits_do_not_fsync)
{
	struct ofs_store s;

	open_store(&s);
	log_syncs = 0;
	watch_syncs = 1;
	/*
	 * Namespace commits (the bucket files hold a few objects only): some
	 * 2,100 pages of log, twice sqlite's default threshold and half of
	 * ours.
	 */
	namespace_commits(&s, 0, 400, NULL);
	create(&s, "a", 2 * PS, 1);
	watch_syncs = 0;
	ck_assert_uint_eq(log_syncs, 0);
	ck_assert_uint_eq(db_syncs, 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	open_store(&s);
	expect_content(&s, "a", 2 * PS, 1);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

static off_t log_size(void)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "%s/offloadfs.db-wal", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

/*
 * A failed sync of the log may have lost commits that no later sync
 * brings back: barriers fail, and release nothing, until a checkpoint has
 * copied the whole log into the database and synced it.
 */
START_TEST(test_failed_log_sync_holds_releases)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_statfs before, st;

	open_store(&s);
	a = create(&s, "a", 3 * PS, 1);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(overwrite(&s, &a, 2 * PS, 2), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &before), 0);

	fail_log_syncs = 1;
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), -EIO);
	ck_assert_uint_eq(fail_log_syncs, 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st), 0);
	ck_assert_uint_eq(st.blocks_free, before.blocks_free);
	/* The next barrier checkpoints first; the database's sync fails. */
	fail_db_syncs = 1;
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), -EIO);
	ck_assert_uint_eq(fail_db_syncs, 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st), 0);
	ck_assert_uint_eq(st.blocks_free, before.blocks_free);
	/*
	 * Then it works: the database is synced, the log emptied (replayed
	 * after a crash, it would lay older pages over the copied ones), and
	 * the old run is released.
	 */
	db_syncs = 0;
	watch_syncs = 1;
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	watch_syncs = 0;
	ck_assert_uint_ge(db_syncs, 1);
	ck_assert_int_eq(log_size(), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st), 0);
	ck_assert_uint_eq(st.blocks_free, before.blocks_free + 3);
	/* And the barrier after it needs no checkpoint. */
	db_syncs = 0;
	watch_syncs = 1;
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	watch_syncs = 0;
	ck_assert_uint_eq(db_syncs, 0);
	expect_content(&s, "a", 2 * PS, 2);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	open_store(&s);
	expect_content(&s, "a", 2 * PS, 2);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * The same when the failed sync was the automatic checkpoint's, inside a
 * commit (sqlite drops that error): the next barrier checkpoints first.
 */
START_TEST(test_failed_checkpoint_sync_is_kept)
{
	struct ofs_store s;

	open_store(&s);
	fail_db_syncs = 1;
	commits_past_checkpoint(&s, 0, NULL);
	ck_assert_uint_eq(fail_db_syncs, 0);
	db_syncs = 0;
	watch_syncs = 1;
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	watch_syncs = 0;
	ck_assert_uint_ge(db_syncs, 1);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A checkpoint in another thread's commit, running while the barrier syncs
 * the log without the lock, may take the write error the barrier's own
 * sync would have seen: that barrier fails too, rather than release.
 */
START_TEST(test_failure_taken_by_a_checkpoint_meanwhile)
{
	struct ofs_store s;
	struct meta_inode a;
	struct kvb_statfs before, st;

	open_store(&s);
	a = create(&s, "a", 3 * PS, 1);
	ck_assert_int_eq(ofs_store_sync(&s, &meta_lock, NULL), 0);
	ck_assert_int_eq(overwrite(&s, &a, 2 * PS, 2), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &before), 0);
	commit_during_sync = &s;
	ck_assert_int_eq(ofs_store_sync(&s, &meta_lock, NULL), -EIO);
	ck_assert_ptr_null(commit_during_sync);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st), 0);
	ck_assert_uint_eq(st.blocks_free, before.blocks_free);
	/* The next one empties the log and releases. */
	ck_assert_int_eq(ofs_store_sync(&s, &meta_lock, NULL), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &st), 0);
	ck_assert_uint_eq(st.blocks_free, before.blocks_free + 3);
	expect_content(&s, "a", 2 * PS, 2);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST


/* The bytes of a read, wherever the store put them. */
static void bytes_copy(const struct ofs_bytes *b, char *out, size_t n)
{
	if (b->fd >= 0)
		ck_assert_int_eq(pread(b->fd, out, n, b->pos), (ssize_t)n);
	else
		memcpy(out, b->ptr, n);
}

/*
 * A tenant and a file made, written, committed, read back, renamed,
 * unlinked while open (detached, then deleted at its last close), and the
 * tenant removed: the daemon's sequence of store calls, without FUSE.
 */
/*
 * Recency: an object opened many times between two writes of atimes is
 * queued once, its latest atime kept; after the write it is queued again.
 */
START_TEST(test_atime_queued_once_a_round)
{
	struct ofs_object a = { 0 }, b = { 0 };
	struct ofs_store s;
	int i;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	a.m.ino = 1001;
	b.m.ino = 1002;
	pthread_mutex_lock(&s.lock);
	for (i = 0; i < 100; i++)
		(void)ofs_evict_touch(&s, &a);
	(void)ofs_evict_touch(&s, &b);
	(void)ofs_evict_touch(&s, &a);
	ck_assert_uint_eq(s.evict.ndirty, 2);
	ck_assert_uint_eq(s.evict.dirty[0], 1001);
	ck_assert_int_eq(s.evict.dirty_atime[0], a.m.atime);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ck_assert_uint_eq(s.evict.ndirty, 0);
	pthread_mutex_lock(&s.lock);
	(void)ofs_evict_touch(&s, &a);
	ck_assert_uint_eq(s.evict.ndirty, 1);
	pthread_mutex_unlock(&s.lock);
	/* As the daemon ends: the list let go, then the store closed. */
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

static uint64_t moved_ino;

static void moved_fn(void *arg, uint64_t ino)
{
	(void)arg;
	moved_ino = ino;
}

/*
 * A use that finds no object in memory (a batch lookup) is queued alone,
 * once a round however often it is used (its slot takes the later
 * time), and written at the next write of atimes, the latest use of each
 * inode;
 * an object loaded between the use and the write takes the later time,
 * and the daemon is told (evict.moved) so the kernel drops the older one.
 */
START_TEST(test_atime_without_object)
{
	struct ofs_object b = { 0 };
	struct meta_inode a, bm, got;
	struct ofs_store s;
	int64_t first, last;
	int i;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	s.evict.moved = moved_fn;
	a = create(&s, "a", 100, 1);
	bm = create(&s, "b", 100, 2);
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, a.ino, ofs_now()), 0);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, bm.ino, ofs_now()), 0);
	first = s.evict.dirty_atime[0];
	usleep(2000);
	for (i = 0; i < 1000; i++)
		ck_assert_int_eq(ofs_evict_touch_ino(&s, a.ino, ofs_now()), 0);
	ck_assert_uint_eq(s.evict.ndirty, 2);
	ck_assert_uint_eq(s.evict.dirty[0], a.ino);
	last = s.evict.dirty_atime[0];
	ck_assert_int_gt(last, first);
	b.m = bm; /* loaded since its use: the record's older atime */
	ck_assert_int_eq(ofs_object_insert(&s, &b), 0);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ck_assert_uint_eq(s.evict.ndirty, 0);
	ck_assert_int_eq(meta_get(s.meta, a.ino, &got), 0);
	ck_assert_int_eq(got.atime, last);
	ck_assert_int_eq(meta_get(s.meta, bm.ino, &got), 0);
	ck_assert_int_gt(got.atime, bm.atime);
	ck_assert_int_eq(b.m.atime, got.atime);
	ck_assert_uint_eq(moved_ino, bm.ino);
	pthread_mutex_lock(&s.lock);
	ofs_object_remove(&s, &b);
	/* A new round: queued anew, not into the last round's slot. */
	ck_assert_int_eq(ofs_evict_touch_ino(&s, a.ino, ofs_now()), 0);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, a.ino, ofs_now()), 0);
	ck_assert_uint_eq(s.evict.ndirty, 1);
	ck_assert_uint_eq(s.evict.dirty[0], a.ino);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A utimens after such a use, on the object loaded since, is kept: the
 * queued use is older than the explicit time, whatever its value.
 */
START_TEST(test_atime_set_after_use_kept)
{
	struct ofs_object b = { 0 };
	struct meta_inode bm, m, got;
	struct ofs_store s;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	bm = create(&s, "b", 100, 2);
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, bm.ino, ofs_now()), 0);
	b.m = bm;
	ck_assert_int_eq(ofs_object_insert(&s, &b), 0);
	m = b.m;
	m.atime = 1000000000LL; /* touch -a -d @1 */
	ck_assert_int_eq(ofs_object_update(&s, &b, &m), 0);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ck_assert_int_eq(meta_get(s.meta, bm.ino, &got), 0);
	ck_assert_int_eq(got.atime, 1000000000LL);
	ck_assert_int_eq(b.m.atime, 1000000000LL);
	pthread_mutex_lock(&s.lock);
	ofs_object_remove(&s, &b);
	pthread_mutex_unlock(&s.lock);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A use queued by an open, then a utimens, then the object leaves memory
 * (the kernel forgot the inode) before the write of atimes: the time set
 * is written, not the older use.  A use after the object left (a batch
 * lookup) is newer than the utimens: it wins.
 */
START_TEST(test_atime_set_then_forgotten_kept)
{
	struct ofs_object b = { 0 }, c = { 0 };
	struct meta_inode bm, cm, m, got;
	struct ofs_store s;
	int64_t later;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	bm = create(&s, "b", 100, 2);
	cm = create(&s, "c", 100, 3);
	pthread_mutex_lock(&s.lock);
	b.m = bm;
	c.m = cm;
	ck_assert_int_eq(ofs_object_insert(&s, &b), 0);
	ck_assert_int_eq(ofs_object_insert(&s, &c), 0);
	(void)ofs_evict_touch(&s, &b); /* touch(1) opens the file */
	(void)ofs_evict_touch(&s, &c);
	m = b.m;
	m.atime = 1000000000LL; /* then sets its times: touch -a -d @1 */
	ck_assert_int_eq(ofs_object_update(&s, &b, &m), 0);
	m = c.m;
	m.atime = 2000000000LL;
	ck_assert_int_eq(ofs_object_update(&s, &c, &m), 0);
	ofs_object_remove(&s, &b); /* forgotten before the write of atimes */
	ofs_object_remove(&s, &c);
	usleep(1000);
	later = ofs_now();
	ck_assert_int_eq(ofs_evict_touch_ino(&s, cm.ino, later), 0);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ck_assert_int_eq(meta_get(s.meta, bm.ino, &got), 0);
	ck_assert_int_eq(got.atime, 1000000000LL);
	ck_assert_int_eq(meta_get(s.meta, cm.ino, &got), 0);
	ck_assert_int_eq(got.atime, later);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A use that comes after a utimens wins whatever time was set, in the
 * future or the past: the object opened after touch -a -d.  b: opened, set
 * to the future, forgotten, then used by a batch lookup.  c: used by a
 * batch lookup before it was loaded (its loose slot), set to the past,
 * forgotten, then used again.  d: used while out of memory, loaded, set
 * to the future, forgotten, no use since: the time set stays.  e: as b,
 * then loaded again before the write of atimes, from the record that
 * holds the future time.
 */
START_TEST(test_atime_use_after_set_wins)
{
	struct ofs_object b = { 0 }, c = { 0 }, d = { 0 }, e = { 0 }, e2 = { 0 };
	struct meta_inode bm, cm, dm, em, m, got;
	int64_t future = ofs_now() + 365 * 86400LL * 1000000000LL, later;
	struct ofs_store s;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	bm = create(&s, "b", 100, 2);
	cm = create(&s, "c", 100, 3);
	dm = create(&s, "d", 100, 4);
	em = create(&s, "e", 100, 5);
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, cm.ino, ofs_now()), 0);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, dm.ino, ofs_now()), 0);
	b.m = bm;
	c.m = cm;
	d.m = dm;
	e.m = em;
	ck_assert_int_eq(ofs_object_insert(&s, &b), 0);
	ck_assert_int_eq(ofs_object_insert(&s, &c), 0);
	ck_assert_int_eq(ofs_object_insert(&s, &d), 0);
	ck_assert_int_eq(ofs_object_insert(&s, &e), 0);
	(void)ofs_evict_touch(&s, &b);
	(void)ofs_evict_touch(&s, &e);
	m = b.m;
	m.atime = future;
	ck_assert_int_eq(ofs_object_update(&s, &b, &m), 0);
	m = c.m;
	m.atime = 1000000000LL;
	ck_assert_int_eq(ofs_object_update(&s, &c, &m), 0);
	m = d.m;
	m.atime = future;
	ck_assert_int_eq(ofs_object_update(&s, &d, &m), 0);
	m = e.m;
	m.atime = future;
	ck_assert_int_eq(ofs_object_update(&s, &e, &m), 0);
	ofs_object_remove(&s, &b);
	ofs_object_remove(&s, &c);
	ofs_object_remove(&s, &d);
	ofs_object_remove(&s, &e);
	usleep(1000);
	later = ofs_now();
	ck_assert_int_eq(ofs_evict_touch_ino(&s, bm.ino, later), 0);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, cm.ino, later), 0);
	ck_assert_int_eq(ofs_evict_touch_ino(&s, em.ino, later), 0);
	ck_assert_int_eq(meta_get(s.meta, em.ino, &e2.m), 0);
	ck_assert_int_eq(e2.m.atime, future);
	ck_assert_int_eq(ofs_object_insert(&s, &e2), 0);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ck_assert_int_eq(meta_get(s.meta, bm.ino, &got), 0);
	ck_assert_int_eq(got.atime, later);
	ck_assert_int_eq(meta_get(s.meta, cm.ino, &got), 0);
	ck_assert_int_eq(got.atime, later);
	ck_assert_int_eq(meta_get(s.meta, dm.ino, &got), 0);
	ck_assert_int_eq(got.atime, future);
	ck_assert_int_eq(meta_get(s.meta, em.ino, &got), 0);
	ck_assert_int_eq(got.atime, later);
	ck_assert_int_eq(e2.m.atime, later);
	pthread_mutex_lock(&s.lock);
	ofs_object_remove(&s, &e2);
	pthread_mutex_unlock(&s.lock);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

static int count_rows(void *ctx, uint64_t tenant, uint64_t count, uint64_t bytes)
{
	(void)tenant;
	(void)count;
	(void)bytes;
	(*(int *)ctx)++;
	return 0;
}

/*
 * Per-tenant eviction counts: written with the atimes once changed, and
 * loaded by the next mount's init; the row of a tenant removed since is
 * dropped then.
 */
START_TEST(test_tenant_counts_kept)
{
	struct meta_inode t = { 0 }, gone;
	struct ofs_tenant_evicted tev[4];
	struct ofs_store s;
	int rows = 0;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	t.parent = META_ROOT_INO;
	t.mode = 040755;
	t.bucket = t.prev_bucket = -1;
	gone = t;
	ck_assert_int_eq(meta_insert(s.meta, &t, "t1", 2), 0);
	ck_assert_int_eq(meta_insert(s.meta, &gone, "t2", 2), 0);
	pthread_mutex_lock(&s.lock);
	s.evict.tev[0] = (struct ofs_tenant_evicted){ .ino = t.ino, .count = 3, .bytes = 3 * PS,
						      .dirty = 1 };
	s.evict.tev[1] = (struct ofs_tenant_evicted){ .ino = gone.ino, .count = 1, .bytes = PS,
						      .dirty = 1 };
	s.evict.ntev = 2;
	s.evict.tev_dirty = 1;
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_evict_flush(&s), 0);
	ck_assert_int_eq(s.evict.tev_dirty, 0);
	ck_assert_int_eq(s.evict.tev[0].dirty, 0);
	ck_assert_int_eq(meta_delete(s.meta, gone.ino), 0);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 10);
	ck_assert_int_eq(ofs_evict_tenant_counts(&s, tev, 4), 1);
	ck_assert_uint_eq(tev[0].ino, t.ino);
	ck_assert_uint_eq(tev[0].count, 3);
	ck_assert_uint_eq(tev[0].bytes, 3 * PS);
	ck_assert_str_eq(tev[0].name, "t1");
	ck_assert_int_eq(meta_tenant_evictions(s.meta, count_rows, &rows), 0);
	ck_assert_int_eq(rows, 1);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

static void *evict_worker_main(void *arg)
{
	ofs_evict_worker(arg, 60000); /* a long tick: passes only when asked for */
	return NULL;
}

/*
 * A write that finds the store full waits for the eviction worker's pass
 * (it does not evict on its own), which evicts the least recently used
 * and releases their pages at its barrier; the write then goes in.
 */
START_TEST(test_writer_waits_for_the_eviction_worker)
{
	struct kvb_map empty = KVB_MAP_EMPTY;
	struct meta_inode m, gone;
	struct ofs_store s;
	struct kvb_obj *o;
	char buf[PS], name[16];
	int i, worker = 0;
	pthread_t t;

	open_store(&s);
	ofs_evict_init(&s, 1, 90, 80, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, evict_worker_main, &s), 0);
	while (!worker) {
		pthread_mutex_lock(&s.evict.wlock);
		worker = s.evict.worker;
		pthread_mutex_unlock(&s.evict.wlock);
		usleep(1000);
	}
	for (i = 0; i < (int)(NB * BS / PS); i++) {
		snprintf(name, sizeof(name), "k%d", i);
		(void)create(&s, name, PS, (unsigned)i);
	}
	m = new_record(&s, "new");
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "new", 3, &o), 0);
	fill(buf, PS, 99);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, PS, 0), -ENOSPC);
	ck_assert_int_eq(ofs_store_reclaim(&s, 0, PS), 1);
	ck_assert_uint_eq(s.evict.put_waits, 1);
	pthread_mutex_lock(&s.evict.wlock);
	ck_assert_uint_eq(s.evict.passes, 1); /* the worker's: the writer ran none */
	pthread_mutex_unlock(&s.evict.wlock);
	ck_assert_uint_ge(s.evict.evictions[OFS_EVICT_PUT], 1);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, PS, 0), (ssize_t)PS);
	ck_assert_int_eq(ofs_store_commit(&s, NULL, &m, o), 0);
	kvb_obj_close(&s.kvb, o);
	ck_assert_int_eq(meta_lookup(s.meta, META_ROOT_INO, "k0", 2, &gone), -ENOENT);
	snprintf(name, sizeof(name), "k%u", NB * BS / PS - 1);
	expect_content(&s, name, PS, NB * BS / PS - 1);
	expect_content(&s, "new", PS, 99);
	ofs_evict_worker_stop(&s);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(s.evict.worker, 0);
	check_invariants(&s);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* A committed file name in directory dir: one page of pattern seed, last used at atime. */
static struct meta_inode create_in(struct ofs_store *s, uint64_t dir, const char *name,
				   unsigned seed, int64_t atime)
{
	struct kvb_map empty = KVB_MAP_EMPTY;
	struct meta_inode m;
	struct kvb_obj *o;
	char buf[PS];

	pthread_mutex_lock(&s->lock);
	ck_assert_int_eq(ofs_ns_make(s, dir, name, S_IFREG | 0644, 0, 0, META_NEW, &m), 0);
	pthread_mutex_unlock(&s->lock);
	ck_assert_int_eq(kvb_obj_open(&s->kvb, &empty, name, strlen(name), &o), 0);
	fill(buf, PS, seed);
	ck_assert_int_eq(kvb_obj_write(&s->kvb, o, buf, PS, 0), (ssize_t)PS);
	m.atime = m.mtime = m.ctime = atime;
	ck_assert_int_eq(ofs_store_commit(s, NULL, &m, o), 0);
	kvb_obj_close(&s->kvb, o);
	return m;
}

/*
 * A tenant sitting at its quota writes one file more into a full store:
 * its write would take it past the quota, so the room comes from its own
 * least recently used file, never from another tenant's older files (the
 * least recently used of the store), and the write then goes in.
 */
/* A store with eviction on and tenants a, with a quota of 8 pages, and b. */
static void open_two_tenants(struct ofs_store *s, struct meta_inode *a, struct meta_inode *b)
{
	char quota[32];

	open_store(s);
	ofs_evict_init(s, 1, 90, 80, 0);
	pthread_mutex_lock(&s->lock);
	ck_assert_int_eq(ofs_ns_make(s, META_ROOT_INO, "a", S_IFDIR | 0755, 0, 0, META_COMMITTED,
				     a), 0);
	ck_assert_int_eq(ofs_ns_make(s, META_ROOT_INO, "b", S_IFDIR | 0755, 0, 0, META_COMMITTED,
				     b), 0);
	snprintf(quota, sizeof(quota), "%u", 8 * PS);
	ck_assert_int_eq(meta_begin(s->meta), 0);
	ck_assert_int_eq(meta_xattr_set(s->meta, a->ino, OFS_QUOTA_XATTR, quota, strlen(quota), 0),
			 0);
	ck_assert_int_eq(meta_commit(s->meta), 0);
	pthread_mutex_unlock(&s->lock);
}

START_TEST(test_tenant_at_quota_makes_its_own_room)
{
	uint64_t total = NB * BS / PS, nb = total - 8;
	struct kvb_map empty = KVB_MAP_EMPTY;
	struct meta_inode a, b, m, gone;
	char buf[PS], name[16];
	struct ofs_store s;
	struct kvb_obj *o;
	uint64_t i;

	open_two_tenants(&s, &a, &b);
	/* b's files are the store's least recently used; a's 8 pages are its quota. */
	for (i = 0; i < nb; i++) {
		snprintf(name, sizeof(name), "b%llu", (unsigned long long)i);
		(void)create_in(&s, b.ino, name, (unsigned)i, 1000 + (int64_t)i);
	}
	for (i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "a%llu", (unsigned long long)i);
		(void)create_in(&s, a.ino, name, 100 + (unsigned)i, 2000 + (int64_t)i);
	}
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_ns_make(&s, a.ino, "new", S_IFREG | 0644, 0, 0, META_NEW, &m), 0);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(kvb_obj_open(&s.kvb, &empty, "new", 3, &o), 0);
	fill(buf, PS, 99);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, PS, 0), -ENOSPC);

	/* No worker: the writer's own pass. */
	ck_assert_int_eq(ofs_store_reclaim(&s, a.ino, PS), 1);
	for (i = 0; i < nb; i++) {
		snprintf(name, sizeof(name), "b%llu", (unsigned long long)i);
		ck_assert_msg(meta_lookup(s.meta, b.ino, name, strlen(name), &gone) == 0,
			      "b's %s evicted for a's write", name);
	}
	ck_assert_int_eq(meta_lookup(s.meta, a.ino, "a0", 2, &gone), -ENOENT);
	ck_assert_int_eq(meta_lookup(s.meta, a.ino, "a1", 2, &gone), 0);
	ck_assert_uint_eq(s.evict.evictions[OFS_EVICT_QUOTA], 1);
	ck_assert_uint_eq(s.evict.evictions[OFS_EVICT_PUT], 0);
	ck_assert_int_eq(kvb_obj_write(&s.kvb, o, buf, PS, 0), (ssize_t)PS);
	ck_assert_int_eq(ofs_store_commit(&s, NULL, &m, o), 0);
	kvb_obj_close(&s.kvb, o);
	check_invariants(&s);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/* The writes landing inside the next barrier's data sync (test_tick_quotas_again). */
static struct {
	const struct kvb_ops *real;
	struct ofs_store *s;
	uint64_t dir;
	int n;
} tick_hook;

static int tick_hook_sync(void *arg)
{
	char name[16];
	int i;

	for (i = 0; i < tick_hook.n; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		(void)create_in(tick_hook.s, tick_hook.dir, name, 200 + (unsigned)i, 3000 + i);
	}
	tick_hook.n = 0;
	return tick_hook.real->barrier_sync(arg);
}

/*
 * A tick's pass brings a tenant over its quota down to it; a writer of
 * that tenant goes on meanwhile (its files land before the pass's barrier
 * releases the evicted pages) and takes the store above the high
 * watermark.  The tenant gives again, by its usage of then: another
 * tenant's files, the least recently used of the store, all stay.
 */
START_TEST(test_tick_quotas_again)
{
	uint64_t total = NB * BS / PS, i;
	struct meta_inode a, b, m;
	char name[16];
	struct kvb_ops hooked;
	struct ofs_store s;

	open_two_tenants(&s, &a, &b);
	for (i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "b%llu", (unsigned long long)i);
		(void)create_in(&s, b.ino, name, (unsigned)i, 1000 + (int64_t)i);
	}
	/* 3 pages over the quota, the store below the high watermark. */
	for (i = 0; i < 11; i++) {
		snprintf(name, sizeof(name), "a%llu", (unsigned long long)i);
		(void)create_in(&s, a.ino, name, 100 + (unsigned)i, 2000 + (int64_t)i);
	}
	/* Every free page taken before the 3 evicted come back: 29 of 32 after. */
	tick_hook.real = s.kvb.ops;
	tick_hook.s = &s;
	tick_hook.dir = a.ino;
	tick_hook.n = (int)(total - 19);
	hooked = *s.kvb.ops;
	hooked.barrier_sync = tick_hook_sync;
	s.kvb.ops = &hooked;
	(void)ofs_evict_tick(&s);
	s.kvb.ops = tick_hook.real;
	ck_assert_int_eq(tick_hook.n, 0);
	for (i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "b%llu", (unsigned long long)i);
		ck_assert_msg(meta_lookup(s.meta, b.ino, name, strlen(name), &m) == 0,
			      "b's %s evicted for a's writes", name);
	}
	ck_assert_uint_eq(s.evict.evictions[OFS_EVICT_WATERMARK], 0);
	ck_assert_uint_eq(s.evict.evictions[OFS_EVICT_QUOTA], 3 + total - 19);
	ck_assert_int_eq(meta_lookup(s.meta, a.ino, "w12", 3, &m), 0);
	check_invariants(&s);
	ofs_evict_fini(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

/*
 * A batch of unlinks in one transaction: each name its own result (a
 * missing name, a name's second time and a directory change nothing; a
 * name refused before the call is left alone), the pages back at the
 * barrier; and when the transaction fails, each name on its own.
 */
START_TEST(test_unlink_many)
{
	struct ofs_store s;
	struct meta_inode m, d;
	struct kvb_statfs before, after;
	uint64_t root = META_ROOT_INO, nf;
	uint64_t parents[7] = { root, root, root, root, root, root, root };
	const char *names[7] = { "a", "x", "b", "a", "d", "c", "e" };
	size_t lens[7] = { 1, 1, 1, 1, 1, 1, 1 };
	int errs[7] = { 0, 0, 0, 0, 0, 0, -EINVAL };
	const char *names2[3] = { "f", "g", "h" };
	int errs2[3] = { 0 };
	unsigned i;

	open_store(&s);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &before), 0);
	create(&s, "a", 2 * PS, 1);
	create(&s, "b", PS + 1, 2);
	create(&s, "c", 3 * PS, 3);
	create(&s, "e", 100, 4);
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_ns_make(&s, root, "d", S_IFDIR | 0755, 0, 0, META_COMMITTED, &d), 0);
	pthread_mutex_unlock(&s.lock);
	nf = s.nfiles;
	ck_assert_int_eq(ofs_ns_unlink_many(&s, parents, names, lens, 7, errs), 0);
	ck_assert_int_eq(errs[0], 0);
	ck_assert_int_eq(errs[1], -ENOENT);
	ck_assert_int_eq(errs[2], 0);
	ck_assert_int_eq(errs[3], -ENOENT);
	ck_assert_int_eq(errs[4], -EISDIR);
	ck_assert_int_eq(errs[5], 0);
	ck_assert_int_eq(errs[6], -EINVAL);
	ck_assert_uint_eq(nf - s.nfiles, 3);
	for (i = 0; i < 7; i++)
		ck_assert_int_eq(meta_lookup(s.meta, root, names[i], 1, &m),
				 i == 4 || i == 6 ? 0 : -ENOENT);
	expect_content(&s, "e", 100, 4);

	/* The transaction fails (its second write): every name on its own, each deleted. */
	create(&s, "f", PS, 5);
	create(&s, "g", 2 * PS, 6);
	create(&s, "h", 0, 7);
	nf = s.nfiles;
	meta_inject_fault(s.meta, 2);
	ck_assert_int_eq(ofs_ns_unlink_many(&s, parents, names2, lens, 3, errs2), 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(errs2[i], 0);
		ck_assert_int_eq(meta_lookup(s.meta, root, names2[i], 1, &m), -ENOENT);
	}
	ck_assert_uint_eq(nf - s.nfiles, 3);
	ck_assert_int_eq(ofs_ns_rmdir(&s, root, "d"), 0);
	ck_assert_int_eq(ofs_ns_unlink(&s, root, "e"), 0);
	ck_assert_int_eq(ofs_store_sync(&s, NULL, NULL), 0);
	ck_assert_int_eq(kvb_statfs(&s.kvb, &after), 0);
	ck_assert_uint_eq(after.blocks_free, before.blocks_free);
	check_invariants(&s);
	ck_assert_int_eq(ofs_store_close(&s), 0);
}
END_TEST

START_TEST(test_object_life)
{
	size_t len = 3 * PS + 100;
	char *want = malloc(len), *got = malloc(len);
	struct ofs_object o = { 0 };
	struct meta_inode dir, m;
	struct ofs_store s;
	struct ofs_bytes b;
	struct kvb_map map;
	int stale = 1;

	open_store(&s);
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_ns_make(&s, META_ROOT_INO, "t", S_IFDIR | 0755, 0, 0, META_COMMITTED,
				     &dir), 0);
	ck_assert_int_eq(ofs_ns_make(&s, dir.ino, "k", S_IFREG | 0644, 0, 0, META_NEW, &m), 0);
	o.m = m;
	ck_assert_int_eq(ofs_ns_make(&s, dir.ino, "k", S_IFREG | 0644, 0, 0, META_NEW, &m),
			 -EEXIST);
	ck_assert_int_eq(ofs_object_insert(&s, &o), 0);
	ck_assert_ptr_eq(ofs_object_find(&s, o.m.ino), &o);
	o.nopen = 1;
	pthread_mutex_unlock(&s.lock);

	ck_assert_int_eq(ofs_object_open_writer(&s, &o, 0), 0);
	ck_assert_uint_eq(o.nwriters, 1);
	fill(want, len, 7);
	ck_assert_int_eq(ofs_object_write(&s, &o, want, len, 0), (ssize_t)len);
	ck_assert_int_eq(ofs_object_commit(&s, &o, 1), 0);
	ck_assert_int_eq(o.m.state, META_COMMITTED);
	ck_assert_uint_eq(o.m.size, len);
	ofs_object_release_writer(&s, &o, &stale);
	ck_assert_int_eq(stale, 0);
	ck_assert_ptr_null(o.obj);

	ck_assert_int_eq(ofs_object_pread(&s, &o, len + 10, 0, 0, &b, &map), (ssize_t)len);
	bytes_copy(&b, got, len);
	ofs_bytes_release(&s, &b);
	ck_assert_mem_eq(got, want, len);
	ck_assert_int_eq(ofs_object_pread(&s, &o, 10, len, 0, &b, &map), 0);
	ofs_bytes_release(&s, &b);

	ck_assert_int_eq(ofs_ns_rename(&s, dir.ino, "k", dir.ino, "k2", 0), 0);
	ck_assert_int_eq(meta_lookup(s.meta, dir.ino, "k2", 2, &m), 0);
	ck_assert_uint_eq(m.ino, o.m.ino);
	/* A tenant holds its keys: no moving a file out to the top level. */
	ck_assert_int_eq(ofs_ns_rename(&s, dir.ino, "k2", META_ROOT_INO, "k3", 0), -EPERM);
	ck_assert_int_eq(ofs_ns_rmdir(&s, META_ROOT_INO, "t"), -ENOTEMPTY);

	/* Open: the name goes, the record stays until the last close. */
	ck_assert_int_eq(ofs_ns_unlink(&s, dir.ino, "k2"), 0);
	ck_assert_int_eq(o.unlinked, 2);
	ck_assert_int_eq(meta_get(s.meta, o.m.ino, &m), 0);
	pthread_mutex_lock(&s.lock);
	o.nopen = 0;
	ofs_object_settle(&s, &o);
	ck_assert_int_eq(o.unlinked, 1);
	ck_assert_int_eq(meta_get(s.meta, o.m.ino, &m), -ENOENT);
	ofs_object_remove(&s, &o);
	pthread_mutex_unlock(&s.lock);

	ck_assert_int_eq(ofs_ns_rmdir(&s, META_ROOT_INO, "t"), 0);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	free(want);
	free(got);
}
END_TEST

/* Read len bytes at off of what o holds now into buf, asserting the count. */
static void pread_all(struct ofs_store *s, struct ofs_object *o, char *buf, size_t len, uint64_t off)
{
	struct ofs_bytes b;
	struct kvb_map map;

	ck_assert_int_eq(ofs_object_pread(s, o, len, off, 0, &b, &map), (ssize_t)len);
	bytes_copy(&b, buf, len);
	ofs_bytes_release(s, &b);
}

/*
 * copy_file_range's store half: a write of the source's bytes, inside the
 * backend when the source needs no check, through memory when it does and
 * within one file; the ranges and errors the kernel also checks.
 */
START_TEST(test_object_copy)
{
	size_t len = 3 * PS + 100;
	char *src = malloc(len), *want = calloc(1, 2 * len + 100), *got = malloc(2 * len + 100);
	struct ofs_object a = { 0 }, b = { 0 };
	struct meta_inode dir;
	struct ofs_store s;
	int stale;

	open_store(&s);
	pthread_mutex_lock(&s.lock);
	ck_assert_int_eq(ofs_ns_make(&s, META_ROOT_INO, "t", S_IFDIR | 0755, 0, 0, META_COMMITTED,
				     &dir), 0);
	ck_assert_int_eq(ofs_ns_make(&s, dir.ino, "a", S_IFREG | 0644, 0, 0, META_NEW, &a.m), 0);
	ck_assert_int_eq(ofs_ns_make(&s, dir.ino, "b", S_IFREG | 0644, 0, 0, META_NEW, &b.m), 0);
	ck_assert_int_eq(ofs_object_insert(&s, &a), 0);
	ck_assert_int_eq(ofs_object_insert(&s, &b), 0);
	a.nopen = b.nopen = 1;
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_object_open_writer(&s, &a, 0), 0);
	fill(src, len, 31);
	ck_assert_int_eq(ofs_object_write(&s, &a, src, len, 0), (ssize_t)len);
	ck_assert_int_eq(ofs_object_commit(&s, &a, 0), 0);
	ofs_object_release_writer(&s, &a, &stale);

	/* Only into a writer's working state. */
	ck_assert_int_eq(ofs_object_copy(&s, &a, 0, &b, 0, 10), -EBADF);
	ck_assert_int_eq(ofs_object_open_writer(&s, &b, 0), 0);
	/* Not verified: inside the backend, at unaligned offsets, short at the source's end. */
	s.verify = 0;
	ck_assert_int_eq(ofs_object_copy(&s, &a, 7, &b, PS + 3, len), (ssize_t)(len - 7));
	memcpy(want + PS + 3, src + 7, len - 7);
	ck_assert_uint_eq(s.metrics.copies_backend, 1);
	ck_assert_int_eq(ofs_object_copy(&s, &a, len, &b, 0, 10), 0);
	ck_assert_int_eq(ofs_object_copy(&s, &a, 0, &b, 0, 0), 0);
	/* Verified: the committed source is read and checked on the way. */
	s.verify = 1;
	ck_assert_int_eq(ofs_object_copy(&s, &a, 0, &b, 0, 50), 50);
	memcpy(want, src, 50);
	ck_assert_uint_eq(s.metrics.copies_memory, 1);
	/* Within one file: apart through memory, overlapping refused. */
	ck_assert_int_eq(ofs_object_copy(&s, &b, PS + 3, &b, 2 * len, 100), 100);
	memcpy(want + 2 * len, want + PS + 3, 100);
	ck_assert_int_eq(ofs_object_copy(&s, &b, 0, &b, 10, 20), -EINVAL);
	ck_assert_int_eq(ofs_object_copy(&s, &b, 10, &b, 0, 20), -EINVAL);
	ck_assert_uint_eq(s.metrics.copies_memory, 2);
	pread_all(&s, &b, got, 2 * len, 0);
	ck_assert_mem_eq(got, want, 2 * len);
	ck_assert_int_eq(ofs_object_commit(&s, &b, 1), 0);
	ofs_object_release_writer(&s, &b, &stale);
	/* Committed, and read back verified against the checksums the commit took. */
	ck_assert_uint_eq(b.m.size, 2 * len + 100);
	pread_all(&s, &b, got, 2 * len, 0);
	ck_assert_mem_eq(got, want, 2 * len);
	pread_all(&s, &b, got, 100, 2 * len);
	ck_assert_mem_eq(got, want + PS + 3, 100);
	ck_assert_uint_eq(s.metrics.checksum_failures, 0);

	pthread_mutex_lock(&s.lock);
	a.nopen = b.nopen = 0;
	ofs_object_remove(&s, &a);
	ofs_object_remove(&s, &b);
	free(a.pcs);
	free(b.pcs);
	pthread_mutex_unlock(&s.lock);
	ck_assert_int_eq(ofs_store_close(&s), 0);
	free(src);
	free(want);
	free(got);
}
END_TEST

/* What the progress display wrote to a file (no terminal: a line a step), after steps done. */
static char *progress_text(uint64_t total, uint64_t done)
{
	static char text[256];
	struct ofs_progress p;
	FILE *f = tmpfile();
	size_t n;

	ck_assert_ptr_nonnull(f);
	ofs_progress_start(&p, "scrub", total, f, f);
	p.done = done;
	ofs_progress_show(&p, 1);
	rewind(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

/* The display never claims more done than all, nor a total of 0. */
START_TEST(test_progress_says_what_it_knows)
{
	ck_assert_str_eq(progress_text(4, 3), "scrub: 3/4\n");
	ck_assert_str_eq(progress_text(4, 4), "scrub: 4/4\n");
	/* No total (a walk that cannot tell): the count alone, not "1/0". */
	ck_assert_str_eq(progress_text(0, 1), "scrub: 1\n");
	ck_assert_str_eq(progress_text(0, 0), "scrub: 0\n");
	/* Past the total (files made during the walk): the count alone, not "5/4". */
	ck_assert_str_eq(progress_text(4, 5), "scrub: 5\n");
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("crash");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_failed_metadata_commit);
	tcase_add_test(tc, test_overwrite_in_place_checksum);
	tcase_add_test(tc, test_unlink_many);
	tcase_add_test(tc, test_object_copy);
	tcase_add_test(tc, test_atime_queued_once_a_round);
	tcase_add_test(tc, test_atime_without_object);
	tcase_add_test(tc, test_atime_set_after_use_kept);
	tcase_add_test(tc, test_atime_set_then_forgotten_kept);
	tcase_add_test(tc, test_atime_use_after_set_wins);
	tcase_add_test(tc, test_tenant_counts_kept);
	tcase_add_test(tc, test_writer_waits_for_the_eviction_worker);
	tcase_add_test(tc, test_tenant_at_quota_makes_its_own_room);
	tcase_add_test(tc, test_tick_quotas_again);
	tcase_add_test(tc, test_failed_write_in_the_middle);
	tcase_add_test(tc, test_power_cut_loses_only_unsynced);
	tcase_add_test(tc, test_power_cut_keeps_metadata_loses_data);
	tcase_add_test(tc, test_kill_keeps_everything_committed);
	tcase_add_test(tc, test_log_sync_outside_the_lock);
	tcase_add_test(tc, test_commit_during_barrier_keeps_its_prev);
	tcase_add_test(tc, test_commits_do_not_fsync);
	tcase_add_test(tc, test_failed_log_sync_holds_releases);
	tcase_add_test(tc, test_failed_checkpoint_sync_is_kept);
	tcase_add_test(tc, test_failure_taken_by_a_checkpoint_meanwhile);
	suite_add_tcase(s, tc);
	tc = tcase_create("object");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_object_life);
	suite_add_tcase(s, tc);
	tc = tcase_create("progress");
	tcase_add_test(tc, test_progress_says_what_it_knows);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(store_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
