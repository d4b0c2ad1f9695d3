/*
 * config.c: the settings of a store: sizes, geometry, how a ubsio store's
 * library is reached.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int ofs_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default:
		return -EINVAL;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int ofs_geom_valid(const struct meta_geom *g, char *err, size_t errlen)
{
	uint64_t ps = g->page_size;

	if (ps < OFS_PAGE_SIZE_MIN || ps > OFS_PAGE_SIZE_MAX || (ps & (ps - 1))) {
		snprintf(err, errlen, "invalid page_size %llu: a power of two from 4096 to 1G",
			 (unsigned long long)ps);
		return -EINVAL;
	}
	if (g->bucket_count < 1 || g->bucket_count > 256) {
		snprintf(err, errlen, "invalid bucket_count %u: 1..256", g->bucket_count);
		return -EINVAL;
	}
	if (g->bucket_size < ps || g->bucket_size % ps) {
		snprintf(err, errlen, "invalid bucket_size %llu: a multiple of page_size %llu",
			 (unsigned long long)g->bucket_size, (unsigned long long)ps);
		return -EINVAL;
	}
	return 0;
}

void ofs_ubsio_defaults(struct meta *m, struct kvb_ubsio_config *uc, char *libbuf,
			size_t liblen)
{
	char v[64];

	if (!uc->lib && meta_setting_get(m, "ubsio_lib", libbuf, liblen) == 0 && libbuf[0])
		uc->lib = libbuf;
	if (uc->new_init < 0) {
		uc->new_init = 0;
		if (meta_setting_get(m, "ubsio_init", v, sizeof(v)) == 0 && strcmp(v, "old") &&
		    ofs_parse_size(v, &uc->ssd_size) == 0)
			uc->new_init = 1;
	}
	if (uc->device_id == KVB_UBSIO_DEVICE_UNSET) {
		/* No Ascend device unless one was chosen: the library then needs no ACL. */
		uc->device_id = -1;
		if (meta_setting_get(m, "ubsio_device", v, sizeof(v)) == 0)
			uc->device_id = atoi(v);
		if (uc->device_id < -1)
			uc->device_id = -1;
	}
}

int ofs_ubsio_lib_abs(const char *lib, char *out, size_t outlen, char *err, size_t errlen)
{
	char real[PATH_MAX];

	/* A bare name goes to dlopen's search path, which is not the working directory. */
	if (!strchr(lib, '/') || lib[0] == '/') {
		if (strlen(lib) >= outlen) {
			snprintf(err, errlen, "ubsio_lib '%s': %s", lib, strerror(ENAMETOOLONG));
			return -ENAMETOOLONG;
		}
		snprintf(out, outlen, "%s", lib);
		return 0;
	}
	if (!realpath(lib, real)) {
		snprintf(err, errlen, "ubsio_lib '%s': %s", lib, strerror(errno));
		return -errno;
	}
	if (strlen(real) >= outlen) {
		snprintf(err, errlen, "ubsio_lib '%s': %s", lib, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	snprintf(out, outlen, "%s", real);
	return 0;
}

int ofs_ubsio_record(struct meta *m, const struct kvb_ubsio_config *uc)
{
	char v[64];
	int ret;

	ret = meta_setting_set(m, "ubsio_lib", uc->lib ? uc->lib : "");
	if (!ret) {
		if (uc->new_init > 0)
			snprintf(v, sizeof(v), "%llu", (unsigned long long)uc->ssd_size);
		else
			snprintf(v, sizeof(v), "old");
		ret = meta_setting_set(m, "ubsio_init", v);
	}
	if (!ret) {
		snprintf(v, sizeof(v), "%d", uc->device_id);
		ret = meta_setting_set(m, "ubsio_device", v);
	}
	return ret;
}
