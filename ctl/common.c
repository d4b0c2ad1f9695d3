/*
 * What offloadctl's commands share: the usage text, the --ubsio-* options
 * (fsck and scrub) and the check that a path is an offloadfs mount point
 * (scrub, stats, promote).  main.c dispatches to the commands; they and
 * main.c call down here, never back.
 */
#include "ctl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

void ctl_usage(FILE *out)
{
	fprintf(out, "usage: offloadctl fsck ROOT [--meta PATH|URI] [--repair] [--ubsio-lib PATH]\n"
		     "                        [--ubsio-ssd-size N | --ubsio-old-init] [--ubsio-device N]\n"
		     "       offloadctl scrub MOUNTPOINT [--ubsio-lib PATH]\n"
		     "                        [--ubsio-ssd-size N | --ubsio-old-init] [--ubsio-device N]\n"
		     "       offloadctl stats MOUNTPOINT [--buckets] [--json]\n"
		     "       offloadctl promote MOUNTPOINT FILE...\n"
		     "       offloadctl evict MOUNTPOINT [--tenant T] --bytes N\n"
		     "       offloadctl --version\n"
		     "fsck checks an unmounted store (read-only unless --repair, which frees\n"
		     "leaked pages and moves corrupted objects to <tenant>/lost+found); on a\n"
		     "ubsio store it checks every value in the KV store, loading the library\n"
		     "as the daemon's ubsio_lib, ubsio_ssd_size, ubsio_old_init and ubsio_device\n"
		     "options do (by default as the store was last mounted);\n"
		     "scrub re-reads every committed object of a mounted store from its\n"
		     "bucket file, or its value in the KV store (another client of the same\n"
		     "library), and checks its checksum.  Exit 0: clean, 1: problems, 2: error.\n"
		     "stats summarises the live metrics; --buckets adds a row per bucket.\n");
}

int ctl_ubsio_opt(int argc, char **argv, int *i, struct kvb_ubsio_config *uc)
{
	const char *a = argv[*i];

	if (!strcmp(a, "--ubsio-old-init")) {
		uc->new_init = 0;
		return 1;
	}
	if (*i + 1 >= argc)
		return 0;
	if (!strcmp(a, "--ubsio-lib")) {
		static char abs[4096];
		char err[PATH_MAX + 64];

		/* As the daemon's ubsio_lib=: a relative path is resolved here, once. */
		if (ofs_ubsio_lib_abs(argv[++*i], abs, sizeof(abs), err, sizeof(err))) {
			fprintf(stderr, "offloadctl: %s\n", err);
			return -1;
		}
		uc->lib = abs;
	} else if (!strcmp(a, "--ubsio-ssd-size")) {
		if (ofs_parse_size(argv[++*i], &uc->ssd_size)) {
			fprintf(stderr, "offloadctl: invalid --ubsio-ssd-size '%s': expected a "
					"number such as 0, 64K or 4G\n",
				argv[*i]);
			return -1;
		}
		/* As the daemon: giving the size is what selects the newer Init. */
		uc->new_init = 1;
	} else if (!strcmp(a, "--ubsio-device")) {
		char *end;
		long d;

		errno = 0;
		d = strtol(argv[++*i], &end, 10);
		if (errno || *end || end == argv[*i] || d < -1 || d > INT32_MAX) {
			fprintf(stderr, "offloadctl: invalid --ubsio-device '%s': a device number, "
				"or -1 for none\n",
				argv[*i]);
			return -1;
		}
		uc->device_id = (int32_t)d;
	} else {
		return 0;
	}
	return 1;
}

int ctl_mount_source(const char *path, char *src, size_t srclen)
{
	char real[4096], line[8192];
	int found = 0;
	FILE *mounts;

	if (!realpath(path, real))
		return 0;
	mounts = fopen("/proc/mounts", "r");
	while (mounts && fgets(line, sizeof(line), mounts)) {
		char dev[4096], dir[4096], type[256];

		if (sscanf(line, "%4095s %4095s %255s", dev, dir, type) == 3 &&
		    !strcmp(dir, real) && !strcmp(type, "fuse.offloadfs")) {
			found = 1;
			snprintf(src, srclen, "%s", dev);
		}
	}
	if (mounts)
		fclose(mounts);
	return found;
}

int ctl_check_mount(const char *mnt)
{
	char real[4096], src[4096];

	if (!realpath(mnt, real)) {
		fprintf(stderr, "offloadctl: %s: %s\n", mnt, strerror(errno));
		return 2;
	}
	if (!ctl_mount_source(real, src, sizeof(src))) {
		fprintf(stderr, "offloadctl: %s is not an offloadfs mount point\n", mnt);
		return 2;
	}
	return 0;
}
