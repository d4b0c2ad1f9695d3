#include <check.h>
#include <string.h>

#include "helpers.h"

void fill(char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 37 + i * 11 + (i >> 8));
}

struct meta_inode new_record(struct ofs_store *s, const char *name)
{
	struct meta_inode m = { 0 };

	m.parent = META_ROOT_INO;
	m.mode = 0100644;
	m.bucket = -1;
	m.prev_bucket = -1;
	m.state = META_NEW;
	ck_assert_int_eq(meta_insert(s->meta, &m, name, strlen(name)), 0);
	return m;
}

/* The barrier's hook state: the tests of a binary run one at a time. */
static struct {
	pthread_mutex_t *lock;
	const struct kvb_ops *real;
	void (*commit)(void *);
	void *arg;
	int pending;
} hook;

static void hook_commit(void)
{
	if (!hook.pending || pthread_mutex_trylock(hook.lock) != 0)
		return; /* the barrier holds it: no commit can land here */
	pthread_mutex_unlock(hook.lock);
	hook.pending = 0;
	hook.commit(hook.arg);
}

static uint64_t hook_barrier_begin(void *arg)
{
	hook_commit();
	return hook.real->barrier_begin(arg);
}

static int hook_barrier_sync(void *arg)
{
	hook_commit();
	return hook.real->barrier_sync(arg);
}

int sync_with_commit_inside(struct ofs_store *s, pthread_mutex_t *lock, void (*commit)(void *),
			    void *arg)
{
	struct kvb_ops hooked = *s->kvb.ops;
	int ret;

	hook.lock = lock;
	hook.real = s->kvb.ops;
	hook.commit = commit;
	hook.arg = arg;
	hook.pending = 1;
	hooked.barrier_begin = hook_barrier_begin;
	hooked.barrier_sync = hook_barrier_sync;
	s->kvb.ops = &hooked;
	ret = ofs_store_sync(s, lock, NULL);
	s->kvb.ops = hook.real;
	ck_assert_msg(!hook.pending, "no point of the barrier had the lock free");
	return ret;
}
