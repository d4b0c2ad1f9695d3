/*
 * ctl.h: what offloadctl's commands share.  main.c parses the command
 * line and dispatches; each command (fsck.c, scrub.c, stats.c) parses its
 * own arguments and returns the exit status: 0 clean, 1 problems found,
 * 2 the command could not run.  The usage and the helpers below are
 * common.c's, under main.c and the commands alike.
 */
#ifndef OFFLOADFS_CTL_H
#define OFFLOADFS_CTL_H

#include <stdio.h>

struct kvb_ubsio_config;

void ctl_usage(FILE *out);
/*
 * --ubsio-lib PATH, --ubsio-ssd-size N, --ubsio-old-init, --ubsio-device N
 * at argv[*i]: 1 when taken (*i moves past its value), 0 when argv[*i] is
 * something else, -1 (after a message) when malformed.
 */
int ctl_ubsio_opt(int argc, char **argv, int *i, struct kvb_ubsio_config *uc);
/*
 * 1 when path is an offloadfs mount point, its source (the ROOT, as
 * /proc/mounts spells it) in src; 0 otherwise, saying nothing.
 */
int ctl_mount_source(const char *path, char *src, size_t srclen);
/* 0 when mnt is an offloadfs mount point, else a message and 2. */
int ctl_check_mount(const char *mnt);

/* offloadctl CMD ARGS...: argv[1] is the command. */
int ctl_fsck(int argc, char **argv);
int ctl_scrub(int argc, char **argv);
int ctl_stats(int argc, char **argv);
int ctl_promote(int argc, char **argv);
int ctl_evict(int argc, char **argv);

#endif
