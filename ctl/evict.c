/*
 * evict.c: offloadctl evict MOUNTPOINT [--tenant T] [--bytes N]: the
 * daemon evicts N bytes (K/M/G suffixes) of least recently used files now,
 * of tenant T or of any tenant.  It is asked through the xattr
 * user.offload.evict of the mount's root or of the tenant's directory.
 */
#include "ctl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "store.h"

int ctl_evict(int argc, char **argv)
{
	const char *mnt = argv[2], *tenant = NULL, *bytes = NULL;
	char path[8192];
	uint64_t n;
	int i, ret;

	for (i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--tenant") && i + 1 < argc)
			tenant = argv[++i];
		else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			bytes = argv[++i];
		else {
			ctl_usage(stderr);
			return 2;
		}
	}
	if (!bytes || ofs_parse_size(bytes, &n) || n == 0) {
		fprintf(stderr, "offloadctl evict: --bytes N (a size such as 64M) is needed\n");
		return 2;
	}
	/* "." would evict from every tenant, ".." ask the directory above the mount. */
	if (tenant && (!*tenant || strchr(tenant, '/') || !strcmp(tenant, ".") ||
		       !strcmp(tenant, ".."))) {
		fprintf(stderr, "offloadctl evict: --tenant takes a tenant directory's name\n");
		return 2;
	}
	ret = ctl_check_mount(mnt);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s%s%s", mnt, tenant ? "/" : "", tenant ? tenant : "");
	if (setxattr(path, "user.offload.evict", bytes, strlen(bytes), 0)) {
		fprintf(stderr, "offloadctl evict: %s: %s\n", path, strerror(errno));
		return 2;
	}
	return 0;
}
