/*
 * sync.c: the durability barrier and the log.
 *
 * WAL with synchronous=NORMAL: a commit reaches the OS before it returns
 * (it survives a daemon kill -9) without an fsync; meta_sync, or
 * meta_sync_begin then meta_sync_end, is the point of durability against
 * power loss.  A failed sync of the log is remembered (log_failed) until
 * a checkpoint has recovered from it.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Pages of log before a checkpoint (16 MiB at 4 KiB pages).  A checkpoint
 * runs inside the commit that fills the log and fsyncs the log and the
 * database, under the caller's lock: every metadata request waits for
 * those two fsyncs.  sqlite's default (1,000 pages) ran one every few
 * hundred commits, which on a ROOT of slow fsyncs costs puts and deletes
 * much of their rate; a larger log makes each checkpoint, and the put
 * that runs it, longer.  scripts/bench-slowsync measures the balance.
 */
#define META_CKPT_PAGES 4096

/*
 * POSIX_FADV_WILLNEED reads at most the device's readahead window per call
 * (force_page_cache_ra): the file is asked for in pieces no larger than
 * the smallest usual window.  Pages still cached cost a lookup each.
 */
#define META_PREFETCH_CHUNK (128 * 1024)

/* Frames of log asked for ahead of the last commit's (about 1 MiB at 4 KiB pages). */
#define META_AHEAD_FRAMES 256

/*
 * The descriptor of the log both prefetches use, opened by whichever runs
 * first (the group-commit thread's, or a commit's): -1 while the log
 * cannot be opened.
 */
static int sq_log_fd(struct meta_sq *m)
{
	int fd = __atomic_load_n(&m->wal_fd, __ATOMIC_ACQUIRE), cur = -1;

	if (fd >= 0 || !m->wal_path)
		return fd;
	fd = open(m->wal_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (!__atomic_compare_exchange_n(&m->wal_fd, &cur, fd, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		close(fd);
		return cur;
	}
	return fd;
}

static void sq_log_willneed(int fd, off_t off, off_t end)
{
	for (; off < end; off += META_PREFETCH_CHUNK)
		(void)posix_fadvise(fd, off, META_PREFETCH_CHUNK, POSIX_FADV_WILLNEED);
}

void sq_log_prefetch(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	/* A lap of the log: a log the checkpoint let grow past it is read ahead by its commits. */
	off_t lap = 32 + (off_t)(META_CKPT_PAGES + META_AHEAD_FRAMES) * (m->db_page + 24);
	struct stat st;
	int fd = sq_log_fd(m);

	if (fd >= 0 && fstat(fd, &st) == 0)
		sq_log_willneed(fd, 0, st.st_size < lap ? st.st_size : lap);
}

/*
 * The log's file made at least end bytes long with zeros written past its
 * end, through sqlite's own handle (on the connection's thread, inside a
 * commit: nothing else writes it meanwhile).  A barrier's sync of a log
 * that grew commits the new size to the filesystem's journal, a second
 * cache flush beside the frames'; into bytes already written it is the
 * frames' alone.  sqlite's replay stops at the first frame that is not
 * valid, and a zero header (page 0) never is.  Blocks, not fallocate: a
 * write into an unwritten extent converts it, a journal commit again.
 * Failures are left to the frames' own writes to report (a full disk).
 */
static void sq_log_extend(struct meta_sq *m, off_t end)
{
	static const char zeros[64 * 1024];
	sqlite3_file *wal = NULL;
	sqlite3_int64 size;

	if (sqlite3_file_control(m->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK ||
	    !wal || !wal->pMethods || wal->pMethods->xFileSize(wal, &size) != SQLITE_OK)
		return;
	while (size < end) {
		int n = end - size < (off_t)sizeof(zeros) ? (int)(end - size) : (int)sizeof(zeros);

		if (wal->pMethods->xWrite(wal, zeros, n, size) != SQLITE_OK)
			return;
		size += n;
	}
}

/*
 * After a commit that left frames in the log: the frames the next commits
 * write, asked for once the writer is within half the distance of where
 * the last request ended, so an eviction costs a commit at most a wait
 * for a read already under way, not a read of its own; past the file's
 * end, written as zeros, so that the barriers' syncs find its size set.
 */
static void sq_log_ahead(struct meta_sq *m, int frames)
{
	off_t fsz = (off_t)m->db_page + 24, off;
	int fd;

	if (frames < m->log_last)
		m->log_asked = 0; /* a new lap: the log starts again at its first frame */
	m->log_last = frames;
	if ((long)frames + META_AHEAD_FRAMES / 2 <= m->log_asked)
		return;
	off = 32 + (off_t)frames * fsz; /* the log's header, then the frames */
	sq_log_extend(m, off + META_AHEAD_FRAMES * fsz);
	if ((fd = sq_log_fd(m)) >= 0)
		sq_log_willneed(fd, off, off + META_AHEAD_FRAMES * fsz);
	m->log_asked = (long)frames + META_AHEAD_FRAMES;
}

/*
 * sqlite's automatic checkpoint, as sqlite runs it, but with its errors
 * kept: sqlite drops them, and a failed sync there may be the only report
 * of lost log pages (the kernel reports a writeback error once per open
 * file, and this is the handle our own sync uses).  Runs inside whichever
 * commit filled the log, on its thread.
 */
int sq_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct meta_sq *m = arg;
	int rc;

	sq_log_ahead(m, pages);
	/*
	 * Not after a failure: a passive checkpoint leaves the damaged log in
	 * place, whose replay after a crash would lay its older pages over the
	 * newer ones copied out; meta_sync_begin's truncating one comes next.
	 */
	if (pages < META_CKPT_PAGES || __atomic_load_n(&m->log_failed, __ATOMIC_RELAXED))
		return SQLITE_OK;
	rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	/* Not run (busy, or a statement of ours still reading) is not a failure. */
	if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
		__atomic_store_n(&m->log_failed, 1, __ATOMIC_RELAXED);
	return SQLITE_OK;
}

/* The synced_gen row, in a transaction of its own. */
static int sq_record_synced_gen(struct meta_sq *m, uint64_t synced_gen)
{
	int ret = sq_begin(&m->base);

	if (!ret) {
		ret = sq_kv_set_int(m, "synced_gen", (sqlite3_int64)synced_gen);
		if (!ret)
			ret = sq_commit(&m->base);
		else
			sq_rollback(&m->base);
	}
	return ret;
}

int sq_sync_begin(struct meta *mb, uint64_t synced_gen)
{
	struct meta_sq *m = sq(mb);
	int ret = sq_record_synced_gen(m, synced_gen);

	if (!ret) {
		/* The log's file, kept for meta_sync_end: it stays open as long as the connection. */
		sqlite3_file *wal = NULL;

		if (sqlite3_file_control(m->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) !=
			    SQLITE_OK ||
		    !wal || !wal->pMethods)
			ret = -EIO;
		else
			m->wal = wal;
	}
	/*
	 * After a failed sync of the log, a later sync that succeeds says
	 * nothing of the pages the failed one lost, and replay stops at the
	 * first bad frame: every commit since could be gone.  Until a
	 * checkpoint has copied every frame into the database, synced it, and
	 * emptied the log (a synced truncation: a log left in place would be
	 * replayed after a crash over the newer pages), the barrier fails, so
	 * nothing is released.  The frames are read back through the page
	 * cache; one the failed write lost and the kernel has since evicted
	 * would come back from the disk stale, which this cannot detect.
	 */
	if (!ret && __atomic_load_n(&m->log_failed, __ATOMIC_RELAXED)) {
		/* Exclusive locking: it runs to the end or fails, never busy. */
		if (sqlite3_wal_checkpoint_v2(m->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL,
					      NULL) != SQLITE_OK ||
		    m->wal->pMethods->xSync(m->wal, SQLITE_SYNC_NORMAL) != SQLITE_OK)
			ret = -EIO;
		else
			__atomic_store_n(&m->log_failed, 0, __ATOMIC_RELAXED);
	}
	return ret;
}

int sq_log_failed(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	return __atomic_load_n(&m->log_failed, __ATOMIC_RELAXED);
}

/*
 * Runs no statement: it syncs the connection's log file through sqlite's
 * own file handle, which sqlite keeps open for the life of the connection
 * in WAL mode, so it may run while other threads use the connection
 * (sqlite's own syncs of that handle, at a checkpoint, only ever clear the
 * same "directory synced" bit).
 */
int sq_sync_end(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	/*
	 * sqlite's own sync of the log file, as a commit under
	 * synchronous=FULL would run it (it also syncs the directory the
	 * first time, after the log was created).  It covers every frame
	 * written before it, the synced_gen commit's among them; a checkpoint
	 * meanwhile syncs the log before it copies frames out.
	 */
	if (!m->wal)
		return -EINVAL;
	if (m->wal->pMethods->xSync(m->wal, SQLITE_SYNC_NORMAL) == SQLITE_OK)
		return 0;
	__atomic_store_n(&m->log_failed, 1, __ATOMIC_RELAXED);
	return -EIO;
}

int sq_sync(struct meta *mb, uint64_t synced_gen)
{
	struct meta_sq *m = sq(mb);
	int ret;

	/*
	 * A commit under synchronous=FULL fsyncs the WAL, and with it every
	 * transaction committed before it: one fsync covers them all.
	 */
	ret = sq_exec(m, "PRAGMA synchronous=FULL");
	if (ret)
		return ret;
	ret = sq_record_synced_gen(m, synced_gen);
	sq_exec(m, "PRAGMA synchronous=NORMAL");
	return ret;
}

int sq_synced_gen(struct meta *mb, uint64_t *gen)
{
	struct meta_sq *m = sq(mb);
	sqlite3_int64 v = 0;
	int ret = sq_kv_get(m, "synced_gen", &v, NULL, 0);

	*gen = ret ? 0 : (uint64_t)v;
	return ret == -ENOENT ? 0 : ret;
}

int sq_make_room(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	if (!sqlite3_get_autocommit(m->db))
		return -EBUSY;
	if (m->base.full_hook)
		m->base.full_hook(m->base.full_arg);
	/* After a failed sync of the log only a barrier's checkpoint may run. */
	if (__atomic_load_n(&m->log_failed, __ATOMIC_RELAXED))
		return -EIO;
	return sq_checkpoint(&m->base);
}

int sq_checkpoint(struct meta *mb)
{
	struct meta_sq *m = sq(mb);
	int rc = sqlite3_wal_checkpoint_v2(m->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);

	return sq_errno(rc);
}

