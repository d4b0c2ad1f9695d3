/*
 * task.c: promotion tasks of the DRAM tier: queued, claimed by the
 * worker, finished; kept for operators until pruned.
 */
#include "pg_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t pq_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int pq_task_add(struct meta *mb, struct meta_task *t)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	t->created = pq_wall_ns();
	t->state = META_TASK_QUEUED;
	pq_int(&p, (int64_t)t->ino);
	pq_text(&p, t->key);
	pq_text(&p, t->reason);
	pq_int(&p, (int64_t)t->size);
	pq_int(&p, t->bucket);
	pq_int(&p, (int64_t)t->page);
	pq_int(&p, (int64_t)t->csum);
	pq_int(&p, t->created);
	r = pq_run(pq(mb), PQ_TASK_ADD, &p, &ret);
	if (!r)
		return ret;
	t->id = (uint64_t)pq_get_int(r, 0, 0);
	PQclear(r);
	return 0;
}

static void pq_get_text(const PGresult *r, int c, char *buf, size_t cap)
{
	size_t n;
	const char *v = pq_get_blob(r, 0, c, &n);

	snprintf(buf, cap, "%.*s", (int)n, v ? v : "");
}

int pq_task_claim(struct meta *mb, struct meta_task *t)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int64_t now = pq_wall_ns();
	int ret;

	memset(t, 0, sizeof(*t));
	pq_int(&p, now);
	r = pq_run(pq(mb), PQ_TASK_CLAIM, &p, &ret);
	if (!r)
		return ret;
	if (!PQntuples(r)) {
		PQclear(r);
		return -ENOENT;
	}
	t->id = (uint64_t)pq_get_int(r, 0, 0);
	t->ino = (uint64_t)pq_get_int(r, 0, 1);
	pq_get_text(r, 2, t->key, sizeof(t->key));
	pq_get_text(r, 3, t->reason, sizeof(t->reason));
	t->size = (uint64_t)pq_get_int(r, 0, 4);
	t->bucket = (int32_t)pq_get_int(r, 0, 5);
	t->page = (uint64_t)pq_get_int(r, 0, 6);
	t->csum = (uint64_t)pq_get_int(r, 0, 7);
	t->created = pq_get_int(r, 0, 8);
	t->started = now;
	t->state = META_TASK_RUNNING;
	PQclear(r);
	return 0;
}

int pq_task_finish(struct meta *mb, uint64_t id, int state, const char *error)
{
	struct pq_params p = { 0 };
	uint64_t changed = 0;
	int ret;

	pq_int(&p, (int64_t)id);
	pq_int(&p, state);
	pq_int(&p, pq_wall_ns());
	pq_text(&p, error);
	ret = pq_done(pq(mb), PQ_TASK_FINISH, &p, &changed);
	return !ret && changed == 0 ? -ENOENT : ret;
}

int pq_task_pending(struct meta *mb, uint64_t ino)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	pq_int(&p, (int64_t)ino);
	r = pq_run(pq(mb), PQ_TASK_PENDING, &p, &ret);
	if (!r)
		return ret;
	ret = PQntuples(r) > 0;
	PQclear(r);
	return ret;
}

int pq_task_requeue(struct meta *mb, uint64_t *n)
{
	int ret = pq_exec(pq(mb),
			  "UPDATE " PQ_SCHEMA ".tasks SET state = 0, started = NULL WHERE state = 1",
			  n);

	if (ret)
		*n = 0;
	return ret;
}

int pq_task_count(struct meta *mb, int state, uint64_t *n)
{
	struct meta_pg *m = pq(mb);
	char sql[128];
	PGresult *r;
	int ret = 0;

	*n = 0;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM " PQ_SCHEMA ".tasks WHERE state = %d",
		 state);
	r = pq_query(m, sql, NULL, &ret);
	if (r && PQntuples(r))
		*n = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return ret;
}

int pq_task_prune(struct meta *mb, uint64_t keep)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
		 "DELETE FROM " PQ_SCHEMA ".tasks WHERE state >= 2 AND id NOT IN (SELECT id FROM "
		 PQ_SCHEMA ".tasks WHERE state >= 2 ORDER BY id DESC LIMIT %llu)",
		 (unsigned long long)keep);
	return pq_exec(pq(mb), sql, NULL);
}
