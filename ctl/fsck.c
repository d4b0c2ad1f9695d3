/*
 * offloadctl fsck ROOT [--meta PATH|URI] [--repair] [--ubsio-*]: its arguments;
 * the check itself is the store's (store/fsck.h).  Exit 0 only when
 * clean, 1 when problems were found, 2 when the check could not run.
 */
#include "ctl.h"

#include <stdio.h>
#include <string.h>

#include "fsck.h"
#include "store.h"

int ctl_fsck(int argc, char **argv)
{
	/* The backend stays the one the store records (backend NULL). */
	struct ofs_config cfg = {
		.ubsio = { .device_id = KVB_UBSIO_DEVICE_UNSET,
			   .new_init = -1,
			   .buffer_max = OFS_UBSIO_BUFFER_MAX,
			   .cache_max = OFS_UBSIO_CACHE_MAX,
			   .key_max = OFS_UBSIO_KEY_MAX },
	};
	char src[4096];
	int repair = 0, i, r;

	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--repair")) {
			repair = 1;
		} else if (!strcmp(argv[i], "--meta")) {
			if (i + 1 == argc) {
				fprintf(stderr, "offloadctl: --meta needs a PATH or a postgresql:// URI\n");
				return 2;
			}
			cfg.meta_path = argv[++i];
		} else if ((r = ctl_ubsio_opt(argc, argv, &i, &cfg.ubsio)) != 0) {
			if (r < 0)
				return 2;
		} else if (argv[i][0] != '-' && !cfg.root) {
			cfg.root = argv[i];
		} else {
			fprintf(stderr, "offloadctl: unknown argument '%s'\n", argv[i]);
			ctl_usage(stderr);
			return 2;
		}
	}
	if (!cfg.root) {
		ctl_usage(stderr);
		return 2;
	}
	/* The mount point for its ROOT: "no store to check" would not say what went wrong. */
	if (ctl_mount_source(cfg.root, src, sizeof(src))) {
		fprintf(stderr, "offloadctl: %s is an offloadfs mount point (of %s): fsck takes the "
				"ROOT of an unmounted store\n", cfg.root, src);
		return 2;
	}
	return ofs_fsck(&cfg, repair, stdout, stderr);
}
