/*
 * promote: the DRAM tier's promotion tasks, kept in the metadata (tasks).
 * The caller runs the worker thread: claim a task, run it, wait when there
 * is none.  Negative errno.
 */
#ifndef OFFLOADFS_PROMOTE_H
#define OFFLOADFS_PROMOTE_H

#include "object.h"

/*
 * Queue a promotion of m's committed version: 1 when a task was added
 * (wake the worker), 0 when there is nothing to do (an empty object, one
 * already queued, or but for the warm-up one already resident), -EINVAL
 * for what cannot be promoted, -EOPNOTSUPP without a DRAM tier.  Under
 * s->lock.
 */
int ofs_promote_queue(struct ofs_store *s, const struct meta_inode *m, const char *reason);
/* Claim the oldest queued task; -ENOENT when there is none.  Takes s->lock. */
int ofs_promote_claim(struct ofs_store *s, struct meta_task *t);
/* Carry out a claimed task: never on stale pages, never blocking a reader; its end recorded. */
void ofs_promote_run(struct ofs_store *s, const struct meta_task *t);
/* At mount: tasks a crash interrupted run again.  Takes s->lock. */
void ofs_promote_requeue(struct ofs_store *s);
/* At unmount: every resident object queued, so the next mount warms itself up. */
void ofs_promote_warmup(struct ofs_store *s);

#endif
