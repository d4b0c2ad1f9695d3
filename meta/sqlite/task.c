/*
 * task.c: promotion tasks of the DRAM tier: queued, claimed by the
 * worker, finished; kept for operators until pruned.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t sq_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int sq_task_add(struct meta *mb, struct meta_task *t)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_TASK_ADD];
	int ret;

	t->created = sq_wall_ns();
	t->state = META_TASK_QUEUED;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)t->ino);
	sqlite3_bind_text(s, 2, t->key, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, t->reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)t->size);
	sqlite3_bind_int(s, 5, t->bucket);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)t->page);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)t->csum);
	sqlite3_bind_int64(s, 8, t->created);
	ret = sq_step_done(m, s);
	if (!ret)
		t->id = (uint64_t)sqlite3_last_insert_rowid(m->db);
	return ret;
}

int sq_task_claim(struct meta *mb, struct meta_task *t)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_TASK_NEXT];
	int rc, ret;

	memset(t, 0, sizeof(*t));
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const unsigned char *k = sqlite3_column_text(s, 2), *r = sqlite3_column_text(s, 3);

		t->id = (uint64_t)sqlite3_column_int64(s, 0);
		t->ino = (uint64_t)sqlite3_column_int64(s, 1);
		snprintf(t->key, sizeof(t->key), "%s", k ? (const char *)k : "");
		snprintf(t->reason, sizeof(t->reason), "%s", r ? (const char *)r : "");
		t->size = (uint64_t)sqlite3_column_int64(s, 4);
		t->bucket = sqlite3_column_int(s, 5);
		t->page = (uint64_t)sqlite3_column_int64(s, 6);
		t->csum = (uint64_t)sqlite3_column_int64(s, 7);
		t->created = sqlite3_column_int64(s, 8);
		ret = 0;
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
	}
	sq_finish(s);
	if (ret)
		return ret;
	s = m->st[ST_TASK_START];
	t->started = sq_wall_ns();
	t->state = META_TASK_RUNNING;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)t->id);
	sqlite3_bind_int64(s, 2, t->started);
	return sq_step_done(m, s);
}

int sq_task_finish(struct meta *mb, uint64_t id, int state, const char *error)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_TASK_FINISH];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	sqlite3_bind_int(s, 2, state);
	sqlite3_bind_int64(s, 3, sq_wall_ns());
	if (error)
		sqlite3_bind_text(s, 4, error, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 4);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_task_pending(struct meta *mb, uint64_t ino)
{
	struct meta_sq *m = sq(mb);

	return sq_exists(m, ST_TASK_PENDING, ino);
}

int sq_task_requeue(struct meta *mb, uint64_t *n)
{
	struct meta_sq *m = sq(mb);
	int ret = sq_exec(m, "UPDATE tasks SET state = 0, started = NULL WHERE state = 1");

	*n = ret ? 0 : (uint64_t)sqlite3_changes(m->db);
	return ret;
}

int sq_task_count(struct meta *mb, int state, uint64_t *n)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = NULL;
	int rc;

	*n = 0;
	rc = sqlite3_prepare_v2(m->db, "SELECT count(*) FROM tasks WHERE state = ?1", -1, &s, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(s, 1, state);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*n = (uint64_t)sqlite3_column_int64(s, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(s);
	return sq_errno(rc);
}

int sq_task_prune(struct meta *mb, uint64_t keep)
{
	struct meta_sq *m = sq(mb);
	char sql[200];

	snprintf(sql, sizeof(sql),
		 "DELETE FROM tasks WHERE state >= 2 AND id NOT IN (SELECT id FROM tasks "
		 "WHERE state >= 2 ORDER BY id DESC LIMIT %llu)",
		 (unsigned long long)keep);
	return sq_exec(m, sql);
}

