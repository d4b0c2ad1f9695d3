/*
 * offloadctl stats MOUNTPOINT [--buckets] [--json]: the daemon's live
 * metrics (user.offload.metrics on the root), summarised; and offloadctl
 * promote MOUNTPOINT FILE...: queue promotions to the DRAM tier
 * (user.offload.promote).  Both speak to the mount only.
 */
#include "ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/xattr.h>

struct sample {
	char name[128], labels[320]; /* a tenant's name is up to 255 bytes */
	double v;
};

static double find(const struct sample *s, size_t n, const char *name, const char *labels)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(s[i].name, name) && !strcmp(s[i].labels, labels ? labels : ""))
			return s[i].v;
	return 0;
}

static void human(double bytes, char *out, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;

	while (bytes >= 1024 && i < 5) {
		bytes /= 1024;
		i++;
	}
	snprintf(out, len, "%.1f %s", bytes, u[i]);
}

/* Is s[i] the first sample of a tenant's figures (its labels not seen before)? */
static int tenant_first(const struct sample *s, size_t i)
{
	size_t j;

	if (strcmp(s[i].name, "offloadfs_tenant_used_bytes") &&
	    strcmp(s[i].name, "offloadfs_tenant_evictions_total"))
		return 0;
	for (j = 0; j < i; j++)
		if (!strcmp(s[j].labels, s[i].labels) &&
		    (!strcmp(s[j].name, "offloadfs_tenant_used_bytes") ||
		     !strcmp(s[j].name, "offloadfs_tenant_evictions_total")))
			return 0;
	return 1;
}

/*
 * Tenants with a quota or with evictions: used, quota, files and bytes
 * evicted.  The labels are tenant="NAME", escaped as in JSON.
 */
static void stats_tenants(const struct sample *s, size_t n, int json)
{
	const char *u = "offloadfs_tenant_used_bytes", *q = "offloadfs_tenant_quota_bytes",
		   *e = "offloadfs_tenant_evictions_total",
		   *eb = "offloadfs_tenant_evicted_bytes_total";
	char a[32], b[32], c[32];
	int first = 1;
	size_t i;

	for (i = 0; i < n; i++) {
		const char *l = s[i].labels;
		int nl = (int)strlen(l);

		if (!tenant_first(s, i) || strncmp(l, "tenant=\"", 8) || nl < 9)
			continue;
		if (json) {
			printf("%s{\"tenant\": \"%.*s\", \"used_bytes\": %.0f, \"quota_bytes\": %.0f, "
			       "\"evictions\": %.0f, \"evicted_bytes\": %.0f}",
			       first ? "" : ", ", nl - 9, l + 8, find(s, n, u, l), find(s, n, q, l),
			       find(s, n, e, l), find(s, n, eb, l));
		} else {
			if (first)
				printf("  tenants    used / quota, evicted\n");
			/* Usage is summed for tenants with a quota only. */
			snprintf(a, sizeof(a), "-");
			snprintf(b, sizeof(b), "none");
			if (find(s, n, q, l) > 0) {
				human(find(s, n, u, l), a, sizeof(a));
				human(find(s, n, q, l), b, sizeof(b));
			}
			human(find(s, n, eb, l), c, sizeof(c));
			printf("    %-20.*s %s / %s, %.0f files (%s) evicted\n", nl - 9, l + 8, a, b,
			       find(s, n, e, l), c);
		}
		first = 0;
	}
}

/*
 * The summary first; the per-bucket table (256 rows on a default store) only
 * with --buckets.  --json always has every bucket.
 */
static int stats_show(const char *mnt, int json, int buckets)
{
	static char text[1 << 17];
	struct sample *s = NULL;
	size_t n = 0, cap = 0, i;
	ssize_t len;
	char *line, *save = NULL, a[32], b[32], c[32];
	double ps, cap_bytes, used = 0, fr = 0, hits, misses;
	double used_min = 0, used_max = 0, frag_max = 0, run_max = 0;
	unsigned bk, nb, frag_bk = 0, run_bk = 0;

	if (ctl_check_mount(mnt))
		return 2;
	len = getxattr(mnt, "user.offload.metrics", text, sizeof(text) - 1);
	if (len < 0) {
		fprintf(stderr, "offloadctl: %s: cannot read the metrics: %s\n", mnt, strerror(errno));
		return 2;
	}
	text[len] = '\0';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp, *br;

		if (line[0] == '#')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			s = realloc(s, cap * sizeof(*s));
			if (!s)
				return 2;
		}
		sp = strrchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		s[n].v = strtod(sp + 1, NULL);
		br = strchr(line, '{');
		if (br) {
			*br = '\0';
			snprintf(s[n].labels, sizeof(s[n].labels), "%.*s", (int)strlen(br + 1) - 1, br + 1);
		} else {
			s[n].labels[0] = '\0';
		}
		snprintf(s[n].name, sizeof(s[n].name), "%s", line);
		n++;
	}
	ps = find(s, n, "offloadfs_page_size_bytes", NULL);
	cap_bytes = find(s, n, "offloadfs_capacity_bytes", NULL);
	for (i = 0; i < n; i++) {
		if (!strcmp(s[i].name, "offloadfs_bucket_pages_allocated"))
			used += s[i].v;
		else if (!strcmp(s[i].name, "offloadfs_bucket_pages_free"))
			fr += s[i].v;
	}
	/*
	 * Free is what statfs says: the buckets' free pages that the disk
	 * under ROOT can also hold.  A store without buckets (ubsio) has only
	 * the store-wide figures.
	 */
	if (used + fr == 0) {
		fr = find(s, n, "offloadfs_store_pages_free", NULL);
		used = find(s, n, "offloadfs_store_pages", NULL) - fr;
	} else if (find(s, n, "offloadfs_store_pages", NULL) > 0 &&
		   find(s, n, "offloadfs_store_pages_free", NULL) < fr) {
		fr = find(s, n, "offloadfs_store_pages_free", NULL);
	}
	hits = find(s, n, "offloadfs_dram_hits_total", NULL);
	misses = find(s, n, "offloadfs_dram_misses_total", NULL);
	if (json) {
		int first = 1;

		printf("{\"mountpoint\": \"%s\", \"capacity_bytes\": %.0f, \"page_size\": %.0f, "
		       "\"used_pages\": %.0f, \"free_pages\": %.0f, \"objects\": %.0f, "
		       "\"dram_hit_rate\": %.4f, \"buckets\": [",
		       mnt, cap_bytes, ps, used, fr, find(s, n, "offloadfs_objects", NULL),
		       hits + misses ? hits / (hits + misses) : 0.0);
		for (i = 0; i < n; i++) {
			double f, l;

			if (strcmp(s[i].name, "offloadfs_bucket_pages_allocated"))
				continue;
			f = find(s, n, "offloadfs_bucket_pages_free", s[i].labels);
			l = find(s, n, "offloadfs_bucket_largest_free_run_pages", s[i].labels);
			printf("%s{\"bucket\": \"%.2s\", \"allocated\": %.0f, \"free\": %.0f, "
			       "\"largest_free_run\": %.0f, \"fragmentation\": %.4f}",
			       first ? "" : ", ", s[i].labels + 8, s[i].v, f, l, f ? 1 - l / f : 0.0);
			first = 0;
		}
		printf("], \"tenants\": [");
		stats_tenants(s, n, 1);
		printf("], \"metrics\": {");
		for (i = 0; i < n; i++) {
			const char *p;

			printf("%s\"%s", i ? ", " : "", s[i].name);
			if (s[i].labels[0]) {
				putchar('{');
				for (p = s[i].labels; *p; p++)
					printf(*p == '"' ? "\\\"" : "%c", *p);
				putchar('}');
			}
			printf("\": %.17g", s[i].v);
		}
		printf("}}\n");
		free(s);
		return 0;
	}
	human(cap_bytes, a, sizeof(a));
	printf("offloadfs at %s\n", mnt);
	printf("  capacity   %s (%.0f pages of %.0f KiB)\n", a, used + fr, ps / 1024);
	human(used * ps, a, sizeof(a));
	human(fr * ps, b, sizeof(b));
	printf("  used       %s (%.1f%%)\n  free       %s\n", a,
	       used + fr ? 100 * used / (used + fr) : 0.0, b);
	printf("  objects    %.0f\n", find(s, n, "offloadfs_objects", NULL));
	human(find(s, n, "offloadfs_bytes_written_total", NULL), a, sizeof(a));
	human(find(s, n, "offloadfs_bytes_read_total", NULL), b, sizeof(b));
	printf("  written    %s in %.0f commits; read %s (through the daemon)\n", a,
	       find(s, n, "offloadfs_objects_committed_total", NULL), b);
	printf("  checksum failures %.0f, allocation failures (ENOSPC) %.0f\n",
	       find(s, n, "offloadfs_checksum_failures_total", NULL),
	       find(s, n, "offloadfs_page_allocation_failures_total", NULL));
	human(find(s, n, "offloadfs_dram_bytes", NULL), a, sizeof(a));
	human(find(s, n, "offloadfs_dram_capacity_bytes", NULL), b, sizeof(b));
	printf("  DRAM tier  %s of %s; hit rate %.1f%% (%.0f hits, %.0f misses), %.0f evictions\n",
	       a, b, hits + misses ? 100 * hits / (hits + misses) : 0.0, hits, misses,
	       find(s, n, "offloadfs_dram_evictions_total", NULL));
	printf("  promotions queued %.0f, done %.0f, failed %.0f, dropped %.0f\n",
	       find(s, n, "offloadfs_promotions_queued_total", NULL),
	       find(s, n, "offloadfs_promotions_done_total", NULL),
	       find(s, n, "offloadfs_promotions_failed_total", NULL),
	       find(s, n, "offloadfs_promotions_dropped_total", NULL));
	stats_tenants(s, n, 0);
	if (find(s, n, "offloadfs_backend_info", "backend=\"ubsio\"")) {
		printf("  backend    ubsio: %.0f puts, %.0f gets, %.0f deletes (batch calls); "
		       "%.0f failed\n",
		       find(s, n, "offloadfs_backend_calls_total", "backend=\"ubsio\",call=\"write\""),
		       find(s, n, "offloadfs_backend_calls_total", "backend=\"ubsio\",call=\"read\""),
		       find(s, n, "offloadfs_backend_calls_total", "backend=\"ubsio\",call=\"zero\""),
		       find(s, n, "offloadfs_backend_errors_total", "backend=\"ubsio\",call=\"write\"") +
			       find(s, n, "offloadfs_backend_errors_total",
				    "backend=\"ubsio\",call=\"read\"") +
			       find(s, n, "offloadfs_backend_errors_total",
				    "backend=\"ubsio\",call=\"zero\""));
		free(s);
		return 0;
	}
	/* The buckets in two lines: how unevenly they fill, the worst
	 * fragmentation, and the largest object that still fits. */
	nb = 0;
	for (bk = 0; bk < 256; bk++) {
		char lab[32];
		double u, f, l, pct, frag;

		snprintf(lab, sizeof(lab), "bucket=\"%02x\"", bk);
		u = find(s, n, "offloadfs_bucket_pages_allocated", lab);
		f = find(s, n, "offloadfs_bucket_pages_free", lab);
		if (u + f == 0)
			break;
		l = find(s, n, "offloadfs_bucket_largest_free_run_pages", lab);
		pct = 100 * u / (u + f);
		frag = f ? 100 * (1 - l / f) : 0.0;
		if (!nb || pct < used_min)
			used_min = pct;
		if (!nb || pct > used_max)
			used_max = pct;
		if (!nb || frag > frag_max) {
			frag_max = frag;
			frag_bk = bk;
		}
		if (!nb || l > run_max) {
			run_max = l;
			run_bk = bk;
		}
		nb++;
	}
	if (nb) {
		human(run_max * ps, a, sizeof(a));
		if (frag_max > 0)
			snprintf(b, sizeof(b), "bucket %02x, %.1f%%", frag_bk, frag_max);
		else
			snprintf(b, sizeof(b), "none");
		printf("  buckets    %u, each %.1f%% to %.1f%% used; most fragmented: %s\n", nb,
		       used_min, used_max, b);
		printf("             largest free run %.0f pages (%s, bucket %02x)%s\n", run_max, a,
		       run_bk, buckets ? "" : "; --buckets for each bucket");
	}
	if (buckets && nb) {
		printf("  bucket  allocated       free  largest-free  fragmentation\n");
		for (bk = 0; bk < nb; bk++) {
			char lab[32];
			double u, f, l;

			snprintf(lab, sizeof(lab), "bucket=\"%02x\"", bk);
			u = find(s, n, "offloadfs_bucket_pages_allocated", lab);
			f = find(s, n, "offloadfs_bucket_pages_free", lab);
			l = find(s, n, "offloadfs_bucket_largest_free_run_pages", lab);
			snprintf(c, sizeof(c), "%.1f%%", f ? 100 * (1 - l / f) : 0.0);
			printf("  %02x     %10.0f %10.0f %13.0f %14s\n", bk, u, f, l, c);
		}
	}
	free(s);
	return 0;
}

static int promote(const char *mnt, int nfiles, char **files)
{
	struct stat ms, fs;
	int i, bad = 0;

	if (ctl_check_mount(mnt))
		return 2;
	if (stat(mnt, &ms)) {
		fprintf(stderr, "offloadctl: %s: %s\n", mnt, strerror(errno));
		return 2;
	}
	for (i = 0; i < nfiles; i++) {
		/* Elsewhere the xattr would only be set on the file, and nothing promoted. */
		if (stat(files[i], &fs) == 0 && fs.st_dev != ms.st_dev) {
			fprintf(stderr, "offloadctl: %s: not a file of the mount %s\n", files[i], mnt);
			bad++;
			continue;
		}
		if (setxattr(files[i], "user.offload.promote", "1", 1, 0)) {
			fprintf(stderr, "offloadctl: %s: %s\n", files[i],
				errno == EOPNOTSUPP ? "the mount has no DRAM tier (-o dram=SIZE)"
						    : strerror(errno));
			bad++;
		} else {
			printf("queued %s\n", files[i]);
		}
	}
	return bad ? 1 : 0;
}

int ctl_stats(int argc, char **argv)
{
	const char *mnt = NULL;
	int json = 0, buckets = 0, i;

	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--buckets")) {
			buckets = 1;
		} else if (argv[i][0] != '-' && !mnt) {
			mnt = argv[i];
		} else {
			fprintf(stderr, "offloadctl: unknown argument '%s'\n", argv[i]);
			ctl_usage(stderr);
			return 2;
		}
	}
	if (!mnt) {
		ctl_usage(stderr);
		return 2;
	}
	return stats_show(mnt, json, buckets);
}

int ctl_promote(int argc, char **argv)
{
	return promote(argv[2], argc - 3, argv + 3);
}
