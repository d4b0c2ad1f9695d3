/*
 * uring.c: FUSE requests over io_uring (Linux 6.14 and later with the
 * fuse module's enable_uring set; -o uring).
 *
 * Through /dev/fuse every request wakes a daemon thread wherever the
 * scheduler puts it, usually on another CPU than the caller: a round
 * trip is mostly that wakeup (docs/benchmarks.md, "What a round trip
 * costs").  Over io_uring the kernel queues a request on its caller's
 * CPU, to a ring whose threads are pinned there: the daemon runs where
 * the caller just went to sleep.
 *
 * libfuse 3.14 knows nothing of it, so this file sits under it as its
 * custom I/O (fuse_session_custom_io): it adds FUSE_OVER_IO_URING to the
 * INIT reply, registers ring entries once INIT is answered, hands each
 * request that arrives on a ring to fuse_session_process_buf laid out as
 * /dev/fuse would have delivered it, and catches its reply in writev to
 * commit it on the entry it came from.  FORGETs, INTERRUPTs and
 * notifications keep to /dev/fuse and libfuse's own loop.
 */
#include "ofs.h"
#include "uring.h"
#include "cpulist.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

/* From the kernel's uapi fuse.h 7.42 (Linux 6.14); Debian 12's headers predate it. */
#ifndef FUSE_OVER_IO_URING
#define FUSE_OVER_IO_URING (1ULL << 41)
#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128
struct fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};
struct fuse_uring_req_header {
	char in_out[FUSE_URING_IN_OUT_HEADER_SZ];
	char op_in[FUSE_URING_OP_IN_OUT_SZ];
	struct fuse_uring_ent_in_out ring_ent_in_out;
};
enum fuse_uring_cmd {
	FUSE_IO_URING_CMD_INVALID = 0,
	FUSE_IO_URING_CMD_REGISTER = 1,
	FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};
struct fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
#endif
#ifndef FUSE_INIT_EXT
#define FUSE_INIT_EXT (1u << 30)
#endif

/*
 * One entry per thread, so that no request waits behind a handler that
 * waits (an fsync for its barrier); several threads per CPU, so that such
 * a handler leaves the CPU's requests others to run on.
 */
#define URING_THREADS_PER_QUEUE 4
#define URING_THREADS_MAX 64
#define URING_MAP_BITS 10
/* The request's headers go right before its payload in one buffer. */
#define URING_HDR_ROOM (sizeof(struct fuse_in_header) + FUSE_URING_OP_IN_OUT_SZ)

struct uring_thread;

struct uring_ent {
	struct fuse_uring_req_header *hdr;
	char *buf;          /* URING_HDR_ROOM, then the payload the kernel fills */
	char *payload;
	struct iovec iov[2];
	uint64_t commit_id;
	uint64_t unique;    /* of the request being served; 0: none */
	struct uring_thread *t;
};

struct uring_thread {
	struct ofs_uring *u;
	struct io_uring ring;
	pthread_mutex_t lock; /* the SQ, for a reply sent from another thread */
	pthread_t tid;
	int started, ring_ok;
	int init_ret;         /* its setup: 0, or -errno (under u->slock, once reported) */
	int queued;           /* its entry's reply is queued, to submit with the next wait */
	unsigned qid;
	struct uring_ent ent;
};

struct ofs_uring {
	struct fuse_session *se;
	int fd;                  /* /dev/fuse */
	int evfd;                /* wakes the ring threads to stop */
	int offered, on;         /* the kernel offered it; the INIT reply took it */
	uint64_t init_unique;
	size_t payload_sz;
	unsigned nq, nthreads, nserving; /* nserving: the threads whose entry is registered */
	int start_err;           /* why the others are not */
	uint64_t served;         /* requests that came over a ring; atomic */
	struct uring_thread *t;
	pthread_mutex_t slock;   /* the start: threads report their setup */
	pthread_cond_t scond;
	unsigned reported;
	pthread_mutex_t mlock;   /* map */
	struct uring_ent *map[1u << URING_MAP_BITS]; /* unique -> entry serving it */
};

static struct uring_ent **map_slot(struct ofs_uring *u, uint64_t unique)
{
	size_t i = (size_t)(unique * 0x9e3779b97f4a7c15ull >> (64 - URING_MAP_BITS)), k;

	for (k = 0; k < (1u << URING_MAP_BITS); k++) {
		struct uring_ent **e = &u->map[(i + k) & ((1u << URING_MAP_BITS) - 1)];

		if (!*e || (*e)->unique == unique)
			return e;
	}
	return NULL;
}

/* The entry serving unique, taken out of the map; NULL for a /dev/fuse request. */
static struct uring_ent *map_take(struct ofs_uring *u, uint64_t unique)
{
	struct uring_ent **e, *found = NULL;
	size_t i, j, mask = (1u << URING_MAP_BITS) - 1;

	if (!unique)
		return NULL;
	pthread_mutex_lock(&u->mlock);
	e = map_slot(u, unique);
	if (e && *e) {
		found = *e;
		*e = NULL;
		/* Linear probing: move up the entries after the hole that probed past it. */
		i = (size_t)(e - u->map);
		for (j = (i + 1) & mask; u->map[j]; j = (j + 1) & mask) {
			struct uring_ent *m = u->map[j];
			size_t h = (size_t)(m->unique * 0x9e3779b97f4a7c15ull >> (64 - URING_MAP_BITS));

			if (((j - h) & mask) >= ((j - i) & mask)) {
				u->map[i] = m;
				u->map[j] = NULL;
				i = j;
			}
		}
	}
	pthread_mutex_unlock(&u->mlock);
	return found;
}

static int map_put(struct ofs_uring *u, struct uring_ent *ent)
{
	struct uring_ent **e;

	pthread_mutex_lock(&u->mlock);
	e = map_slot(u, ent->unique);
	if (e)
		*e = ent;
	pthread_mutex_unlock(&u->mlock);
	return e ? 0 : -ENOSPC;
}

/* Queue ent's command (register, or commit its reply and fetch the next); under t->lock. */
static int uring_queue(struct uring_thread *t, struct uring_ent *ent, unsigned cmd)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	struct fuse_uring_cmd_req *req;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->u->fd;
	sqe->cmd_op = cmd;
	sqe->addr = (uint64_t)(uintptr_t)ent->iov;
	sqe->len = 2;
	io_uring_sqe_set_data(sqe, ent);
	req = (void *)sqe->cmd;
	req->qid = (uint16_t)t->qid;
	req->commit_id = cmd == FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? ent->commit_id : 0;
	return 0;
}

/* The ring thread running this one, if any. */
static __thread struct uring_thread *uring_self;

static int uring_commit(struct uring_ent *ent)
{
	struct uring_thread *t = ent->t;
	int ret;

	/*
	 * Replied while being served: the thread submits it with its next
	 * wait, one system call for both.  Nothing else touches its SQ then:
	 * its one entry is answered.
	 */
	if (uring_self == t) {
		ret = uring_queue(t, ent, FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
		t->queued = !ret;
		return ret;
	}
	pthread_mutex_lock(&t->lock);
	ret = uring_queue(t, ent, FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
	if (!ret)
		ret = io_uring_submit(&t->ring) < 0 ? -EIO : 0;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* A request arrived on ent: serve it as libfuse serves one read from /dev/fuse. */
static void uring_serve(struct ofs_uring *u, struct uring_ent *ent)
{
	const struct fuse_in_header *in = (const void *)ent->hdr->in_out;
	const struct fuse_uring_ent_in_out *io = &ent->hdr->ring_ent_in_out;
	size_t pay = io->payload_sz, op = in->len - sizeof(*in) - pay;
	struct fuse_buf fb = { .size = in->len };
	struct fuse_out_header *out;

	ent->commit_id = io->commit_id;
	ent->unique = in->unique;
	if (in->len < sizeof(*in) + pay || op > FUSE_URING_OP_IN_OUT_SZ || pay > u->payload_sz) {
		ofs_log("uring: a malformed request (opcode %u); refused", in->opcode);
		goto refuse;
	}
	/* Laid out as /dev/fuse delivers it, the payload where the kernel put it. */
	fb.mem = ent->payload - op - sizeof(*in);
	memcpy((char *)fb.mem + sizeof(*in), ent->hdr->op_in, op);
	memcpy(fb.mem, in, sizeof(*in));
	if (map_put(u, ent)) {
		ofs_log("uring: %llu requests in flight, more than entries: refused",
			(unsigned long long)(1u << URING_MAP_BITS));
		goto refuse;
	}
	__atomic_add_fetch(&u->served, 1, __ATOMIC_RELAXED);
	fuse_session_process_buf(u->se, &fb);
	return;
refuse:
	out = (void *)ent->hdr->in_out;
	out->unique = ent->unique;
	out->error = -EIO;
	out->len = sizeof(*out);
	ent->hdr->ring_ent_in_out.payload_sz = 0;
	ent->unique = 0;
	uring_commit(ent);
}

static int uring_thread_init(struct ofs_uring *u, struct uring_thread *t);

static void *uring_thread_main(void *arg)
{
	struct uring_thread *t = arg;
	struct ofs_uring *u = t->u;
	cpu_set_t set;
	int ret;

	CPU_ZERO(&set);
	CPU_SET(t->qid, &set);
	/* Where the kernel queues this CPU's requests: run there. */
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	uring_self = t;
	/*
	 * The thread that serves the entry registers it: an entry is never
	 * registered without a thread to serve it (once every queue has one,
	 * the kernel sends it requests), and the kernel completes an entry's
	 * commands in the task that submitted them, which must outlive them.
	 */
	ret = uring_thread_init(u, t);
	pthread_mutex_lock(&u->slock);
	t->init_ret = ret;
	u->reported++;
	pthread_cond_broadcast(&u->scond);
	pthread_mutex_unlock(&u->slock);
	if (ret)
		return NULL;
	for (;;) {
		struct io_uring_cqe *cqe;
		struct uring_ent *ent;

		if (t->queued) {
			t->queued = 0;
			ret = io_uring_submit_and_wait(&t->ring, 1);
			if (ret < 0 && ret != -EINTR)
				break;
		}
		ret = io_uring_wait_cqe(&t->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret)
			break;
		ent = io_uring_cqe_get_data(cqe);
		ret = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (!ent)
			break; /* the stop eventfd */
		if (ret < 0) {
			if (ret != -ENOTCONN && ret != -ECANCELED && ret != -ENOENT)
				ofs_log("uring: queue %u: %s", t->qid, strerror(-ret));
			break;
		}
		uring_serve(u, ent);
	}
	return NULL;
}

/*
 * How many queues the kernel keeps: as many as there are possible CPUs,
 * which is not the highest CPU number plus one where the numbers have
 * gaps ("0-3,8-11": 8 queues).  The kernel's fs/fuse/dev_uring.c
 * (torvalds/linux 03a3617f92c2): fuse_uring_create() sizes the ring with
 * nr_queues = num_possible_cpus(); fuse_uring_register() refuses a qid at
 * or past it (EINVAL); is_ring_ready() sends requests over the rings only
 * once every qid below it has an entry; fuse_uring_task_to_queue() takes
 * the caller's CPU number as its qid, and a CPU numbered past the last
 * queue (9 above) gets queue 0, with a warning in the kernel's log.  So
 * every qid below the count gets its threads, and no other: each pinned
 * to the CPU of its number, where there is one.
 */
static unsigned uring_nqueues(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	char line[4096];
	unsigned count, last;
	/* The whole line (its newline read), not the first part of a longer one. */
	int ok = f && fgets(line, sizeof(line), f) && strchr(line, '\n') &&
		 cpulist_parse(line, &count, &last) == 0;

	if (f)
		fclose(f);
	if (ok)
		return count;
	return (unsigned)sysconf(_SC_NPROCESSORS_CONF);
}

/* Its ring with its one entry registered, and a poll of the stop eventfd. */
static int uring_thread_init(struct ofs_uring *u, struct uring_thread *t)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	struct uring_ent *e = &t->ent;
	struct io_uring_sqe *sqe;
	int ret;

	ret = io_uring_queue_init_params(4, &t->ring, &p);
	if (ret)
		return ret;
	t->ring_ok = 1;
	e->t = t;
	e->hdr = calloc(1, sizeof(*e->hdr));
	e->buf = malloc(URING_HDR_ROOM + u->payload_sz);
	if (!e->hdr || !e->buf)
		return -ENOMEM;
	e->payload = e->buf + URING_HDR_ROOM;
	e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
	e->iov[1] = (struct iovec){ e->payload, u->payload_sz };
	ret = uring_queue(t, e, FUSE_IO_URING_CMD_REGISTER);
	sqe = ret ? NULL : io_uring_get_sqe(&t->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, u->evfd, POLLIN);
	io_uring_sqe_set_data(sqe, NULL);
	ret = io_uring_submit(&t->ring);
	return ret < 0 ? ret : 0;
}

/*
 * INIT is answered: start the ring threads, each of which sets up and
 * registers its entry.  0 when every queue has a thread serving it (the
 * kernel sends requests over the rings from then on), or -errno: some
 * queue has none, so the kernel keeps to /dev/fuse.  The threads that did
 * start keep their entries and are joined by ofs_uring_stop.
 */
static int uring_start(struct ofs_uring *u)
{
	unsigned i, q, per, started = 0, *ok;
	int ret = 0;

	u->nq = uring_nqueues();
	per = URING_THREADS_MAX / u->nq;
	per = per < 1 ? 1 : per > URING_THREADS_PER_QUEUE ? URING_THREADS_PER_QUEUE : per;
	u->t = calloc((size_t)u->nq * per, sizeof(*u->t));
	ok = calloc(u->nq, sizeof(*ok));
	if (!u->t || !ok) {
		free(ok);
		return -ENOMEM;
	}
	u->nthreads = u->nq * per;
	for (i = 0; i < u->nthreads; i++) {
		u->t[i].u = u;
		u->t[i].qid = i / per;
		pthread_mutex_init(&u->t[i].lock, NULL);
	}
	for (i = 0; i < u->nthreads; i++) {
		if (pthread_create(&u->t[i].tid, NULL, uring_thread_main, &u->t[i])) {
			ret = -EAGAIN;
			break;
		}
		u->t[i].started = 1;
		started++;
	}
	pthread_mutex_lock(&u->slock);
	while (u->reported < started)
		pthread_cond_wait(&u->scond, &u->slock);
	pthread_mutex_unlock(&u->slock);
	for (i = 0, started = 0; i < u->nthreads; i++) {
		if (u->t[i].started && !u->t[i].init_ret) {
			ok[u->t[i].qid]++;
			started++;
		} else if (u->t[i].started && !ret) {
			ret = u->t[i].init_ret;
		}
	}
	for (q = 0; q < u->nq; q++) {
		if (!ok[q]) {
			ofs_log("uring: queue %u has no thread: %s", q, strerror(ret ? -ret : EIO));
			free(ok);
			return ret ? ret : -EIO;
		}
	}
	u->nserving = started;
	u->start_err = ret;
	free(ok);
	return 0;
}

static ssize_t uring_read(int fd, void *buf, size_t len, void *userdata)
{
	struct ofs_uring *u = ((struct ofs *)userdata)->uring;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (n >= (ssize_t)(sizeof(*in) + sizeof(struct fuse_init_in)) && in->opcode == FUSE_INIT) {
		const struct fuse_init_in *arg = (const void *)(in + 1);
		uint64_t flags = arg->flags;

		if (flags & FUSE_INIT_EXT)
			flags |= (uint64_t)arg->flags2 << 32;
		u->init_unique = in->unique;
		u->offered = (flags & FUSE_OVER_IO_URING) != 0;
	}
	return n;
}

static ssize_t uring_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct ofs_uring *u = ((struct ofs *)userdata)->uring;
	struct fuse_out_header *out = iov[0].iov_base;
	struct uring_ent *ent;
	ssize_t n;
	size_t len = 0;
	int i, init = out->unique && out->unique == u->init_unique;

	if (init && u->offered && out->error == 0 && count > 1 &&
	    iov[1].iov_len >= sizeof(struct fuse_init_out)) {
		struct fuse_init_out *arg = iov[1].iov_base;
		size_t pages = arg->max_pages ? arg->max_pages : 32;
		size_t page = (size_t)sysconf(_SC_PAGESIZE);

		if (arg->flags & FUSE_INIT_EXT) {
			arg->flags2 |= (uint32_t)(FUSE_OVER_IO_URING >> 32);
			u->on = 1;
			/* As the kernel sizes its ring payloads: it refuses entries smaller. */
			u->payload_sz = arg->max_write > pages * page ? arg->max_write : pages * page;
			if (u->payload_sz < 8192)
				u->payload_sz = 8192;
		}
	}
	ent = init ? NULL : map_take(u, out->unique);
	if (!ent) {
		n = writev(fd, iov, count);
		if (init && n >= 0) {
			u->init_unique = 0;
			if (u->on && uring_start(u)) {
				ofs_log("uring: cannot start the rings; requests stay on /dev/fuse");
				u->on = 0;
			} else if (u->on) {
				ofs_log("uring: requests over io_uring, %u queues of %u threads", u->nq,
					u->nthreads / u->nq);
				if (u->nserving < u->nthreads)
					ofs_log("uring: %u of %u ring threads serve: %s", u->nserving,
						u->nthreads, strerror(-u->start_err));
			} else if (!u->offered) {
				ofs_log("uring: the kernel does not offer it (fuse.enable_uring?); "
					"requests stay on /dev/fuse");
			}
		}
		return n;
	}
	for (i = 1; i < count; i++) {
		if (len + iov[i].iov_len > u->payload_sz) {
			out->error = -EIO;
			len = 0;
			break;
		}
		memcpy(ent->payload + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	memcpy(ent->hdr->in_out, out, sizeof(*out));
	ent->hdr->ring_ent_in_out.payload_sz = (uint32_t)len;
	ent->unique = 0;
	if (uring_commit(ent))
		return -1;
	return (ssize_t)(sizeof(*out) + len);
}

static const struct fuse_custom_io uring_io = {
	.read = uring_read,
	.writev = uring_writev,
};

int ofs_uring_enabled(void)
{
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	return c == 'Y' || c == '1';
}

int ofs_uring_attach(struct ofs *ofs, struct fuse_session *se)
{
	struct ofs_uring *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->se = se;
	u->fd = fuse_session_fd(se);
	u->evfd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&u->mlock, NULL);
	pthread_mutex_init(&u->slock, NULL);
	pthread_cond_init(&u->scond, NULL);
	ofs->uring = u;
	if (u->evfd < 0 || fuse_session_custom_io(se, &uring_io, u->fd)) {
		ofs->uring = NULL;
		if (u->evfd >= 0)
			close(u->evfd);
		pthread_mutex_destroy(&u->mlock);
		pthread_mutex_destroy(&u->slock);
		pthread_cond_destroy(&u->scond);
		free(u);
		return -EIO;
	}
	return 0;
}

void ofs_uring_stop(struct ofs *ofs)
{
	struct ofs_uring *u = ofs->uring;
	uint64_t one = 1;
	unsigned i;

	if (!u)
		return;
	/* Every thread's poll of it completes: the threads that still wait end. */
	if (write(u->evfd, &one, sizeof(one)) < 0)
		ofs_log("uring: cannot wake the ring threads: %s", strerror(errno));
	for (i = 0; u->t && i < u->nthreads; i++) {
		if (u->t[i].started)
			pthread_join(u->t[i].tid, NULL);
		u->t[i].started = 0;
	}
}

void ofs_uring_free(struct ofs *ofs)
{
	struct ofs_uring *u = ofs->uring;
	unsigned i;

	if (!u)
		return;
	ofs_uring_stop(ofs);
	for (i = 0; u->t && i < u->nthreads; i++) {
		if (u->t[i].ring_ok)
			io_uring_queue_exit(&u->t[i].ring);
		free(u->t[i].ent.hdr);
		free(u->t[i].ent.buf);
		pthread_mutex_destroy(&u->t[i].lock);
	}
	free(u->t);
	close(u->evfd);
	pthread_mutex_destroy(&u->mlock);
	pthread_mutex_destroy(&u->slock);
	pthread_cond_destroy(&u->scond);
	free(u);
	ofs->uring = NULL;
}

uint64_t ofs_uring_served(const struct ofs *ofs)
{
	return ofs->uring ? __atomic_load_n(&ofs->uring->served, __ATOMIC_RELAXED) : 0;
}
