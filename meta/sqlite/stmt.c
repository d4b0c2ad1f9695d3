/*
 * stmt.c: the helpers every file of the sqlite engine shares (sqlite_int.h):
 * running statements and turning sqlite's codes into errnos, the settings
 * table, transactions, and reading inode rows.  The engine's floor: it
 * calls nothing in the other files.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <stdio.h>

#include <sqlite3.h>

int sq_begin(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	return sq_step_done(m, m->st[ST_BEGIN]);
}

int sq_commit(struct meta *mb)
{
	struct meta_sq *m = sq(mb);
	int ret = sq_step_done(m, m->st[ST_COMMIT]);

	if (ret)
		sq_rollback(&m->base);
	return ret;
}

int sq_read_begin(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	return sq_step_done(m, m->st[ST_BEGIN_READ]);
}

void sq_read_end(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	/* A read transaction left open would refuse every later BEGIN. */
	if (!sqlite3_get_autocommit(m->db) && sq_step_done(m, m->st[ST_COMMIT]))
		sq_rollback(&m->base);
}

void sq_rollback(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	if (!sqlite3_get_autocommit(m->db))
		sq_step_done(m, m->st[ST_ROLLBACK]);
}

int sq_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EUCLEAN;
	default:
		return -EIO;
	}
}

/* Reset after use so the statement holds no read lock between calls. */
int sq_step_done(struct meta_sq *m, sqlite3_stmt *s)
{
	int own = sqlite3_get_autocommit(m->db);
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	/*
	 * The disk is full: the hook gives space back, and the write is tried
	 * once more when that is safe: a statement that was its own
	 * transaction (sqlite rolled it back; the log is emptied first, its
	 * blocks returned), or a COMMIT that left its transaction open.
	 */
	if ((rc & 0xff) == SQLITE_FULL && m->base.full_hook &&
	    (own || (s == m->st[ST_COMMIT] && !sqlite3_get_autocommit(m->db)))) {
		m->base.full_hook(m->base.full_arg);
		if (own && !__atomic_load_n(&m->log_failed, __ATOMIC_RELAXED))
			sqlite3_wal_checkpoint_v2(m->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL,
						  NULL);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
	}
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		(void)m;
		return sq_errno(rc);
	}
	return 0;
}

void sq_finish(sqlite3_stmt *s)
{
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

int sq_exec(struct meta_sq *m, const char *sql)
{
	return sq_errno(sqlite3_exec(m->db, sql, NULL, NULL, NULL));
}

int sq_kv_get(struct meta_sq *m, const char *k, sqlite3_int64 *iv, char *sv, size_t slen)
{
	sqlite3_stmt *s = m->st[ST_KV_GET];
	int rc, ret = -ENOENT;

	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if (iv)
			*iv = sqlite3_column_int64(s, 0);
		if (sv) {
			const unsigned char *t = sqlite3_column_text(s, 0);
			snprintf(sv, slen, "%s", t ? (const char *)t : "");
		}
		ret = 0;
	} else if (rc != SQLITE_DONE) {
		ret = sq_errno(rc);
	}
	sq_finish(s);
	return ret;
}

int sq_kv_set_int(struct meta_sq *m, const char *k, sqlite3_int64 v)
{
	sqlite3_stmt *s = m->st[ST_KV_SET];

	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, v);
	return sq_step_done(m, s);
}

int sq_kv_set_text(struct meta_sq *m, const char *k, const char *v)
{
	sqlite3_stmt *s = m->st[ST_KV_SET];

	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, v, -1, SQLITE_STATIC);
	return sq_step_done(m, s);
}

void sq_bind_new_inode(sqlite3_stmt *s, const struct meta_inode *in, const char *name,
			 size_t len)
{
	sqlite3_bind_int64(s, 1, (sqlite3_int64)in->parent);
	sqlite3_bind_blob(s, 2, name, (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, in->mode);
	sqlite3_bind_int64(s, 4, in->uid);
	sqlite3_bind_int64(s, 5, in->gid);
	sqlite3_bind_int64(s, 6, in->atime);
	sqlite3_bind_int64(s, 7, in->mtime);
	sqlite3_bind_int64(s, 8, in->ctime);
	sqlite3_bind_int64(s, 9, (sqlite3_int64)in->size);
	sqlite3_bind_int(s, 10, in->bucket);
	sqlite3_bind_int64(s, 11, (sqlite3_int64)in->page);
	sqlite3_bind_int64(s, 12, (sqlite3_int64)in->npages);
	sqlite3_bind_int64(s, 13, (sqlite3_int64)in->csum);
	sqlite3_bind_int(s, 14, in->state);
}

void sq_row_inode(sqlite3_stmt *s, struct meta_inode *in)
{
	in->ino = (uint64_t)sqlite3_column_int64(s, 0);
	in->parent = (uint64_t)sqlite3_column_int64(s, 1);
	in->mode = (uint32_t)sqlite3_column_int64(s, 2);
	in->uid = (uint32_t)sqlite3_column_int64(s, 3);
	in->gid = (uint32_t)sqlite3_column_int64(s, 4);
	in->atime = sqlite3_column_int64(s, 5);
	in->mtime = sqlite3_column_int64(s, 6);
	in->ctime = sqlite3_column_int64(s, 7);
	in->size = (uint64_t)sqlite3_column_int64(s, 8);
	in->bucket = sqlite3_column_int(s, 9);
	in->page = (uint64_t)sqlite3_column_int64(s, 10);
	in->npages = (uint64_t)sqlite3_column_int64(s, 11);
	in->csum = (uint64_t)sqlite3_column_int64(s, 12);
	in->state = sqlite3_column_int(s, 13);
	in->gen = (uint64_t)sqlite3_column_int64(s, 14);
	in->prev_bucket = sqlite3_column_int(s, 15);
	in->prev_page = (uint64_t)sqlite3_column_int64(s, 16);
	in->prev_npages = (uint64_t)sqlite3_column_int64(s, 17);
	in->prev_size = (uint64_t)sqlite3_column_int64(s, 18);
	in->prev_csum = (uint64_t)sqlite3_column_int64(s, 19);
	in->nlink = (uint32_t)sqlite3_column_int64(s, 20);
	in->ext = 0;
}

void sq_row_mapping(sqlite3_stmt *s, struct meta_inode *in)
{
	sq_row_inode(s, in);
	in->ext = (uint64_t)sqlite3_column_int64(s, INODE_NCOLS);
}

/* Step s to the end, each row read by row, calling fn until it returns non-zero. */
static int sq_each_row(sqlite3_stmt *s, void (*row)(sqlite3_stmt *, struct meta_inode *),
		       meta_ino_fn fn, void *ctx)
{
	struct meta_inode in;
	int rc, ret = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		row(s, &in);
		ret = fn(ctx, &in);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sq_errno(rc);
	sq_finish(s);
	return ret;
}

int sq_each_mapping(sqlite3_stmt *s, meta_ino_fn fn, void *ctx)
{
	return sq_each_row(s, sq_row_mapping, fn, ctx);
}

int sq_one_inode(sqlite3_stmt *s, struct meta_inode *out)
{
	int rc = sqlite3_step(s), ret;

	if (rc == SQLITE_ROW) {
		sq_row_inode(s, out);
		ret = 0;
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
	}
	sq_finish(s);
	return ret;
}

int sq_changed_one(struct meta_sq *m, int ret)
{
	if (!ret && sqlite3_changes(m->db) == 0)
		return -ENOENT;
	return ret;
}

/* Run statement st with ?1 = id: 1 when it returns a row, 0 when not. */
int sq_exists(struct meta_sq *m, int st, uint64_t id)
{
	sqlite3_stmt *s = m->st[st];
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	rc = sqlite3_step(s);
	sq_finish(s);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : sq_errno(rc);
}

/* Step s to the end, calling fn on each row until it returns non-zero. */
int sq_each_inode(sqlite3_stmt *s, meta_ino_fn fn, void *ctx)
{
	return sq_each_row(s, sq_row_inode, fn, ctx);
}
