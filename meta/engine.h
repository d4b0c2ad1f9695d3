/*
 * engine.h: what a metadata engine gives meta.c, and nothing above meta/
 * includes.  An engine is a const table of methods, one per function of
 * meta.h that is the engine's own, over a struct meta it allocates with
 * this header first.  Callers go through the meta_* wrappers of meta.c,
 * never through the table (sqlite's os.c over its pMethods): a method an
 * engine may leave NULL is answered there, in one place.
 *
 * What every engine shares lives in the header: the fault injection of
 * meta_test.h, the count of writes group commit asks for, and the hook a
 * write that found the disk full calls.
 */
#ifndef OFFLOADFS_META_ENGINE_H
#define OFFLOADFS_META_ENGINE_H

#include "meta.h"

struct meta_ops;

struct meta {
	const struct meta_ops *ops;
	unsigned long fault_at, writes; /* meta_inject_fault */
	uint64_t changes;               /* namespace and object writes, for group commit */
	int (*full_hook)(void *);       /* a write found the disk full: see meta_set_full_hook */
	void *full_arg;
	unsigned timeout_ms;            /* meta_set_timeout (0: META_TIMEOUT_DEFAULT) */
	void (*log)(const char *fmt, ...); /* meta_set_log; NULL: stderr */
};

/* What an engine that reaches a server logs by: m->log, or stderr. */
void meta_log(struct meta *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether the calling thread may wait for a server (meta_thread_nowait). */
int meta_thread_waits(void);
/* m->timeout_ms, or the default. */
unsigned meta_timeout_ms(const struct meta *m);

/*
 * Each method is the meta.h function of its name less "meta_", with its
 * contract.  May be NULL: log_prefetch (nothing to read ahead) and
 * log_failed (never); meta_open asserts every other is set.  meta_open,
 * meta_changes, meta_set_full_hook and meta_path are meta.c's, the same
 * for every engine.
 */
struct meta_ops {
	const char *engine; /* "sqlite", "postgresql" */
	/* Open the store that target names, as meta_open; *out gets the engine's struct meta. */
	int (*open)(const char *target, int create, struct meta **out, char *err, size_t errlen);
	void (*close)(struct meta *m);
	int (*forked)(struct meta *m);
	const char *(*errmsg)(struct meta *m);
	int (*format)(struct meta *m, const struct meta_geom *g, const char *backend,
		      uint32_t root_mode, uint32_t uid, uint32_t gid);
	int (*geom_get)(struct meta *m, struct meta_geom *g, char *backend, size_t blen);
	int (*setting_get)(struct meta *m, const char *name, char *buf, size_t len);
	int (*setting_set)(struct meta *m, const char *name, const char *value);
	int (*begin)(struct meta *m);
	int (*commit)(struct meta *m);
	void (*rollback)(struct meta *m);
	int (*read_begin)(struct meta *m);
	void (*read_end)(struct meta *m);
	int (*sync)(struct meta *m, uint64_t synced_gen);
	int (*sync_begin)(struct meta *m, uint64_t synced_gen);
	int (*sync_end)(struct meta *m);
	void (*log_prefetch)(struct meta *m);
	int (*log_failed)(struct meta *m);
	int (*synced_gen)(struct meta *m, uint64_t *gen);
	int (*checkpoint)(struct meta *m);
	int (*make_room)(struct meta *m);
	int (*get)(struct meta *m, uint64_t ino, struct meta_inode *out);
	int (*lookup)(struct meta *m, uint64_t parent, const char *name, size_t len,
		      struct meta_inode *out);
	int (*lookup_brief)(struct meta *m, uint64_t parent, const char *name, size_t len,
			    struct meta_inode *out);
	int (*insert)(struct meta *m, struct meta_inode *in, const char *name, size_t len);
	int (*move)(struct meta *m, uint64_t ino, uint64_t newparent, const char *name,
		    size_t len);
	int (*detach)(struct meta *m, uint64_t ino);
	int (*delete)(struct meta *m, uint64_t ino);
	int (*dir_changed)(struct meta *m, uint64_t dir, int64_t now, uint32_t *nlink);
	int (*has_children)(struct meta *m, uint64_t dir);
	int (*readdir)(struct meta *m, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx);
	int (*name)(struct meta *m, uint64_t ino, uint64_t *parent, char *name, size_t *len);
	int (*key_len)(struct meta *m, uint64_t ino, size_t *len);
	int (*subtree_depth)(struct meta *m, uint64_t dir, size_t *len);
	ssize_t (*xattr_get)(struct meta *m, uint64_t ino, const char *name, void *buf,
			     size_t cap);
	int (*xattr_set)(struct meta *m, uint64_t ino, const char *name, const void *value,
			 size_t len, int flags);
	int (*xattr_remove)(struct meta *m, uint64_t ino, const char *name);
	ssize_t (*xattr_list)(struct meta *m, uint64_t ino, char *buf, size_t cap);
	int (*update)(struct meta *m, const struct meta_inode *in);
	int (*commit_object)(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
			     uint64_t n, const char *skey, enum meta_skey_op op);
	int (*insert_object)(struct meta *m, struct meta_inode *in, const char *name, size_t len,
			     const uint64_t *pcsums, uint64_t n);
	int (*pcsums_get)(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n);
	int (*foreach_mapping)(struct meta *m, meta_ino_fn fn, void *ctx);
	int (*count_mappings)(struct meta *m, uint64_t *n);
	int (*foreach_value)(struct meta *m, meta_value_fn fn, void *ctx);
	int (*count_files)(struct meta *m, uint64_t *n);
	int (*integrity)(struct meta *m, char *first, size_t firstlen);
	int (*extent_commit)(struct meta *m, const struct meta_inode *e, const uint64_t *pcsums,
			     uint64_t n, const char *skey, enum meta_skey_op op);
	int (*extent_delete)(struct meta *m, uint64_t ino, uint64_t idx);
	int (*extents)(struct meta *m, uint64_t ino, meta_ino_fn fn, void *ctx);
	int (*extent_pcsums_get)(struct meta *m, uint64_t ino, uint64_t idx, uint64_t *pcsums,
				 uint64_t n);
	int (*extent_from_row)(struct meta *m, uint64_t ino);
	int (*extent_to_row)(struct meta *m, uint64_t ino);
	int (*extents_stray)(struct meta *m, int drop, uint64_t *n);
	int (*count_unsettled)(struct meta *m, uint64_t *new_files, uint64_t *orphans);
	int (*recover)(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans);
	int (*foreach_unsynced)(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx);
	int (*prev_clear)(struct meta *m);
	int (*clean_get)(struct meta *m, int *clean);
	int (*clean_set)(struct meta *m, int clean);
	int (*bitmap_save)(struct meta *m, uint32_t bucket, uint64_t npages, const uint64_t *words,
			   uint64_t nwords);
	int (*bitmap_load)(struct meta *m, uint32_t bucket, uint64_t npages, uint64_t *words,
			   uint64_t nwords);
	int (*bitmap_clear)(struct meta *m);
	int (*task_add)(struct meta *m, struct meta_task *t);
	int (*task_claim)(struct meta *m, struct meta_task *t);
	int (*task_finish)(struct meta *m, uint64_t id, int state, const char *error);
	int (*task_pending)(struct meta *m, uint64_t ino);
	int (*task_requeue)(struct meta *m, uint64_t *n);
	int (*task_count)(struct meta *m, int state, uint64_t *n);
	int (*task_prune)(struct meta *m, uint64_t keep);
	int (*lru)(struct meta *m, int64_t after_atime, uint64_t after_ino, int64_t before,
		   unsigned limit,
		   meta_ino_fn fn, void *ctx);
	int (*set_atimes)(struct meta *m, const uint64_t *inos, const int64_t *atimes, size_t n);
	int (*xattr_count)(struct meta *m, const char *name, uint64_t *n);
	int (*tenant_pages)(struct meta *m, uint64_t tenant, uint64_t *pages);
	int (*tenant_xattrs)(struct meta *m, const char *name, meta_tenant_fn fn, void *ctx);
	int (*tenant_evictions_set)(struct meta *m, uint64_t tenant, uint64_t count,
				    uint64_t bytes);
	int (*tenant_evictions_drop)(struct meta *m, uint64_t tenant);
	int (*tenant_evictions)(struct meta *m, meta_evictions_fn fn, void *ctx);
};

/* The engines. */
extern const struct meta_ops meta_sqlite_ops;
extern const struct meta_ops meta_pg_ops;

/*
 * Count a namespace or object write (for meta_changes), and fail it with
 * -EIO when it is the one meta_inject_fault chose.
 */
int meta_fault(struct meta *m);

#endif
