/*
 * offloadctl: operator commands for an offloadfs store.
 *
 *   offloadctl fsck ROOT [--meta PATH|URI] [--repair] [--ubsio-lib PATH]
 *                   [--ubsio-ssd-size N | --ubsio-old-init] [--ubsio-device N]
 *                                                    check an unmounted store
 *   offloadctl scrub MOUNTPOINT [--ubsio-*]          checksum pass on a mounted store
 *   offloadctl stats MOUNTPOINT [--buckets] [--json] live metrics of a mounted store
 *   offloadctl promote MOUNTPOINT FILE...            queue promotions to the DRAM tier
 *   offloadctl evict MOUNTPOINT [--tenant T] --bytes N  evict least recently used files
 *
 * This file: the dispatch; the usage and the options the commands share
 * are common.c's.
 * fsck's engine is the store's (store/fsck.h); scrub, stats and promote
 * speak to a mounted store through its files and xattrs.
 */
#include "ctl.h"

#include <string.h>

#include "store.h"

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		printf("offloadctl 0.1.0 (schema %d)\n", META_SCHEMA_VERSION);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		ctl_usage(stdout);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "fsck"))
		return ctl_fsck(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "scrub"))
		return ctl_scrub(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "stats"))
		return ctl_stats(argc, argv);
	if (argc >= 4 && !strcmp(argv[1], "promote"))
		return ctl_promote(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "evict"))
		return ctl_evict(argc, argv);
	ctl_usage(stderr);
	return 2;
}
