/*
 * ll: the FUSE operations that live outside ll.c, for its one ops table.
 * Each sends exactly one reply.
 */
#ifndef OFFLOADFS_LL_H
#define OFFLOADFS_LL_H

#include "ofs.h"

/* ns.c */
void ofs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ofs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ofs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void ofs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name);
void ofs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ofs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ofs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		   const char *newname, unsigned int flags);
void ofs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		   struct fuse_file_info *fi);
void ofs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void ofs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi);

/* xattr.c */
void ofs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ofs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void ofs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		     size_t size, int flags);
void ofs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* batch.c: ofs_ll_ops with the batch control file (TENANT/.offload-batch) served in front. */
const struct fuse_lowlevel_ops *ofs_batch_ops(void);

#endif
