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

/* The synced_gen row, in a transaction of its own; sync: one that waits for the WAL flush. */
static int pq_record_synced_gen(struct meta_pg *m, uint64_t synced_gen, int sync)
{
	int ret = pq_begin(&m->base);

	if (!ret && sync)
		ret = pq_exec(m, "SET LOCAL synchronous_commit = on", NULL);
	if (!ret)
		ret = pq_kv_set_int(m, "synced_gen", (int64_t)synced_gen);
	if (!ret)
		return pq_commit(&m->base);
	pq_rollback(&m->base);
	return ret;
}

int pq_sync(struct meta *mb, uint64_t synced_gen)
{
	return pq_record_synced_gen(pq(mb), synced_gen, 1);
}

int pq_sync_begin(struct meta *mb, uint64_t synced_gen)
{
	return pq_record_synced_gen(pq(mb), synced_gen, 0);
}

/*
 * On its own connection, so that it runs beside the other calls: a
 * transaction that wrote to the WAL (a row rewritten as it was: the
 * magic, which nothing else writes) commits with synchronous_commit=on
 * by waiting for the WAL to be flushed through its commit record, so
 * through the synced_gen commit of meta_sync_begin and every commit
 * before.  One that wrote nothing would not wait.
 */
int pq_sync_end(struct meta *mb)
{
	struct meta_pg *m = pq(mb);
	PGresult *r = PQexec(m->sync_conn, "BEGIN; SET LOCAL synchronous_commit = on; "
					   "UPDATE " PQ_SCHEMA ".store SET v = v WHERE k = 'magic'; "
					   "COMMIT");
	int ret = 0;

	if (PQresultStatus(r) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(r), "COMMIT") != 0) {
		/* Not m->err: another thread may be writing it. */
		ret = -EIO;
	}
	PQclear(r);
	if (ret && PQtransactionStatus(m->sync_conn) != PQTRANS_IDLE)
		PQclear(PQexec(m->sync_conn, "ROLLBACK"));
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
