/*
 * reconnect.c: a lost connection made again.  The server may restart,
 * stop for a while, drop a backend (pg_terminate_backend) or stop
 * answering; a call that needs it and opens no transaction waits up to
 * meta_timeout for a new connection (tried again and again meanwhile),
 * which gets the connection settings, the store's lock, the checks that it
 * is still our store, and the statements (pq_attach, open.c), as at
 * mount.  A call inside a transaction cannot be redone on another
 * connection: stmt.c fails it to its caller.
 *
 * After a wait that gave up, calls fail at once (with one new attempt a
 * second) until a connection is made: a request queued behind one that
 * waited is not made to wait as long again.
 */
#include "pg_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t pq_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* libpq prints a message that arrives between queries (a shutdown's); it is ours to report. */
static void pq_quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* A new connection by the deadline, or NULL with the reason in why. */
static PGconn *pq_dial(struct meta_pg *m, int64_t deadline, char *why, size_t len)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	PGconn *c = PQconnectStart(m->uri);

	if (!c) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	while (PQstatus(c) != CONNECTION_BAD) {
		struct pollfd pfd = { .fd = PQsocket(c) };
		int64_t left = deadline - pq_now_ms();

		if (st == PGRES_POLLING_OK) {
			PQsetNoticeProcessor(c, pq_quiet, NULL);
			return c;
		}
		if (st == PGRES_POLLING_FAILED)
			break;
		if (left <= 0) {
			snprintf(why, len, "no answer from the server");
			PQfinish(c);
			return NULL;
		}
		pfd.events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			break;
		st = PQconnectPoll(c);
	}
	pq_one_line(why, len, PQerrorMessage(c));
	PQfinish(c);
	return NULL;
}

/*
 * Whether an idle connection is still there.  A server that drops it
 * (a shutdown, pg_terminate_backend) sends an error and closes it; libpq
 * hands the error to the notice processor and notices the close only at
 * its next read, so the socket is asked too: anything but silence from
 * an idle server is its end.
 */
static int pq_alive(PGconn *c)
{
	struct pollfd pfd = { .fd = PQsocket(c), .events = POLLIN | POLLRDHUP };

	if (PQstatus(c) != CONNECTION_OK || pfd.fd < 0)
		return 0;
	if (poll(&pfd, 1, 0) <= 0)
		return 1;
	if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
		return 0;
	/* A notice, a parameter's new value: read, then asked again. */
	if (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
		return 0;
	pfd.revents = 0;
	return poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void pq_drop(struct meta_pg *m, PGconn **c)
{
	if (!*c)
		return;
	PQfinish(*c);
	*c = NULL;
	if (c == &m->conn)
		m->in_txn = m->txn_write = 0;
}

void pq_log_lost(struct meta_pg *m, const char *why)
{
	char line[400];

	pq_one_line(line, sizeof(line), why);
	meta_log(&m->base, "%s: the connection to the server was lost (%s)", m->shown, line);
}

void pq_set_lost(struct meta_pg *m, const char *why)
{
	int first;

	pthread_mutex_lock(&m->mu);
	first = !m->lost;
	m->lost = 1;
	pthread_mutex_unlock(&m->mu);
	if (first)
		meta_log(&m->base,
			 "%s: %s: metadata commits since the last durable barrier may be lost; "
			 "every fsync fails with EIO from now on and the store is left unclean, "
			 "so that the next mount recovers it",
			 m->shown, why);
}

int pq_ready(struct meta_pg *m, PGconn **c)
{
	int main = c == &m->conn, attempt, ret, fast, logged = 0;
	int64_t start = pq_now_ms(), deadline, now;
	unsigned timeout = meta_timeout_ms(&m->base);
	char why[512] = "";

	if (*c && pq_alive(*c))
		return 0;
	if (*c) {
		pq_log_lost(m, PQstatus(*c) == CONNECTION_OK ? "the server closed it"
							     : PQerrorMessage(*c));
		pq_drop(m, c);
	}
	pthread_mutex_lock(&m->mu);
	if (m->fenced) {
		pthread_mutex_unlock(&m->mu);
		if (main)
			snprintf(m->err, sizeof(m->err), "%s: the store was given up (see the log)",
				 m->shown);
		return -EIO;
	}
	fast = m->down_since != 0 || !meta_thread_waits();
	if (m->down_since && start - m->last_try < 1000) {
		int64_t down = (start - m->down_since) / 1000;

		pthread_mutex_unlock(&m->mu);
		if (main)
			snprintf(m->err, sizeof(m->err),
				 "%s: no connection to the server for %lld s", m->shown,
				 (long long)down);
		return -EIO;
	}
	if (m->down_since)
		m->last_try = start;
	pthread_mutex_unlock(&m->mu);
	deadline = start + (fast && timeout > 1000 ? 1000 : timeout);
	/* Failing fast: one attempt (a refused one returns at once, a silent one within 1 s). */
	for (attempt = 0;; attempt++) {
		PGconn *n = pq_dial(m, deadline, why, sizeof(why));
		int64_t wait;

		if (n) {
			char err[512];

			ret = pq_attach(m, n, main, 0, err, sizeof(err));
			if (!ret) {
				*c = n;
				pthread_mutex_lock(&m->mu);
				m->down_since = 0;
				pthread_mutex_unlock(&m->mu);
				meta_log(&m->base, "%s: connected again after %lld ms", m->shown,
					 (long long)(pq_now_ms() - start));
				return 0;
			}
			PQfinish(n);
			if (ret == -ESTALE) {
				/* Another store, or another daemon holding ours: never ours again. */
				pthread_mutex_lock(&m->mu);
				m->fenced = 1;
				pthread_mutex_unlock(&m->mu);
				meta_log(&m->base, "%s: %s: every metadata call fails from now on",
					 m->shown, err);
				if (main)
					snprintf(m->err, sizeof(m->err), "%s", err);
				return -EIO;
			}
			snprintf(why, sizeof(why), "%s", err);
		}
		if (!logged++ && !fast)
			meta_log(&m->base, "%s: cannot connect (%s): trying again for up to %u s",
				 m->shown, why, timeout / 1000);
		now = pq_now_ms();
		if (now >= deadline || fast)
			break;
		/* 50 ms, doubling to a second: a restart is back in well under one. */
		wait = attempt < 5 ? 50LL << attempt : 1000;
		if (wait > deadline - now)
			wait = deadline - now;
		poll(NULL, 0, (int)wait);
	}
	pthread_mutex_lock(&m->mu);
	/* A thread that does not wait leaves the requests their own wait. */
	if (!m->down_since && meta_thread_waits()) {
		m->down_since = start;
		meta_log(&m->base,
			 "%s: no connection to the server within meta_timeout (%u s): %s; "
			 "calls fail with EIO until it is back",
			 m->shown, timeout / 1000, why);
	}
	pthread_mutex_unlock(&m->mu);
	if (main)
		snprintf(m->err, sizeof(m->err), "%s: no connection to the server: %s", m->shown,
			 why);
	return -EIO;
}
