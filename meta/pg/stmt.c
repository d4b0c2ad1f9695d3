/*
 * stmt.c: the helpers every file of the PostgreSQL engine shares
 * (pg_int.h): binding parameters, running statements and turning the
 * server's errors into errnos, reading rows, the settings table, and
 * transactions.  The engine's floor: it calls nothing in the other files.
 */
#include "pg_int.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pq_int(struct pq_params *p, int64_t v)
{
	int i = p->n++;

	p->be[i] = htobe64((uint64_t)v);
	p->val[i] = (const char *)&p->be[i];
	p->len[i] = 8;
	p->fmt[i] = 1;
}

void pq_blob(struct pq_params *p, const void *v, size_t len)
{
	int i = p->n++;

	/* A zero-length value is not NULL: any non-NULL pointer will do. */
	p->val[i] = v ? (len ? v : "") : NULL;
	p->len[i] = (int)len;
	p->fmt[i] = 1;
}

void pq_text(struct pq_params *p, const char *s)
{
	pq_blob(p, s, s ? strlen(s) : 0);
}

void pq_one_line(char *buf, size_t len, const char *msg)
{
	char *nl;

	snprintf(buf, len, "%s", msg && *msg ? msg : "unknown error");
	while ((nl = strchr(buf, '\n')))
		*nl = nl[1] ? ' ' : '\0';
}

/* The server's message, on one line. */
static void pq_keep_message(struct meta_pg *m, const char *msg)
{
	pq_one_line(m->err, sizeof(m->err), msg);
}

int pq_error(struct meta_pg *m, const PGresult *r)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	pq_keep_message(m, r ? PQresultErrorMessage(r)
			     : m->conn ? PQerrorMessage(m->conn) : "no connection to the server");
	if (!state)
		return -EIO; /* the connection, not the statement */
	if (!strcmp(state, "23505"))
		return -EEXIST; /* unique_violation */
	if (!strcmp(state, "53200"))
		return -ENOMEM; /* out_of_memory */
	/* insufficient_resources: disk_full and the server's own limits; not this call's fault. */
	if (!strncmp(state, "53", 2))
		return -ENOSPC;
	if (!strncmp(state, "40", 2) || !strcmp(state, "55P03"))
		return -EBUSY; /* serialization, deadlock, lock not available */
	if (!strncmp(state, "42", 2))
		return -EUCLEAN; /* the schema is not what the statement expects */
	return -EIO;
}

/* Wait for c's socket to be ready for events, by the deadline: 0, or -1. */
static int pq_poll(PGconn *c, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = PQsocket(c), .events = events };
	int64_t left;
	int n;

	for (;;) {
		left = deadline - pq_now_ms();
		if (left <= 0 || pfd.fd < 0)
			return -1;
		n = poll(&pfd, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* A result that says the connection is gone with it (the server's shutdown, a dropped backend). */
static int pq_result_lost(PGconn *c, const PGresult *r)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (!r || PQstatus(c) != CONNECTION_OK)
		return 1;
	/* admin_shutdown, crash_shutdown, cannot_connect_now; connection_exception */
	return state && (!strncmp(state, "57P", 3) || !strncmp(state, "08", 2));
}

PGresult *pq_send_wait(struct meta_pg *m, PGconn *c, int st, const char *sql,
		       const struct pq_params *p)
{
	char name[16];
	int ok;

	if (st >= 0) {
		snprintf(name, sizeof(name), "s%d", st);
		ok = PQsendQueryPrepared(c, name, p ? p->n : 0, p ? p->val : NULL,
					 p ? p->len : NULL, p ? p->fmt : NULL, 1);
	} else if (p) {
		ok = PQsendQueryParams(c, sql, p->n, NULL, p->val, p->len, p->fmt, 1);
	} else {
		ok = PQsendQuery(c, sql);
	}
	return ok ? pq_results(m, c) : NULL;
}

int pq_prepare_on(struct meta_pg *m, PGconn *c, char *err, size_t errlen)
{
	char name[16];
	PGresult *r;
	int i;

	for (i = 0; i < PQ_N; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		r = PQsendPrepare(c, name, pq_sql[i], 0, NULL) ? pq_results(m, c) : NULL;
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			char msg[400];

			pq_one_line(msg, sizeof(msg), r ? PQresultErrorMessage(r) : PQerrorMessage(c));
			snprintf(err, errlen, "%s: cannot prepare statement %d: %s", m->shown, i, msg);
			PQclear(r);
			return r ? -EUCLEAN : -EIO;
		}
		PQclear(r);
	}
	return 0;
}

PGresult *pq_results(struct meta_pg *m, PGconn *c)
{
	int64_t quiet = meta_timeout_ms(&m->base), deadline = pq_now_ms() + quiet;
	PGresult *r, *keep = NULL;
	int f;

	/* A statement the server stays silent on for meta_timeout is given up (a stopped server). */
	while ((f = PQflush(c)) == 1)
		if (pq_poll(c, POLLOUT | POLLIN, deadline) || !PQconsumeInput(c))
			return NULL;
	if (f < 0)
		return NULL;
	for (;;) {
		while (!PQisBusy(c)) {
			r = PQgetResult(c);
			if (!r)
				return keep;
			/* As PQexec: the last result, but an error stays (what follows it is skipped). */
			if (keep && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
				PQclear(r);
				continue;
			}
			PQclear(keep);
			keep = r;
		}
		if (pq_poll(c, POLLIN, deadline) || !PQconsumeInput(c)) {
			PQclear(keep);
			return NULL;
		}
		deadline = pq_now_ms() + quiet;
	}
}

/* Wait until c has a result ready (PQisBusy false), by a deadline renewed by each answer. */
static int pq_wait_ready(struct meta_pg *m, PGconn *c)
{
	int64_t quiet = meta_timeout_ms(&m->base), deadline = pq_now_ms() + quiet;
	int f;

	while ((f = PQflush(c)) == 1)
		if (pq_poll(c, POLLOUT | POLLIN, deadline) || !PQconsumeInput(c))
			return -1;
	if (f < 0)
		return -1;
	while (PQisBusy(c)) {
		if (pq_poll(c, POLLIN, deadline) || !PQconsumeInput(c))
			return -1;
		deadline = pq_now_ms() + quiet;
	}
	return 0;
}

/*
 * A write outside a transaction that names its transaction id first, in
 * one round trip: a pipeline of the id's query, flushed to us before the
 * server goes on, and the statement, which the Sync at its end commits
 * (messages before a Sync are one implicit transaction).  If the
 * connection is lost before the answer, pq_resolve asks the server
 * whether that transaction committed.  The statement's result, or NULL:
 * *xid is then the id when it arrived, "-" when an error came first (the
 * server skips the rest up to the Sync: nothing was committed), else "";
 * *done the statement's answer when only the commit's is missing.
 */
static PGresult *pq_write_alone(struct meta_pg *m, PGconn *c, int st, const char *sql,
				const struct pq_params *p, char *xid, size_t xidlen,
				PGresult **done)
{
	PGresult *r = NULL, *id = NULL, *res = NULL;
	char name[16];
	int ok, lost = 0;

	xid[0] = '\0';
	if (st >= 0)
		snprintf(name, sizeof(name), "s%d", st);
	ok = PQenterPipelineMode(c) &&
	     PQsendQueryParams(c, "SELECT pg_current_xact_id()::text", 0, NULL, NULL, NULL, NULL,
			       0) &&
	     PQsendFlushRequest(c) &&
	     (st >= 0 ? PQsendQueryPrepared(c, name, p ? p->n : 0, p ? p->val : NULL,
					    p ? p->len : NULL, p ? p->fmt : NULL, 1)
		      : PQsendQueryParams(c, sql, p ? p->n : 0, NULL, p ? p->val : NULL,
					  p ? p->len : NULL, p ? p->fmt : NULL, 1)) &&
	     PQpipelineSync(c);
	if (!ok) {
		PQexitPipelineMode(c);
		return NULL;
	}
	/* Each query's result then a NULL, then the Sync's (which is the commit's answer). */
	if (pq_wait_ready(m, c) || !(id = PQgetResult(c)))
		lost = 1;
	else if (PQresultStatus(id) == PGRES_TUPLES_OK && PQntuples(id))
		snprintf(xid, xidlen, "%s", PQgetvalue(id, 0, 0));
	else
		snprintf(xid, xidlen, "-");
	if (!lost && (pq_wait_ready(m, c) || (r = PQgetResult(c)) != NULL))
		lost = 1;
	PQclear(r);
	r = NULL;
	if (!lost && (pq_wait_ready(m, c) || !(res = PQgetResult(c))))
		lost = 1;
	if (!lost && PQresultStatus(res) == PGRES_FATAL_ERROR)
		snprintf(xid, xidlen, "-"); /* the statement failed: rolled back at the Sync */
	if (!lost && (pq_wait_ready(m, c) || (r = PQgetResult(c)) != NULL))
		lost = 1;
	PQclear(r);
	r = NULL;
	if (!lost && (pq_wait_ready(m, c) || !(r = PQgetResult(c)) ||
		      PQresultStatus(r) != PGRES_PIPELINE_SYNC))
		lost = 1;
	PQclear(r);
	PQclear(id);
	if (!lost && PQresultStatus(res) == PGRES_PIPELINE_ABORTED)
		lost = 1; /* the id's query failed: its error is gone with the pipeline */
	if (lost || !PQexitPipelineMode(c) || pq_result_lost(c, res)) {
		ExecStatusType s = PQresultStatus(res);

		/* The statement's answer came, the commit's did not: the answer if it committed. */
		if (res && (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) && xid[0] != '-')
			*done = res;
		else
			PQclear(res);
		return NULL;
	}
	return res;
}

/*
 * Whether transaction xid committed, asked on a connection made again:
 * 1 committed, 0 not, -1 unknown (no connection, or the server has no
 * record of it: a crash took it).  A backend the server is still ending
 * shows it in progress for a moment.
 */
static int pq_resolve(struct meta_pg *m, const char *xid)
{
	int64_t deadline = pq_now_ms() + meta_timeout_ms(&m->base);
	struct pq_params p = { 0 };
	PGresult *r;
	int ret = -1;

	if (!strcmp(xid, "-"))
		return 0;
	if (!xid[0])
		return -1;
	pq_text(&p, xid);
	p.fmt[0] = 0;
	while (ret == -1 && !pq_ready(m, &m->conn)) {
		const char *v;

		r = pq_send_wait(m, m->conn, -1, "SELECT pg_xact_status($1::text::xid8)", &p);
		if (PQresultStatus(r) != PGRES_TUPLES_OK || !PQntuples(r) ||
		    PQgetisnull(r, 0, 0)) {
			PQclear(r);
			break;
		}
		v = PQgetvalue(r, 0, 0);
		ret = !strcmp(v, "committed") ? 1 : !strcmp(v, "aborted") ? 0 : -1;
		PQclear(r);
		if (ret == -1) {
			if (pq_now_ms() >= deadline)
				break;
			poll(NULL, 0, 10);
		}
	}
	return ret;
}

/* What a call on conn may do: read, write, or open a transaction (retried as a read is). */
enum { PQ_K_READ, PQ_K_WRITE, PQ_K_BEGIN };

static int pq_kind_of(const char *sql)
{
	return strncmp(sql, "SELECT", 6) && strncmp(sql, "WITH", 4) ? PQ_K_WRITE : PQ_K_READ;
}

/*
 * Run st (or sql when st < 0) on conn.  Outside a transaction the call
 * first waits for a connection (pq_ready); a read or a BEGIN the lost
 * connection took is run again on a new one.  A write that lost it may
 * or may not have been committed: the caller gets -EIO, and m->lost is
 * set (pq_set_lost).  Inside a transaction the server has rolled it
 * back: -EIO to the caller, who rolls back.
 */
static PGresult *pq_call(struct meta_pg *m, int st, const char *sql, const struct pq_params *p,
			 int kind, int *ret)
{
	int idle, tries;
	char why[300], xid[32] = "";
	PGresult *r, *done = NULL;

	for (tries = 0;; tries++) {
		idle = !m->in_txn;
		if (idle) {
			*ret = pq_ready(m, &m->conn);
			if (*ret)
				return NULL;
		} else if (!m->conn) {
			snprintf(m->err, sizeof(m->err),
				 "%s: the connection to the server was lost in the transaction",
				 m->shown);
			*ret = -EIO;
			return NULL;
		}
		if (idle && kind == PQ_K_WRITE)
			r = pq_write_alone(m, m->conn, st, sql, p, xid, sizeof(xid), &done);
		else
			r = pq_send_wait(m, m->conn, st, sql, p);
		if (!pq_result_lost(m->conn, r)) {
			ExecStatusType s = PQresultStatus(r);

			if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
				if (idle && kind == PQ_K_WRITE)
					__atomic_add_fetch(&m->wseq, 1, __ATOMIC_SEQ_CST);
				*ret = 0;
				return r;
			}
			*ret = pq_error(m, r);
			PQclear(r);
			return NULL;
		}
		if (!r && PQstatus(m->conn) == CONNECTION_OK) {
			/* Silent for meta_timeout (a stopped server): waited for already. */
			snprintf(why, sizeof(why), "no answer from the server for %u s",
				 meta_timeout_ms(&m->base) / 1000);
			pthread_mutex_lock(&m->mu);
			if (!m->down_since)
				m->down_since = pq_now_ms();
			m->last_try = 0;
			pthread_mutex_unlock(&m->mu);
		} else {
			snprintf(why, sizeof(why), "%s",
				 r ? PQresultErrorMessage(r) : PQerrorMessage(m->conn));
		}
		PQclear(r);
		pq_log_lost(m, why);
		pq_drop(m, &m->conn);
		pq_keep_message(m, why);
		if (idle && kind != PQ_K_WRITE && tries < 3)
			continue;
		/*
		 * Rolled back: failed to the caller, who may try again.  Committed:
		 * its result went with the connection, and the caller would take the
		 * write for failed (an object's pages freed that its record names).
		 */
		if (idle && kind == PQ_K_WRITE) {
			int c = pq_resolve(m, xid);

			if (c == 1 && done) {
				__atomic_add_fetch(&m->wseq, 1, __ATOMIC_SEQ_CST);
				meta_log(&m->base, "%s: a write whose commit's answer the lost "
					 "connection took was carried out", m->shown);
				*ret = 0;
				return done;
			}
			PQclear(done);
			if (c != 0)
				pq_set_lost(m, "the connection was lost during a write, whose "
					       "outcome is unknown");
		}
		*ret = -EIO;
		return NULL;
	}
}

PGresult *pq_run(struct meta_pg *m, int st, const struct pq_params *p, int *ret)
{
	return pq_call(m, st, NULL, p, pq_kind_of(pq_sql[st]), ret);
}

PGresult *pq_query(struct meta_pg *m, const char *sql, const struct pq_params *p, int *ret)
{
	return pq_call(m, -1, sql, p, pq_kind_of(sql), ret);
}

int pq_done(struct meta_pg *m, int st, const struct pq_params *p, uint64_t *changed)
{
	int ret;
	PGresult *r = pq_run(m, st, p, &ret);

	if (r) {
		if (changed)
			*changed = strtoull(PQcmdTuples(r), NULL, 10);
		PQclear(r);
	}
	return ret;
}

int pq_exec(struct meta_pg *m, const char *sql, uint64_t *changed)
{
	int ret;
	PGresult *r = pq_query(m, sql, NULL, &ret);

	if (r) {
		if (changed)
			*changed = strtoull(PQcmdTuples(r), NULL, 10);
		PQclear(r);
	}
	return ret;
}

int64_t pq_get_int(const PGresult *r, int i, int c)
{
	const unsigned char *v = (const unsigned char *)PQgetvalue(r, i, c);
	uint64_t x = 0;
	int n = PQgetlength(r, i, c), k;

	if (PQgetisnull(r, i, c))
		return 0;
	for (k = 0; k < n && k < 8; k++)
		x = x << 8 | v[k];
	/* A narrower integer (count(*) is a bigint, but an int4 may appear): its sign. */
	if (n == 4)
		return (int32_t)x;
	if (n == 2)
		return (int16_t)x;
	return (int64_t)x;
}

const char *pq_get_blob(const PGresult *r, int i, int c, size_t *len)
{
	if (PQgetisnull(r, i, c)) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)PQgetlength(r, i, c);
	return PQgetvalue(r, i, c);
}

void pq_row_inode(const PGresult *r, int i, struct meta_inode *in)
{
	in->ino = (uint64_t)pq_get_int(r, i, 0);
	in->parent = (uint64_t)pq_get_int(r, i, 1);
	in->mode = (uint32_t)pq_get_int(r, i, 2);
	in->uid = (uint32_t)pq_get_int(r, i, 3);
	in->gid = (uint32_t)pq_get_int(r, i, 4);
	in->atime = pq_get_int(r, i, 5);
	in->mtime = pq_get_int(r, i, 6);
	in->ctime = pq_get_int(r, i, 7);
	in->size = (uint64_t)pq_get_int(r, i, 8);
	in->bucket = (int32_t)pq_get_int(r, i, 9);
	in->page = (uint64_t)pq_get_int(r, i, 10);
	in->npages = (uint64_t)pq_get_int(r, i, 11);
	in->csum = (uint64_t)pq_get_int(r, i, 12);
	in->state = (int)pq_get_int(r, i, 13);
	in->gen = (uint64_t)pq_get_int(r, i, 14);
	in->prev_bucket = (int32_t)pq_get_int(r, i, 15);
	in->prev_page = (uint64_t)pq_get_int(r, i, 16);
	in->prev_npages = (uint64_t)pq_get_int(r, i, 17);
	in->prev_size = (uint64_t)pq_get_int(r, i, 18);
	in->prev_csum = (uint64_t)pq_get_int(r, i, 19);
	in->nlink = (uint32_t)pq_get_int(r, i, 20);
	in->ext = 0;
}

void pq_row_mapping(const PGresult *r, int i, struct meta_inode *in)
{
	pq_row_inode(r, i, in);
	in->ext = (uint64_t)pq_get_int(r, i, PQ_INODE_NCOLS);
}

int pq_each_inode(const PGresult *r, int ext, meta_ino_fn fn, void *ctx)
{
	struct meta_inode in;
	int i, ret = 0;

	for (i = 0; i < PQntuples(r) && !ret; i++) {
		if (ext)
			pq_row_mapping(r, i, &in);
		else
			pq_row_inode(r, i, &in);
		ret = fn(ctx, &in);
	}
	return ret;
}

int pq_kv_get(struct meta_pg *m, const char *k, int64_t *iv, char *sv, size_t slen)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	pq_text(&p, k);
	r = pq_run(m, PQ_KV_GET, &p, &ret);
	if (!r)
		return ret;
	if (PQntuples(r) == 0) {
		ret = -ENOENT;
	} else {
		size_t n;
		const char *v = pq_get_blob(r, 0, 0, &n);
		char num[32];

		if (iv) {
			snprintf(num, sizeof(num), "%.*s", (int)(n < 31 ? n : 31), v ? v : "");
			*iv = strtoll(num, NULL, 10);
		}
		if (sv && slen)
			snprintf(sv, slen, "%.*s", (int)n, v ? v : "");
	}
	PQclear(r);
	return ret;
}

int pq_kv_set_text(struct meta_pg *m, const char *k, const char *v)
{
	struct pq_params p = { 0 };
	char *keep = !strcmp(k, "store_id") ? m->store_id : !strcmp(k, "created") ? m->created
										  : NULL;
	size_t len = keep == m->store_id ? sizeof(m->store_id) : sizeof(m->created);
	int ret;

	pq_text(&p, k);
	pq_text(&p, v);
	ret = pq_done(m, PQ_KV_SET, &p, NULL);
	/* What a connection made again checks the database against (pq_attach). */
	if (!ret && keep) {
		pthread_mutex_lock(&m->mu);
		snprintf(keep, len, "%s", v);
		pthread_mutex_unlock(&m->mu);
	}
	return ret;
}

int pq_kv_set_int(struct meta_pg *m, const char *k, int64_t v)
{
	char num[32];

	snprintf(num, sizeof(num), "%lld", (long long)v);
	return pq_kv_set_text(m, k, num);
}

static int pq_open_txn(struct meta_pg *m, const char *sql, int write)
{
	int ret;
	PGresult *r;

	if (m->in_txn) {
		snprintf(m->err, sizeof(m->err), "a transaction is open already");
		return -EINVAL;
	}
	r = pq_call(m, -1, sql, NULL, PQ_K_BEGIN, &ret);
	if (!r)
		return ret;
	m->txn_xid[0] = '\0';
	if (write && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r))
		snprintf(m->txn_xid, sizeof(m->txn_xid), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	m->in_txn = 1;
	m->txn_write = write;
	return 0;
}

int pq_begin(struct meta *mb)
{
	/* Its id, for pq_resolve when the COMMIT's answer is lost. */
	return pq_open_txn(pq(mb), "BEGIN; SELECT pg_current_xact_id()::text", 1);
}

/* End conn's transaction with sql: its result, NULL when the connection was lost. */
static PGresult *pq_end_txn(struct meta_pg *m, const char *sql)
{
	PGresult *r = NULL;

	if (m->conn)
		r = pq_send_wait(m, m->conn, -1, sql, NULL);
	m->in_txn = 0;
	if (m->conn && pq_result_lost(m->conn, r)) {
		pq_keep_message(m, r ? PQresultErrorMessage(r) : PQerrorMessage(m->conn));
		pq_log_lost(m, m->err);
		PQclear(r);
		r = NULL;
		pq_drop(m, &m->conn);
	}
	return r;
}

int pq_commit(struct meta *mb)
{
	struct meta_pg *m = pq(mb);
	int write = m->txn_write, ret = 0;
	PGresult *r;

	if (!m->in_txn) {
		snprintf(m->err, sizeof(m->err), "no transaction is open");
		return -EINVAL;
	}
	if (!m->conn) {
		m->in_txn = 0;
		snprintf(m->err, sizeof(m->err),
			 "%s: the connection to the server was lost in the transaction", m->shown);
		return -EIO;
	}
	r = pq_end_txn(m, "COMMIT");
	if (!r) {
		/* The COMMIT may have been carried out before the connection went. */
		int done = write ? pq_resolve(m, m->txn_xid) : 0;

		if (done == 1) {
			__atomic_add_fetch(&m->wseq, 1, __ATOMIC_SEQ_CST);
			meta_log(&m->base, "%s: a commit whose answer the lost connection took "
				 "was carried out", m->shown);
			return 0;
		}
		if (done < 0)
			pq_set_lost(m, "the connection was lost during a commit, whose outcome "
				       "is unknown");
		return -EIO;
	}
	/* A transaction a failed statement aborted answers COMMIT with ROLLBACK. */
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		ret = pq_error(m, r);
	} else if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
		snprintf(m->err, sizeof(m->err), "the transaction was rolled back (%s)",
			 PQcmdStatus(r));
		ret = -EIO;
	} else if (write) {
		__atomic_add_fetch(&m->wseq, 1, __ATOMIC_SEQ_CST);
	}
	PQclear(r);
	if (ret && m->conn && PQtransactionStatus(m->conn) != PQTRANS_IDLE)
		PQclear(pq_end_txn(m, "ROLLBACK"));
	return ret;
}

void pq_rollback(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	if (m->conn && PQtransactionStatus(m->conn) != PQTRANS_IDLE)
		PQclear(pq_end_txn(m, "ROLLBACK"));
	m->in_txn = 0;
}

int pq_read_begin(struct meta *mb)
{
	return pq_open_txn(pq(mb), "BEGIN READ ONLY", 0);
}

void pq_read_end(struct meta *mb)
{
	struct meta_pg *m = pq(mb);
	PGresult *r;

	if (!m->in_txn)
		return;
	r = m->conn ? pq_end_txn(m, "COMMIT") : NULL;
	PQclear(r);
	pq_rollback(mb);
}

const char *pq_errmsg(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	return m->err[0] ? m->err : "no error";
}
