/*
 * sync.c: the durability barrier.
 *
 * Every connection commits with synchronous_commit=off: a commit is in the
 * server when it returns (it survives a kill -9 of the daemon) without
 * waiting for the server's WAL flush.  A commit with synchronous_commit=on
 * waits for the WAL to be flushed through its own commit record, which
 * comes after every commit before it: one wait covers them all, as one
 * fsync of sqlite's log does.
 */
#include "pg_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * The synced_gen row, in a transaction of its own; sync: one that waits
 * for the WAL flush.  After a crash of the server (reconnect.c) the
 * commits before it that no completed barrier covered may be gone: a
 * flush now proves nothing for them, and m->lost fails every barrier.
 */
static int pq_record_synced_gen(struct meta_pg *m, uint64_t synced_gen, int sync)
{
	int ret = pq_begin(&m->base);

	if (!ret && sync)
		ret = pq_exec(m, "SET LOCAL synchronous_commit = on", NULL);
	if (!ret)
		ret = pq_kv_set_int(m, "synced_gen", (int64_t)synced_gen);
	if (ret) {
		pq_rollback(&m->base);
		return ret;
	}
	ret = pq_commit(&m->base);
	if (!ret && pq_is_lost(m))
		ret = -EIO;
	return ret;
}

int pq_is_lost(struct meta_pg *m)
{
	int lost;

	pthread_mutex_lock(&m->mu);
	lost = m->lost;
	pthread_mutex_unlock(&m->mu);
	if (lost)
		snprintf(m->err, sizeof(m->err),
			 "%s: metadata commits may have been lost with the server (see the log): "
			 "remount to recover the store", m->shown);
	return lost;
}

int pq_sync(struct meta *mb, uint64_t synced_gen)
{
	struct meta_pg *m = pq(mb);
	unsigned crashes = __atomic_load_n(&m->crashes, __ATOMIC_SEQ_CST);
	int ret = pq_record_synced_gen(m, synced_gen, 1);

	/* Every commit made on conn before this one is on the server's disk now. */
	if (!ret && crashes == __atomic_load_n(&m->crashes, __ATOMIC_SEQ_CST))
		__atomic_store_n(&m->durable, __atomic_load_n(&m->wseq, __ATOMIC_SEQ_CST),
				 __ATOMIC_SEQ_CST);
	return ret;
}

int pq_sync_begin(struct meta *mb, uint64_t synced_gen)
{
	struct meta_pg *m = pq(mb);
	int ret;

	m->bar_crashes = __atomic_load_n(&m->crashes, __ATOMIC_SEQ_CST);
	ret = pq_record_synced_gen(m, synced_gen, 0);
	/* What the flush of pq_sync_end covers, if the server does not crash before it. */
	if (!ret)
		m->bar_wseq = __atomic_load_n(&m->wseq, __ATOMIC_SEQ_CST);
	return ret;
}

/*
 * On its own connection, so that it runs beside the other calls: a
 * transaction that wrote to the WAL (a row rewritten as it was: the
 * magic, which nothing else writes) commits with synchronous_commit=on
 * by waiting for the WAL to be flushed through its commit record, so
 * through the synced_gen commit of meta_sync_begin and every commit
 * before, unless the server crashed since them (m->crashes moved on).
 * One that wrote nothing would not wait.  m->err is not written here:
 * another thread may be writing it.
 */
int pq_sync_end(struct meta *mb)
{
	struct meta_pg *m = pq(mb);
	PGresult *r;
	int ret, tries;

	pthread_mutex_lock(&m->mu);
	ret = m->lost ? -EIO : 0;
	pthread_mutex_unlock(&m->mu);
	/*
	 * Run again on a new connection when the old one was lost: it changes
	 * nothing, and a crash in between shows in m->crashes.
	 */
	for (tries = 0; !ret; tries++) {
		ret = pq_ready(m, &m->sync_conn);
		if (ret)
			return ret;
		r = pq_send_wait(m, m->sync_conn, -1,
				 "BEGIN; SET LOCAL synchronous_commit = on; "
				 "UPDATE " PQ_SCHEMA ".store SET v = v WHERE k = 'magic'; COMMIT",
				 NULL);
		if (PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(r), "COMMIT")) {
			PQclear(r);
			break;
		}
		ret = -EIO;
		if (tries < 2 && (!r || PQstatus(m->sync_conn) != CONNECTION_OK ||
				  PQresultStatus(r) == PGRES_FATAL_ERROR))
			ret = 0;
		if (!ret)
			pq_log_lost(m, r ? PQresultErrorMessage(r) : PQerrorMessage(m->sync_conn));
		PQclear(r);
		/* Lost or in an aborted transaction: made again by the next call. */
		pq_drop(m, &m->sync_conn);
	}
	if (ret)
		return ret;
	pthread_mutex_lock(&m->mu);
	if (m->lost || m->crashes != m->bar_crashes)
		ret = -EIO;
	pthread_mutex_unlock(&m->mu);
	if (!ret)
		__atomic_store_n(&m->durable, m->bar_wseq, __ATOMIC_SEQ_CST);
	return ret;
}

int pq_synced_gen(struct meta *mb, uint64_t *gen)
{
	int64_t v = 0;
	int ret = pq_kv_get(pq(mb), "synced_gen", &v, NULL, 0);

	*gen = ret ? 0 : (uint64_t)v;
	return ret == -ENOENT ? 0 : ret;
}

/* The server's WAL is the server's to checkpoint. */
int pq_checkpoint(struct meta *mb)
{
	(void)mb;
	return 0;
}

/*
 * A full disk here is the server's: nothing this side can free room on
 * it.  The store's reserve is given back all the same (the hook), and
 * the caller told that no room was made.
 */
int pq_make_room(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	if (PQtransactionStatus(m->conn) != PQTRANS_IDLE)
		return -EBUSY;
	if (mb->full_hook)
		mb->full_hook(mb->full_arg);
	return -ENOSPC;
}
