/*
 * pg_int.h: what the files of the PostgreSQL engine share, and nothing
 * else includes.  meta.h is the interface and engine.h the table the
 * engine fills (ops.c); this is how the engine keeps its state behind it.
 *
 * The store is the tables of one schema, "offloadfs", in the database a
 * libpq URI names.  Every statement the engine runs more than rarely is
 * prepared once at open (open.c holds their text), run with binary
 * parameters and results (every integer column is a bigint), and its
 * whole result read before a callback sees a row, so that a callback may
 * run statements of its own.  The files: stmt.c (running statements,
 * errors, transactions, what a lost connection took), open.c
 * (connecting, the schema, its version, the exclusive lock, settings),
 * reconnect.c (connections made again), sync.c (the durability
 * barrier, and what a crash of the server voids), ns.c,
 * xattr.c, object.c, extent.c, snapshot.c, task.c, evict.c: as the
 * sqlite engine's of those names.  Each method of the table is the pq_
 * function of its name.
 */
#ifndef OFFLOADFS_META_PG_INT_H
#define OFFLOADFS_META_PG_INT_H

#include <pthread.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "engine.h"

#define PQ_SCHEMA "offloadfs"
#define PQ_STR_(x) #x
#define PQ_STR(x) PQ_STR_(x)

/* The prepared statements, by index; their SQL text is pq_sql[] in open.c. */
enum {
	PQ_GET,
	PQ_LOOKUP,
	PQ_LOOKUP_BRIEF,
	PQ_NAME,
	PQ_INSERT,
	PQ_UPDATE,
	PQ_DELETE,
	PQ_DETACH,
	PQ_MOVE,
	PQ_MOVE_TAKEN,
	PQ_HAS_CHILDREN,
	PQ_READDIR,
	PQ_MAPPINGS,
	PQ_COUNT_MAPPINGS,
	PQ_COUNT_FILES,
	PQ_KV_GET,
	PQ_KV_SET,
	PQ_BITMAP_SAVE,
	PQ_BITMAP_LOAD,
	PQ_COMMIT_OBJECT,
	PQ_INSERT_OBJECT,
	PQ_PCSUMS_GET,
	PQ_UNSYNCED,
	PQ_VALUES,
	PQ_TASK_ADD,
	PQ_TASK_CLAIM,
	PQ_TASK_FINISH,
	PQ_TASK_PENDING,
	PQ_DIR_CHANGED,
	PQ_XATTR_GET,
	PQ_XATTR_INSERT,
	PQ_XATTR_UPDATE,
	PQ_XATTR_REMOVE,
	PQ_XATTR_LIST,
	PQ_XATTR_TOTAL,
	PQ_EXTENT_COMMIT,
	PQ_EXTENT_DELETE,
	PQ_EXTENTS,
	PQ_EXTENT_PCSUMS,
	PQ_N
};

/* The columns of struct meta_inode, in pq_row_inode's order. */
#define PQ_INODE_COLS "ino, parent, mode, uid, gid, atime, mtime, ctime, size, " \
		      "bucket, page, npages, csum, state, gen, prev_bucket, prev_page, " \
		      "prev_npages, prev_size, prev_csum, nlink"
#define PQ_INODE_NCOLS 21
/* An extent's row as an inode's, and its index + 1 as column 22 (as the sqlite engine's). */
#define PQ_EXTENT_COLS "e.ino, i.parent, i.mode, i.uid, i.gid, i.atime, i.mtime, i.ctime, " \
		       "e.size, e.bucket, e.page, e.npages, e.csum, i.state, e.gen, " \
		       "e.prev_bucket, e.prev_page, e.prev_npages, e.prev_size, e.prev_csum, " \
		       "i.nlink, e.idx + 1"

/*
 * One connection to one store; used by one thread at a time (meta.h),
 * but for meta_sync_end on its own connection.  A connection the server
 * dropped is made again by the next call that needs one (reconnect.c).
 */
struct meta_pg {
	struct meta base;  /* first: what meta.c and the callers hold */
	PGconn *conn;      /* NULL: lost, made again by the next call */
	/*
	 * meta_sync_end's own connection: it runs beside the other calls,
	 * and one libpq connection serves one statement at a time.
	 */
	PGconn *sync_conn;
	char *uri;         /* to connect again (it holds no password) */
	char *shown;       /* the URI without its password, for messages */
	char err[512];     /* the last error, for meta_errmsg */
	/* What the rest of reconnect.c's state is guarded by (both connections use it). */
	pthread_mutex_t mu;
	/*
	 * The server's pg_stat_bgwriter.stats_reset when a connection was
	 * last made: a server that restarted after a crash (an immediate
	 * stop, a power cut, a backend's crash) resets it, a clean restart
	 * keeps it.  Commits of sync_commit=off since the last durable
	 * barrier do not survive the crash.
	 */
	char crash_mark[64];
	char store_id[64], created[32]; /* the store's, checked on every new connection */
	unsigned crashes;  /* crashes seen (crash_mark changes): a barrier across one fails */
	unsigned bar_crashes; /* crashes when the barrier began (meta_sync_begin) */
	uint64_t wseq;     /* write commits made, counted on conn */
	uint64_t bar_wseq; /* wseq at meta_sync_begin's commit */
	uint64_t durable;  /* wseq covered by the last barrier that completed */
	/*
	 * Set when commits may have been lost (a crash after commits no
	 * barrier covered, or a commit whose outcome the lost connection
	 * took with it): from then on every barrier fails and the store is
	 * never marked clean, so that the next mount recovers it.
	 */
	int lost;
	/* A store not ours behind the URI, or another daemon holding it: every call fails. */
	int fenced;
	int in_txn, txn_write; /* a transaction is open on conn (meta_begin: one that writes) */
	char txn_xid[32];  /* its transaction id, for a COMMIT whose answer is lost */
	int64_t down_since; /* monotonic ms of the wait that gave up (0: none): fail fast */
	int64_t last_try;   /* monotonic ms of the last attempt while failing fast */
};

static inline struct meta_pg *pq(struct meta *m)
{
	return (struct meta_pg *)m;
}

/* Parameters of one statement, bound binary (PQ_MAXP at most). */
#define PQ_MAXP 24
struct pq_params {
	int n;
	const char *val[PQ_MAXP];
	int len[PQ_MAXP];
	int fmt[PQ_MAXP];
	uint64_t be[PQ_MAXP];  /* integers in network order, which val points into */
};

void pq_int(struct pq_params *p, int64_t v);
/* NULL: SQL NULL. */
void pq_blob(struct pq_params *p, const void *v, size_t len);
void pq_text(struct pq_params *p, const char *s);

/*
 * Run prepared statement st: its result, which the caller PQclear()s, or
 * NULL with *ret the error (m->err says it).
 */
PGresult *pq_run(struct meta_pg *m, int st, const struct pq_params *p, int *ret);
/* Run a statement that returns no row of interest; *changed (may be NULL): rows it changed. */
int pq_done(struct meta_pg *m, int st, const struct pq_params *p, uint64_t *changed);
/* Run SQL text once (rare statements: schema, recovery, maintenance). */
int pq_exec(struct meta_pg *m, const char *sql, uint64_t *changed);
/* Run SQL text (with parameters p, or none) as pq_run runs a statement. */
PGresult *pq_query(struct meta_pg *m, const char *sql, const struct pq_params *p, int *ret);
/*
 * Send st (or SQL text when st < 0) on c and read its results, giving up
 * when the server says nothing for meta_timeout: the last result (an
 * error stays), or NULL when the connection was lost.  Changes nothing
 * but c.
 */
PGresult *pq_send_wait(struct meta_pg *m, PGconn *c, int st, const char *sql,
		       const struct pq_params *p);
/* Read the results of what was sent on c, as pq_send_wait. */
PGresult *pq_results(struct meta_pg *m, PGconn *c);
/* Prepare every statement on c: 0, or the error with err saying it. */
int pq_prepare_on(struct meta_pg *m, PGconn *c, char *err, size_t errlen);
/* msg on one line in buf. */
void pq_one_line(char *buf, size_t len, const char *msg);
/* The statements' text (open.c). */
extern const char *const pq_sql[PQ_N];
/* The errno of a failed result (NULL: the connection's), its message kept in m->err. */
int pq_error(struct meta_pg *m, const PGresult *r);

/*
 * reconnect.c: a usable connection in *c (m->conn or m->sync_conn) before
 * a call that opens no transaction: the one there if the server has not
 * dropped it, else a new one, waited for up to meta_timeout; -EIO with
 * m->err saying why when there is none.
 */
int pq_ready(struct meta_pg *m, PGconn **c);
/* *c was lost: closed, so that the next pq_ready makes a new one. */
void pq_drop(struct meta_pg *m, PGconn **c);
/* Log that a connection was lost, and why. */
void pq_log_lost(struct meta_pg *m, const char *why);
/* A commit whose outcome is unknown, or commits a crash may have taken: see m->lost. */
void pq_set_lost(struct meta_pg *m, const char *why);
/* Settings, the lock, the checks and the statements of a new connection (open.c). */
int pq_attach(struct meta_pg *m, PGconn *c, int main, int first, char *err, size_t errlen);
int64_t pq_now_ms(void);
/* m->lost, with m->err saying what it means (sync.c). */
int pq_is_lost(struct meta_pg *m);

/* Column c of row i: an integer (NULL: 0), a blob and its length. */
int64_t pq_get_int(const PGresult *r, int i, int c);
const char *pq_get_blob(const PGresult *r, int i, int c, size_t *len);
void pq_row_inode(const PGresult *r, int i, struct meta_inode *in);
/* Row i of INODE_COLS then the extent column. */
void pq_row_mapping(const PGresult *r, int i, struct meta_inode *in);
/* Each row as an inode (ext: with the extent column), fn on each until it returns non-zero. */
int pq_each_inode(const PGresult *r, int ext, meta_ino_fn fn, void *ctx);

/*
 * Insert the row of a new inode (its name as given, even empty: the
 * root's); sets in->ino.  -EEXIST when the name is taken.
 */
int pq_insert_row(struct meta_pg *m, struct meta_inode *in, const char *name, size_t len);

/* The pcsums column of st's one row: -ENOENT when none, -EUCLEAN when not n sums. */
int pq_pcsums_row(struct meta_pg *m, int st, struct pq_params *p, uint64_t *pcsums, uint64_t n);

int pq_kv_get(struct meta_pg *m, const char *k, int64_t *iv, char *sv, size_t slen);
int pq_kv_set_int(struct meta_pg *m, const char *k, int64_t v);
int pq_kv_set_text(struct meta_pg *m, const char *k, const char *v);

/* The methods of meta_pg_ops (meta.h says what each does). */
int pq_open(const char *uri, int create, struct meta **out, char *err, size_t errlen);
void pq_close(struct meta *m);
int pq_forked(struct meta *m);
const char *pq_errmsg(struct meta *m);
int pq_format(struct meta *m, const struct meta_geom *g, const char *backend, uint32_t root_mode,
	      uint32_t uid, uint32_t gid);
int pq_geom_get(struct meta *m, struct meta_geom *g, char *backend, size_t blen);
int pq_setting_get(struct meta *m, const char *name, char *buf, size_t len);
int pq_setting_set(struct meta *m, const char *name, const char *value);
int pq_begin(struct meta *m);
int pq_commit(struct meta *m);
void pq_rollback(struct meta *m);
int pq_read_begin(struct meta *m);
void pq_read_end(struct meta *m);
int pq_sync(struct meta *m, uint64_t synced_gen);
int pq_sync_begin(struct meta *m, uint64_t synced_gen);
int pq_sync_end(struct meta *m);
int pq_synced_gen(struct meta *m, uint64_t *gen);
int pq_checkpoint(struct meta *m);
int pq_make_room(struct meta *m);
int pq_get(struct meta *m, uint64_t ino, struct meta_inode *out);
int pq_lookup(struct meta *m, uint64_t parent, const char *name, size_t len,
	      struct meta_inode *out);
int pq_lookup_brief(struct meta *m, uint64_t parent, const char *name, size_t len,
		    struct meta_inode *out);
int pq_insert(struct meta *m, struct meta_inode *in, const char *name, size_t len);
int pq_move(struct meta *m, uint64_t ino, uint64_t newparent, const char *name, size_t len);
int pq_detach(struct meta *m, uint64_t ino);
int pq_delete(struct meta *m, uint64_t ino);
int pq_dir_changed(struct meta *m, uint64_t dir, int64_t now, uint32_t *nlink);
int pq_has_children(struct meta *m, uint64_t dir);
int pq_readdir(struct meta *m, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx);
int pq_name(struct meta *m, uint64_t ino, uint64_t *parent, char *name, size_t *len);
int pq_key_len(struct meta *m, uint64_t ino, size_t *len);
int pq_subtree_depth(struct meta *m, uint64_t dir, size_t *len);
ssize_t pq_xattr_get(struct meta *m, uint64_t ino, const char *name, void *buf, size_t cap);
int pq_xattr_set(struct meta *m, uint64_t ino, const char *name, const void *value, size_t len,
		 int flags);
int pq_xattr_remove(struct meta *m, uint64_t ino, const char *name);
ssize_t pq_xattr_list(struct meta *m, uint64_t ino, char *buf, size_t cap);
int pq_update(struct meta *m, const struct meta_inode *in);
int pq_commit_object(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
		     uint64_t n, const char *skey, enum meta_skey_op op);
int pq_insert_object(struct meta *m, struct meta_inode *in, const char *name, size_t len,
		     const uint64_t *pcsums, uint64_t n);
int pq_pcsums_get(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n);
int pq_foreach_mapping(struct meta *m, meta_ino_fn fn, void *ctx);
int pq_count_mappings(struct meta *m, uint64_t *n);
int pq_foreach_value(struct meta *m, meta_value_fn fn, void *ctx);
int pq_count_files(struct meta *m, uint64_t *n);
int pq_integrity(struct meta *m, char *first, size_t firstlen);
int pq_extent_commit(struct meta *m, const struct meta_inode *e, const uint64_t *pcsums,
		     uint64_t n, const char *skey, enum meta_skey_op op);
int pq_extent_delete(struct meta *m, uint64_t ino, uint64_t idx);
int pq_extents(struct meta *m, uint64_t ino, meta_ino_fn fn, void *ctx);
int pq_extent_pcsums_get(struct meta *m, uint64_t ino, uint64_t idx, uint64_t *pcsums, uint64_t n);
int pq_extent_from_row(struct meta *m, uint64_t ino);
int pq_extent_to_row(struct meta *m, uint64_t ino);
int pq_extents_stray(struct meta *m, int drop, uint64_t *n);
int pq_count_unsettled(struct meta *m, uint64_t *new_files, uint64_t *orphans);
int pq_recover(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans);
int pq_foreach_unsynced(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx);
int pq_prev_clear(struct meta *m);
int pq_clean_get(struct meta *m, int *clean);
int pq_clean_set(struct meta *m, int clean);
int pq_bitmap_save(struct meta *m, uint32_t bucket, uint64_t npages, const uint64_t *words,
		   uint64_t nwords);
int pq_bitmap_load(struct meta *m, uint32_t bucket, uint64_t npages, uint64_t *words,
		   uint64_t nwords);
int pq_bitmap_clear(struct meta *m);
int pq_task_add(struct meta *m, struct meta_task *t);
int pq_task_claim(struct meta *m, struct meta_task *t);
int pq_task_finish(struct meta *m, uint64_t id, int state, const char *error);
int pq_task_pending(struct meta *m, uint64_t ino);
int pq_task_requeue(struct meta *m, uint64_t *n);
int pq_task_count(struct meta *m, int state, uint64_t *n);
int pq_task_prune(struct meta *m, uint64_t keep);
int pq_lru(struct meta *m, int64_t after_atime, uint64_t after_ino, int64_t before,
	   unsigned limit, meta_ino_fn fn,
	   void *ctx);
int pq_set_atimes(struct meta *m, const uint64_t *inos, const int64_t *atimes, size_t n);
int pq_xattr_count(struct meta *m, const char *name, uint64_t *n);
int pq_tenant_pages(struct meta *m, uint64_t tenant, uint64_t *pages);
int pq_tenant_xattrs(struct meta *m, const char *name, meta_tenant_fn fn, void *ctx);
int pq_tenant_evictions_set(struct meta *m, uint64_t tenant, uint64_t count, uint64_t bytes);
int pq_tenant_evictions_drop(struct meta *m, uint64_t tenant);
int pq_tenant_evictions(struct meta *m, meta_evictions_fn fn, void *ctx);

#endif
