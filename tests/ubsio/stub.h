/*
 * stub.h: what the two halves of the UBSIO stand-in share, private to it:
 * ubsio_stub.c (the exported API, its argument checks, Init and Exit, the
 * log) over stub_store.c (the value store: the directory layout, the index,
 * the write-back flusher, eviction, injected faults, BatchGet's pool blocks).
 * Everything here is hidden: the library exports only UbsioKvCache*.
 */
#ifndef UBSIO_STUB_H
#define UBSIO_STUB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* KvcError, the calls' own results. */
enum { KVC_OK = 0, KVC_ERR = 1, KVC_INVALID_PARAM = 3 };
/* CResult, the SDK's results of Put, Get and Delete. */
enum { C_NEED_RETRY = 5, C_NOT_FOUND = 7, C_DISK_FAULT = 16 };
/* BResult, BatchGet's per-key results. */
enum { B_ERR = 1, B_INVALID_PARAM = 3, B_NOT_EXISTS = 7, B_DISK_IOERR = 201 };

#define STUB_KEY_MAX 255               /* bytes */
#define STUB_BATCH_MAX 16384           /* keys */
#define STUB_SUBBATCH 128              /* keys per SDK BatchGet sub-batch */
#define STUB_POOL_BLOCK (4u << 20)     /* bytes */
#define STUB_GARBAGE_LEN ((size_t)(uint32_t)0xdeadbeefdeadbeefULL)
#define STUB_SEG 200                   /* hex characters per path component */
/* Relative path of a value: hex plus "+/" between pieces, and the NUL. */
#define STUB_REL_MAX (2 * STUB_KEY_MAX + 2 * (2 * STUB_KEY_MAX / STUB_SEG) + 1)
/* An escaped key in the log and the NUL. */
#define STUB_ESC_MAX (4 * STUB_KEY_MAX + 1)

/* A value the library holds, in memory (pending) or in the directory. */
struct entry {
	char *key;
	size_t klen;
	uint64_t size;
	unsigned char *data;          /* not yet written to the directory, or NULL */
	uint64_t due_ms;              /* when data is to be written */
	struct entry *hnext;          /* hash chain */
	struct entry *aprev, *anext;  /* age list, oldest (least recently put) first */
	struct entry *pprev, *pnext;  /* pending list, oldest first */
};

struct pblock {
	void *p;
	struct pblock *next;
};

#define POOL_BUCKETS 4096

extern pthread_mutex_t stub_lock;

/* Everything below is guarded by stub_lock. */
struct stub_state {
	bool inited;
	int dirfd;
	int logfd;
	bool fsync;
	bool pool_mode;
	uint64_t capacity;   /* 0: unlimited */
	uint64_t evict_at;   /* 0: never */
	uint64_t flush_ms;   /* 0: write through */
	uint64_t pool_max;   /* 0: unlimited */
	uint64_t used;       /* bytes of the values indexed */
	uint64_t fail_put, fail_get, fail_delete;
	uint64_t fault_rc;   /* the code of an injected fault */
	uint64_t puts, gets, deletes;
	char *fail_keys;
	char *fail_batch_keys;
	uint64_t tmpseq;
	/* index */
	struct entry **buckets;
	size_t nbuckets, nentries;
	struct entry *ahead, *atail;
	struct entry *phead, *ptail;
	/* flusher */
	pthread_t flusher;
	bool flusher_on, flusher_stop;
	pthread_cond_t cond;
	bool cond_inited;
	/* pool blocks handed out by BatchGet (pool mode), across Inits */
	struct pblock *pool[POOL_BUCKETS];
	uint64_t pool_out;
};

extern struct stub_state st;

/* ---- the log (ubsio_stub.c) ---- */

/* key, klen bytes, escaped into out (STUB_ESC_MAX bytes). */
void key_escape(const char *key, size_t klen, char *out);
/* One line, when UBSIO_STUB_LOG is set. */
__attribute__((format(printf, 1, 2)))
void stub_log(const char *fmt, ...);

/* ---- the value store (stub_store.c), all under stub_lock ---- */

/* Write every pending value due by now (all when all is set). */
void flush_due(bool all);
void *flusher_main(void *arg);
/* Stop the flusher; called with the lock held, returns with it held. */
void flusher_stop(void);
/* Forget every value indexed (the directory keeps them). */
void idx_clear(void);
/* Index the values in the directory, oldest first. */
int index_dir(void);

enum { V_OK, V_MISSING, V_IOERR, V_SHORT };

/*
 * Read key's value: *size gets its size; copies min(size, len) bytes to buf
 * (buf NULL: nothing).  With exact, a value shorter than len is V_SHORT and
 * nothing is copied.  A value indexed whose file is gone is dropped.
 */
int value_read(const char *key, size_t klen, void *buf, size_t len, bool exact,
	       uint64_t *size);

/* A batch of several keys that is to fail as a whole (it logs the call). */
bool batch_faulty(const char *op, const char **keys, uint32_t n);
/* Count one call of a kind and say whether it is to fail. */
bool count_fault(uint64_t *count, uint64_t fail_at, const char *key);

/* One key, checked, with the library initialised: a CResult or a fault's code. */
int do_put(const char *key, const void *buf, size_t len);
int do_get(const char *key, void *buf, size_t len);
/* The value's size, or false when missing or failing. */
bool do_stat(const char *key, uint64_t *size);
#ifndef UBSIO_STUB_OMIT_DELETE
int do_delete(const char *key);
#endif

/* A new BatchGet block of STUB_POOL_BLOCK bytes, or NULL. */
void *pool_alloc(void);
/* Free p if it is a pool block; say whether it was. */
bool pool_free(void *p);
void pool_clear(void);

#pragma GCC visibility pop

#endif
