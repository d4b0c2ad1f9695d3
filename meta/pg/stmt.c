/*
 * stmt.c: the helpers every file of the PostgreSQL engine shares
 * (pg_int.h): binding parameters, running statements and turning the
 * server's errors into errnos, reading rows, the settings table, and
 * transactions.  The engine's floor: it calls nothing in the other files.
 */
#include "pg_int.h"

#include <endian.h>
#include <errno.h>
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

/* The server's message, on one line. */
static void pq_keep_message(struct meta_pg *m, const char *msg)
{
	char *nl;

	snprintf(m->err, sizeof(m->err), "%s", msg && *msg ? msg : "unknown error");
	while ((nl = strchr(m->err, '\n')))
		*nl = nl[1] ? ' ' : '\0';
}

int pq_error(struct meta_pg *m, const PGresult *r)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	pq_keep_message(m, r ? PQresultErrorMessage(r) : PQerrorMessage(m->conn));
	if (!state)
		return -EIO; /* the connection, not the statement */
	if (!strcmp(state, "23505"))
		return -EEXIST; /* unique_violation */
	if (!strcmp(state, "53100"))
		return -ENOSPC; /* disk_full */
	if (!strcmp(state, "53200"))
		return -ENOMEM;
	if (!strncmp(state, "40", 2) || !strcmp(state, "55P03"))
		return -EBUSY; /* serialization, deadlock, lock not available */
	if (!strncmp(state, "42", 2))
		return -EUCLEAN; /* the schema is not what the statement expects */
	return -EIO;
}

PGresult *pq_run(struct meta_pg *m, int st, const struct pq_params *p, int *ret)
{
	char name[16];
	PGresult *r;
	ExecStatusType s;

	snprintf(name, sizeof(name), "s%d", st);
	r = PQexecPrepared(m->conn, name, p ? p->n : 0, p ? p->val : NULL, p ? p->len : NULL,
			   p ? p->fmt : NULL, 1);
	s = PQresultStatus(r);
	if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
		*ret = 0;
		return r;
	}
	*ret = pq_error(m, r);
	PQclear(r);
	return NULL;
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
	PGresult *r = PQexec(m->conn, sql);
	ExecStatusType s = PQresultStatus(r);
	int ret = 0;

	if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK)
		ret = pq_error(m, r);
	else if (changed)
		*changed = strtoull(PQcmdTuples(r), NULL, 10);
	PQclear(r);
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

	pq_text(&p, k);
	pq_text(&p, v);
	return pq_done(m, PQ_KV_SET, &p, NULL);
}

int pq_kv_set_int(struct meta_pg *m, const char *k, int64_t v)
{
	char num[32];

	snprintf(num, sizeof(num), "%lld", (long long)v);
	return pq_kv_set_text(m, k, num);
}

int pq_begin(struct meta *mb)
{
	return pq_exec(pq(mb), "BEGIN", NULL);
}

int pq_commit(struct meta *mb)
{
	struct meta_pg *m = pq(mb);
	PGresult *r = PQexec(m->conn, "COMMIT");
	int ret = 0;

	/* A transaction a failed statement aborted answers COMMIT with ROLLBACK. */
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		ret = pq_error(m, r);
	else if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
		snprintf(m->err, sizeof(m->err), "the transaction was rolled back (%s)",
			 PQcmdStatus(r));
		ret = -EIO;
	}
	PQclear(r);
	if (ret)
		pq_rollback(mb);
	return ret;
}

void pq_rollback(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	if (PQtransactionStatus(m->conn) != PQTRANS_IDLE)
		PQclear(PQexec(m->conn, "ROLLBACK"));
}

int pq_read_begin(struct meta *mb)
{
	return pq_exec(pq(mb), "BEGIN READ ONLY", NULL);
}

void pq_read_end(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	if (PQtransactionStatus(m->conn) != PQTRANS_IDLE && pq_exec(m, "COMMIT", NULL))
		pq_rollback(mb);
}

const char *pq_errmsg(struct meta *mb)
{
	struct meta_pg *m = pq(mb);

	return m->err[0] ? m->err : "no error";
}
