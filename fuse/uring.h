/*
 * uring.h: FUSE requests over io_uring (uring.c), -o uring.
 */
#ifndef OFFLOADFS_URING_H
#define OFFLOADFS_URING_H

#include <stdint.h>

struct fuse_session;
struct ofs;
struct ofs_uring;

/* The fuse module offers io_uring to new mounts (its enable_uring). */
int ofs_uring_enabled(void);
/*
 * Put uring.c under libfuse's I/O of se (mounted): the rings start once
 * INIT is answered, if the kernel offers them.  0, or -errno.
 */
int ofs_uring_attach(struct ofs *ofs, struct fuse_session *se);
/* Stop the ring threads (libfuse's loop has ended). */
void ofs_uring_stop(struct ofs *ofs);
/* After fuse_session_destroy (libfuse calls uring.c's I/O until then). */
void ofs_uring_free(struct ofs *ofs);
/* Requests that came over a ring. */
uint64_t ofs_uring_served(const struct ofs *ofs);

#endif
