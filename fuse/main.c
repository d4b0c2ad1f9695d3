/*
 * main.c: offloadfs ROOT MOUNTPOINT [-f] [-d] [-o opt,...]
 *
 * The argument order lets mount(8) and /etc/fstab start us through fuse's
 * mount helper: mount -t fuse.offloadfs ROOT MOUNTPOINT -o ...
 */
#include "ofs.h"
#include "uring.h"
#include "ll.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

struct ofs_cli {
	char *page_size, *bucket_size, *bucket_count, *meta, *meta_timeout, *timeout, *sync_ms;
	char *dram, *promote_after, *promote_window, *metrics;
	char *backend, *ubsio_lib, *ubsio_device, *ubsio_ssd_size, *kv_max_bytes, *kv_max_keys;
	char *kv_buffer_max, *kv_cache, *ubsio_key_max, *prefill, *data_group;
	char *extent_size;
	char *evict, *evict_high, *evict_low, *evict_min_age;
	char ubsio_lib_abs[4096];
	int ubsio_old_init;
	int verify;
	int uring;
	const char *root;
	int npos;
	int help, version;
	int bad;
};

enum { KEY_HELP, KEY_VERSION };

/* Defaults of the daemon's options (--help lists them). */
#define OFS_DEFAULT_TIMEOUT 3600.0          /* cache_timeout, seconds */
#define OFS_DEFAULT_SYNC_MS 1000U           /* sync_interval, milliseconds */
#define OFS_SYNC_MS_MAX 3600000U
#define OFS_DEFAULT_PREFILL (512ULL << 10)  /* prefill: a KV block of up to this at open */
#define OFS_PREFILL_MAX (64ULL << 20)       /* bounded: the whole object is read into memory */
#define OFS_DEFAULT_PROMOTE_WINDOW 60U      /* promote_window, seconds */
#define OFS_DEFAULT_MAX_THREADS 16U         /* libfuse's worker threads without -o max_threads */

#define CLI_OPT(t, p) { t, offsetof(struct ofs_cli, p), 1 }

static const struct fuse_opt ofs_opts[] = {
	CLI_OPT("page_size=%s", page_size),
	CLI_OPT("bucket_size=%s", bucket_size),
	CLI_OPT("bucket_count=%s", bucket_count),
	CLI_OPT("meta=%s", meta),
	CLI_OPT("meta_timeout=%s", meta_timeout),
	CLI_OPT("cache_timeout=%s", timeout),
	CLI_OPT("sync_interval=%s", sync_ms),
	CLI_OPT("dram=%s", dram),
	CLI_OPT("promote_after=%s", promote_after),
	CLI_OPT("promote_window=%s", promote_window),
	CLI_OPT("metrics=%s", metrics),
	CLI_OPT("prefill=%s", prefill),
	CLI_OPT("extent_size=%s", extent_size),
	CLI_OPT("data_group=%s", data_group),
	CLI_OPT("evict=%s", evict),
	CLI_OPT("evict_high=%s", evict_high),
	CLI_OPT("evict_low=%s", evict_low),
	CLI_OPT("evict_min_age=%s", evict_min_age),
	CLI_OPT("backend=%s", backend),
	CLI_OPT("ubsio_lib=%s", ubsio_lib),
	CLI_OPT("ubsio_device=%s", ubsio_device),
	CLI_OPT("ubsio_ssd_size=%s", ubsio_ssd_size),
	CLI_OPT("ubsio_key_max=%s", ubsio_key_max),
	{ "ubsio_old_init", offsetof(struct ofs_cli, ubsio_old_init), 1 },
	CLI_OPT("kv_max_bytes=%s", kv_max_bytes),
	CLI_OPT("kv_max_keys=%s", kv_max_keys),
	CLI_OPT("kv_buffer_max=%s", kv_buffer_max),
	CLI_OPT("kv_cache=%s", kv_cache),
	{ "verify", offsetof(struct ofs_cli, verify), 1 },
	{ "noverify", offsetof(struct ofs_cli, verify), 2 },
	{ "uring", offsetof(struct ofs_cli, uring), 1 },
	{ "nouring", offsetof(struct ofs_cli, uring), 2 },
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END
};

static int ofs_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct ofs_cli *cli = data;

	(void)outargs;
	switch (key) {
	case KEY_HELP:
		cli->help = 1;
		return 0;
	case KEY_VERSION:
		cli->version = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		/* ROOT is ours; the mount point goes on to libfuse. */
		cli->npos++;
		if (cli->npos == 1 && !cli->root) {
			cli->root = arg;
			return 0;
		}
		if (cli->npos <= 2 || (cli->npos == 1 && cli->root))
			return 1;
		fprintf(stderr, "offloadfs: unexpected argument '%s'\n", arg);
		cli->bad = 1;
		return 0;
	default:
		return 1;
	}
}

/* The one usage line, for --help and for a command line without ROOT and MOUNTPOINT. */
#define OFS_USAGE "usage: %s ROOT MOUNTPOINT [-f] [-d] [-s] [-o opt,...]"

static void ofs_usage(const char *prog)
{
	printf(OFS_USAGE "\n"
	       "       mount -t fuse.offloadfs ROOT MOUNTPOINT -o opt,...\n\n"
	       "ROOT holds the bucket files (a 3FS or other shared POSIX mount in production);\n"
	       "MOUNTPOINT shows one directory per tenant and one file per KV block.\n\n"
	       "offloadfs options (-o), fixed when the store is created:\n"
	       "    page_size=N       allocation unit, a power of two (default 65536)\n"
	       "    bucket_size=N     size of each bucket file, K/M/G suffixes (default 4G)\n"
	       "    bucket_count=N    number of bucket files, 1..256 (default 256)\n"
	       "    extent_size=N     files larger than this are cut into extents of it\n"
	       "                      (default 64M, at most bucket_size)\n"
	       "other offloadfs options:\n"
	       "    meta=PATH|URI     the sqlite metadata store (default ROOT/offloadfs.db), or\n"
	       "                      a PostgreSQL one: postgresql://... (password from\n"
	       "                      ~/.pgpass, PGPASSFILE, PGPASSWORD, never the URI)\n"
	       "    meta_timeout=S    PostgreSQL: how long a request waits for an unreachable or\n"
	       "                      restarting server before EIO, seconds (default 30)\n"
	       "    cache_timeout=S   kernel entry/attribute cache, seconds (default 3600)\n"
	       "    sync_interval=MS  group commit: make closed files durable against power\n"
	       "                      loss every MS milliseconds (default 1000; 0: only fsync)\n"
	       "    verify|noverify   check every read against per-page checksums (default verify)\n"
	       "    uring|nouring     requests over io_uring, served on the caller's CPU (Linux\n"
	       "                      6.14+; needs the fuse module's enable_uring=1; default: used\n"
	       "                      when /sys/module/fuse/parameters/enable_uring is Y)\n"
	       "    prefill=SIZE      the first open of an object up to SIZE after the kernel\n"
	       "                      looked it up puts it all in the kernel's page cache, so\n"
	       "                      its reads need no round trip (default 512K, at most\n"
	       "                      64M; 0: off)\n"
	       "    dram=SIZE         DRAM tier for hot objects, K/M/G suffixes (default 0: off)\n"
	       "    promote_after=N   the Nth open for reading within the window promotes (0: off)\n"
	       "    promote_window=S  the window, seconds (default 60)\n"
	       "    metrics=PATH      write Prometheus metrics to PATH every 5 s (textfile collector)\n"
	       "    data_group=GROUP  ROOT 0750 and the bucket files 0640 owned by GROUP, whose\n"
	       "                      members can then read every tenant's objects straight\n"
	       "                      from the bucket files (default: ROOT 0700, files 0600)\n"
	       "    evict=lru|off     when full, unlink the least recently opened closed files\n"
	       "                      (default lru); off: ENOSPC\n"
	       "    evict_high=P, evict_low=P  watermarks, percent of capacity (default 90, 80)\n"
	       "    evict_min_age=S   a file used or changed within S s goes only for a write\n"
	       "                      that finds no room, after older ones (default 10)\n"
	       "    backend=NAME      pages (default for a new store) or ubsio; an existing store\n"
	       "                      keeps the backend it was created with\n"
	       "ubsio backend options (a distributed KV store through libubsio_kvc.so):\n"
	       "    ubsio_lib=PATH    the library (default: the one the store last used, else\n"
	       "                      libubsio_kvc.so via the search path)\n"
	       "    ubsio_device=N    deviceId passed to UbsioKvCacheInit (default: the last\n"
	       "                      one, else -1: no Ascend device)\n"
	       "    ubsio_ssd_size=N  call the newer UbsioKvCacheInit(deviceId, ssdSize) with N\n"
	       "    ubsio_old_init    call the older UbsioKvCacheInit(deviceId); with neither,\n"
	       "                      the Init (and library, device) the store last used,\n"
	       "                      else the older one\n"
	       "    ubsio_key_max=N   longest key given to the library, 64..255 (default 255);\n"
	       "                      longer paths are shortened with a hash\n"
	       "    kv_max_bytes=N    capacity: bytes of values (default 0: no limit)\n"
	       "    kv_max_keys=N     capacity: number of values (default 0: no limit)\n"
	       "    kv_buffer_max=N   memory for data of files open for writing (default 1G)\n"
	       "    kv_cache=N        memory for values fetched for readers (default 256M)\n"
	       "environment defaults (-o wins): MOONCAKE_DISTRIBUTED_ROOT_DIR (ROOT, when only\n"
	       "MOUNTPOINT is given), MOONCAKE_DISTRIBUTED_PAGE_SIZE, _BUCKET_SIZE, _BUCKET_COUNT\n\n",
	       prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* One geometry value from -o (1) or the environment (2); 0 when unset, -1 on error. */
static int ofs_geom_value(const char *opt, const char *val, const char *env, uint64_t *out)
{
	const char *src = "option";

	if (!val) {
		val = getenv(env);
		src = env;
	}
	if (!val)
		return 0;
	if (ofs_parse_size(val, out)) {
		fprintf(stderr, "offloadfs: invalid %s '%s' (from %s): expected a size such "
				"as 65536, 64K or 4G\n",
			opt, val, src);
		return -1;
	}
	return src == env ? 2 : 1;
}

/*
 * *path made absolute against the working directory: the daemon runs in /
 * once detached, where a relative path names another file (-1 after a
 * message).
 */
static int ofs_abs_opt(const char *opt, char **path)
{
	char cwd[PATH_MAX], *abs;

	if (!*path || (*path)[0] == '/')
		return 0;
	if (!(*path)[0]) {
		fprintf(stderr, "offloadfs: %s= needs a path\n", opt);
		return -1;
	}
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, *path) < 0) {
		fprintf(stderr, "offloadfs: %s=%s: %s\n", opt, *path, strerror(errno));
		return -1;
	}
	free(*path);
	*path = abs;
	return 0;
}

static int ofs_config_from(struct ofs_cli *cli, struct ofs_config *cfg)
{
	char err[256];
	uint64_t v;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	cfg->root = cli->root;
	/*
	 * The statvfs of the metadata's disk, each tick, must find it from /;
	 * a connection URI is no path.
	 */
	if (!meta_is_remote(cli->meta) && ofs_abs_opt("meta", &cli->meta))
		return -1;
	cfg->meta_path = cli->meta;
	if (cli->meta_timeout) {
		unsigned long v;
		char *end;

		errno = 0;
		v = strtoul(cli->meta_timeout, &end, 10);
		if (errno || *end || !isdigit((unsigned char)cli->meta_timeout[0]) || v < 1 ||
		    v > META_TIMEOUT_MAX) {
			fprintf(stderr, "offloadfs: invalid meta_timeout '%s': seconds, 1..%u\n",
				cli->meta_timeout, META_TIMEOUT_MAX);
			return -1;
		}
		if (!meta_is_remote(cli->meta)) {
			fprintf(stderr, "offloadfs: option meta_timeout needs meta=postgresql://...\n");
			return -1;
		}
		cfg->meta_timeout = (unsigned)v;
	}
	cfg->geom.page_size = OFS_DEFAULT_PAGE_SIZE;
	cfg->geom.bucket_size = OFS_DEFAULT_BUCKET_SIZE;
	cfg->geom.bucket_count = OFS_DEFAULT_BUCKET_COUNT;

	r = ofs_geom_value("page_size", cli->page_size, "MOONCAKE_DISTRIBUTED_PAGE_SIZE", &v);
	if (r < 0)
		return -1;
	if (r) {
		cfg->geom.page_size = v;
		cfg->set_page_size = 1;
		cfg->env_page_size = r == 2;
	}
	r = ofs_geom_value("bucket_size", cli->bucket_size, "MOONCAKE_DISTRIBUTED_BUCKET_SIZE", &v);
	if (r < 0)
		return -1;
	if (r) {
		cfg->geom.bucket_size = v;
		cfg->set_bucket_size = 1;
		cfg->env_bucket_size = r == 2;
	}
	r = ofs_geom_value("bucket_count", cli->bucket_count, "MOONCAKE_DISTRIBUTED_BUCKET_COUNT",
			   &v);
	if (r < 0)
		return -1;
	if (r) {
		if (v < 1 || v > 256) {
			fprintf(stderr, "offloadfs: invalid bucket_count %llu%s: 1..256\n",
				(unsigned long long)v,
				r == 2 ? " (from MOONCAKE_DISTRIBUTED_BUCKET_COUNT)" : "");
			return -1;
		}
		cfg->geom.bucket_count = (uint32_t)v;
		cfg->set_bucket_count = 1;
		cfg->env_bucket_count = r == 2;
	}
	if (cli->extent_size && (ofs_parse_size(cli->extent_size, &cfg->extent_size) ||
				 cfg->extent_size == 0)) {
		fprintf(stderr, "offloadfs: invalid extent_size '%s': a size such as 64M\n",
			cli->extent_size);
		return -1;
	}
	if (cli->backend && strcmp(cli->backend, "pages") && strcmp(cli->backend, "ubsio")) {
		fprintf(stderr, "offloadfs: invalid backend '%s': pages or ubsio\n", cli->backend);
		return -1;
	}
	cfg->backend = cli->backend;
	if (!cli->backend || strcmp(cli->backend, "ubsio")) {
		const char *stray = cli->ubsio_lib ? "ubsio_lib" : cli->ubsio_device ? "ubsio_device"
			: cli->ubsio_ssd_size ? "ubsio_ssd_size" : cli->kv_max_bytes ? "kv_max_bytes"
			: cli->kv_max_keys ? "kv_max_keys" : cli->kv_buffer_max ? "kv_buffer_max"
			: cli->kv_cache ? "kv_cache" : cli->ubsio_key_max ? "ubsio_key_max"
			: cli->ubsio_old_init ? "ubsio_old_init" : NULL;

		/* Silently ignoring them would hide a mount of the wrong backend. */
		if (stray) {
			fprintf(stderr, "offloadfs: option %s needs backend=ubsio\n", stray);
			return -1;
		}
	}
	if (cli->ubsio_lib) {
		/* Recorded for later mounts and fsck: never relative to a working directory. */
		if (ofs_ubsio_lib_abs(cli->ubsio_lib, cli->ubsio_lib_abs, sizeof(cli->ubsio_lib_abs),
				      err, sizeof(err))) {
			fprintf(stderr, "offloadfs: %s\n", err);
			return -1;
		}
		cfg->ubsio.lib = cli->ubsio_lib_abs;
	}
	if (cli->data_group) {
		struct group *gr = getgrnam(cli->data_group);
		char *end;
		unsigned long g;

		errno = 0;
		g = strtoul(cli->data_group, &end, 10);
		if (gr) {
			cfg->data_gid = gr->gr_gid;
		} else if (!errno && !*end && end != cli->data_group && g < (gid_t)-1) {
			cfg->data_gid = (gid_t)g;
		} else {
			fprintf(stderr, "offloadfs: invalid data_group '%s': no such group\n",
				cli->data_group);
			return -1;
		}
		cfg->has_data_gid = 1;
	}
	cfg->ubsio.device_id = KVB_UBSIO_DEVICE_UNSET;
	cfg->ubsio.buffer_max = OFS_UBSIO_BUFFER_MAX;
	cfg->ubsio.cache_max = OFS_UBSIO_CACHE_MAX;
	cfg->ubsio.key_max = OFS_UBSIO_KEY_MAX;
	{
		static const struct { const char *name; size_t off; uint64_t max; } o[] = {
			{ "ubsio_ssd_size", offsetof(struct kvb_ubsio_config, ssd_size), UINT64_MAX },
			{ "kv_max_bytes", offsetof(struct kvb_ubsio_config, max_bytes), UINT64_MAX },
			{ "kv_max_keys", offsetof(struct kvb_ubsio_config, max_keys), UINT64_MAX },
			{ "kv_buffer_max", offsetof(struct kvb_ubsio_config, buffer_max), UINT64_MAX },
			{ "kv_cache", offsetof(struct kvb_ubsio_config, cache_max), UINT64_MAX },
		};
		const char *vals[] = { cli->ubsio_ssd_size, cli->kv_max_bytes, cli->kv_max_keys,
				       cli->kv_buffer_max, cli->kv_cache };
		size_t i;

		for (i = 0; i < sizeof(o) / sizeof(o[0]); i++) {
			if (!vals[i])
				continue;
			if (ofs_parse_size(vals[i], &v)) {
				fprintf(stderr, "offloadfs: invalid %s '%s': expected a number such "
						"as 1000000, 64K or 4G\n", o[i].name, vals[i]);
				return -1;
			}
			*(uint64_t *)((char *)&cfg->ubsio + o[i].off) = v;
		}
		/* Neither option: the Init the store was last mounted with (store/config.c). */
		cfg->ubsio.new_init = cli->ubsio_ssd_size ? 1 : cli->ubsio_old_init ? 0 : -1;
		if (cli->ubsio_ssd_size && cli->ubsio_old_init) {
			fprintf(stderr, "offloadfs: ubsio_ssd_size and ubsio_old_init exclude "
					"each other\n");
			return -1;
		}
		if (cfg->ubsio.buffer_max < (1ULL << 20)) {
			fprintf(stderr, "offloadfs: invalid kv_buffer_max %llu: at least 1M\n",
				(unsigned long long)cfg->ubsio.buffer_max);
			return -1;
		}
	}
	if (cli->ubsio_device) {
		char *end;
		long d;

		errno = 0;
		d = strtol(cli->ubsio_device, &end, 10);
		if (errno || *end || end == cli->ubsio_device || d < -1 || d > INT32_MAX) {
			fprintf(stderr, "offloadfs: invalid ubsio_device '%s': a device number, "
				"or -1 for none\n",
				cli->ubsio_device);
			return -1;
		}
		cfg->ubsio.device_id = (int32_t)d;
	}
	if (cli->ubsio_key_max) {
		if (ofs_parse_size(cli->ubsio_key_max, &v) || v < 64 || v > KVB_UBSIO_KEY_MAX) {
			fprintf(stderr, "offloadfs: invalid ubsio_key_max '%s': 64..%d (the library "
				"takes keys of up to %d bytes)\n", cli->ubsio_key_max,
				KVB_UBSIO_KEY_MAX, KVB_UBSIO_KEY_MAX);
			return -1;
		}
		cfg->ubsio.key_max = (uint32_t)v;
	}
	/* The check a store's recorded geometry gets too (store/config.c, offloadctl fsck). */
	if (ofs_geom_valid(&cfg->geom, err, sizeof(err))) {
		fprintf(stderr, "offloadfs: %s\n", err);
		return -1;
	}
	return 0;
}

/* A non-negative integer option; 0 when absent.  -1 (after a message) when malformed. */
static int ofs_uint_opt(const char *name, const char *val, unsigned *out)
{
	unsigned long v;
	char *end;

	if (!val)
		return 0;
	errno = 0;
	v = strtoul(val, &end, 10);
	if (errno || *end || end == val || val[0] == '-' || v > 1000000000UL) {
		fprintf(stderr, "offloadfs: invalid %s '%s': a whole number\n", name, val);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/*
 * metrics=PATH is written every 5 s as PATH.tmp.PID renamed over PATH:
 * refused now, with a message, when that cannot work, rather than a log
 * line every 5 s.
 */
static int ofs_metrics_path_check(const char *path)
{
	char tmp[PATH_MAX + 32];
	struct stat st;
	int fd;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "offloadfs: metrics=%s: %s\n", path, strerror(EISDIR));
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "offloadfs: metrics=%s cannot be written: %s\n", path,
			strerror(errno));
		return -1;
	}
	close(fd);
	unlink(tmp);
	return 0;
}

/* ROOT at or below the mount point would be hidden by, or reached through, the mount. */
static int ofs_root_outside(const char *root, const char *mnt)
{
	char r[PATH_MAX], m[PATH_MAX];
	size_t ml;

	if (!realpath(root, r) || !realpath(mnt, m))
		return 0; /* the store open and the mount say what is wrong */
	ml = strlen(m);
	if (!strcmp(r, m) || (!strncmp(r, m, ml) && (r[ml] == '/' || !strcmp(m, "/")))) {
		fprintf(stderr, "offloadfs: ROOT %s is %sthe mount point %s: refusing; give a "
				"ROOT outside it\n",
			r, strcmp(r, m) ? "inside " : "", m);
		return -1;
	}
	return 0;
}

/*
 * The mount's root is a directory: over a file the kernel takes the file's
 * type for it and every access through the mount fails (EIO).  Refused
 * before the store is opened, so nothing in ROOT is made.
 */
static int ofs_mnt_is_dir(const char *mnt)
{
	struct stat st;

	if (stat(mnt, &st) == 0 && !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "offloadfs: MOUNTPOINT %s: not a directory\n", mnt);
		return 0;
	}
	return 1; /* a directory, or the mount says what is wrong */
}

/* -ofsname=ROOT,...: a ',' or '\\' in ROOT is escaped, or libfuse would split there. */
static char *ofs_fsname_opt(const char *root)
{
	static const char pre[] = "-ofsname=", post[] = ",subtype=offloadfs,default_permissions";
	char *out = malloc(sizeof(pre) + 2 * strlen(root) + sizeof(post)), *p;

	if (!out)
		return NULL;
	p = stpcpy(out, pre);
	for (; *root; root++) {
		if (*root == ',' || *root == '\\')
			*p++ = '\\';
		*p++ = *root;
	}
	strcpy(p, post);
	return out;
}

/* evict=, evict_high=, evict_low=, evict_min_age=; -1 after saying what is wrong. */
static int ofs_evict_opts(struct ofs_cli *cli, struct ofs *ofs)
{
	ofs->evict_on = 1;
	ofs->evict_high = OFS_EVICT_HIGH;
	ofs->evict_low = OFS_EVICT_LOW;
	ofs->evict_min_age = OFS_EVICT_MIN_AGE;
	if (cli->evict && strcmp(cli->evict, "lru") && strcmp(cli->evict, "off")) {
		fprintf(stderr, "offloadfs: invalid evict '%s': lru or off\n", cli->evict);
		return -1;
	}
	ofs->evict_on = !cli->evict || !strcmp(cli->evict, "lru");
	if (ofs_uint_opt("evict_high", cli->evict_high, &ofs->evict_high) ||
	    ofs_uint_opt("evict_low", cli->evict_low, &ofs->evict_low) ||
	    ofs_uint_opt("evict_min_age", cli->evict_min_age, &ofs->evict_min_age))
		return -1;
	if (ofs->evict_high > 100 || ofs->evict_low >= ofs->evict_high) {
		fprintf(stderr, "offloadfs: evict_low=%u and evict_high=%u: percentages with "
				"low < high <= 100\n", ofs->evict_low, ofs->evict_high);
		return -1;
	}
	return 0;
}

/* The daemon's own options, checked, with their defaults; -1 after saying what is wrong. */
static int ofs_daemon_opts(struct ofs_cli *cli, struct ofs *ofs, struct ofs_config *cfg)
{
	ofs->timeout = OFS_DEFAULT_TIMEOUT;
	if (cli->timeout) {
		char *end;

		ofs->timeout = strtod(cli->timeout, &end);
		if (*end || end == cli->timeout || !isfinite(ofs->timeout) || ofs->timeout < 0) {
			fprintf(stderr, "offloadfs: invalid cache_timeout '%s'\n", cli->timeout);
			return -1;
		}
	}
	cfg->verify = cli->verify != 2;
	cfg->epochs = 1;
	ofs->sync_ms = OFS_DEFAULT_SYNC_MS;
	if (cli->sync_ms) {
		uint64_t v;
		char *end;

		errno = 0;
		v = strtoull(cli->sync_ms, &end, 10);
		if (errno || *end || end == cli->sync_ms || cli->sync_ms[0] == '-' ||
		    v > OFS_SYNC_MS_MAX) {
			fprintf(stderr, "offloadfs: invalid sync_interval '%s': milliseconds, "
					"0..%u\n",
				cli->sync_ms, OFS_SYNC_MS_MAX);
			return -1;
		}
		ofs->sync_ms = (unsigned)v;
	}
	if (cli->dram && ofs_parse_size(cli->dram, &cfg->dram_capacity)) {
		fprintf(stderr, "offloadfs: invalid dram '%s': a size such as 512M or 4G\n", cli->dram);
		return -1;
	}
	ofs->prefill_max = OFS_DEFAULT_PREFILL;
	if (cli->prefill && (ofs_parse_size(cli->prefill, &ofs->prefill_max) ||
			    ofs->prefill_max > OFS_PREFILL_MAX)) {
		fprintf(stderr, "offloadfs: invalid prefill '%s': a size up to 64M, or 0\n",
			cli->prefill);
		return -1;
	}
	ofs->promote_window = OFS_DEFAULT_PROMOTE_WINDOW;
	if (ofs_uint_opt("promote_after", cli->promote_after, &ofs->promote_after) ||
	    ofs_uint_opt("promote_window", cli->promote_window, &ofs->promote_window))
		return -1;
	if (ofs->promote_after && !cfg->dram_capacity) {
		fprintf(stderr, "offloadfs: promote_after needs a DRAM tier (-o dram=SIZE)\n");
		return -1;
	}
	if (ofs_abs_opt("metrics", &cli->metrics))
		return -1;
	ofs->metrics_path = cli->metrics;
	if (cli->metrics && ofs_metrics_path_check(cli->metrics))
		return -1;
	return ofs_evict_opts(cli, ofs);
}

/* What the mount found and did, in one line of the log. */
static void ofs_log_mounted(const struct ofs *ofs, const char *mnt)
{
	ofs_log("%s store %s at %s; %s; %llu objects; recovery dropped %llu unfinished "
		"writes and %llu unlinked-open files, reverted %llu and dropped %llu unsynced "
		"versions that failed their checksum, and dropped %llu files whose value the "
		"backend no longer had",
		ofs->store.created ? "created new" : ofs->store.was_clean ? "mounted clean"
								  : "mounted unclean",
		ofs->store.root, mnt,
		ofs->store.start_msg, (unsigned long long)ofs->store.nfiles,
		(unsigned long long)ofs->store.dropped_new,
		(unsigned long long)ofs->store.dropped_orphans,
		(unsigned long long)ofs->store.reverted,
		(unsigned long long)ofs->store.dropped_corrupt,
		(unsigned long long)ofs->store.dropped_missing);
}

/* mountinfo writes a space, tab, newline and backslash as \ooo: decoded in place. */
static void ofs_mountinfo_unescape(char *s)
{
	char *p;

	for (p = s; (p = strchr(p, '\\')); p++) {
		if (p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
		    p[3] <= '7') {
			*p = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			memmove(p + 1, p + 4, strlen(p + 4) + 1);
		}
	}
}

/*
 * The last mount at the path real in /proc/self/mountinfo (the one on
 * top): its device (MAJ:MIN), type and source.  0 when there is none.
 */
static int ofs_mountinfo_top(const char *real, char *dev, size_t devlen, char *type,
			     size_t typelen, char *src, size_t srclen)
{
	char line[3 * PATH_MAX], mnt[PATH_MAX], d[32], t[64], so[PATH_MAX], *p;
	int found = 0;
	FILE *f;

	if (!(f = fopen("/proc/self/mountinfo", "r")))
		return 0;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE ...". */
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mnt) != 2)
			continue;
		ofs_mountinfo_unescape(mnt);
		if (strcmp(mnt, real))
			continue;
		t[0] = so[0] = '\0';
		if ((p = strstr(line, " - ")))
			(void)sscanf(p + 3, "%63s %4095s", t, so);
		ofs_mountinfo_unescape(so);
		snprintf(dev, devlen, "%s", d);
		snprintf(type, typelen, "%s", t);
		snprintf(src, srclen, "%s", so);
		found = 1;
	}
	fclose(f);
	return found;
}

/*
 * A mount over a live offloadfs mount would hide it: its files vanish
 * from every path, new ones land in the other store, and fusermount3 -u
 * takes the top one.  Refused before the store is opened.
 */
static int ofs_mnt_not_ours(const char *mnt)
{
	char real[PATH_MAX], dev[32], type[64], src[PATH_MAX];

	if (!realpath(mnt, real))
		return 1; /* the mount says what is wrong */
	if (ofs_mountinfo_top(real, dev, sizeof(dev), type, sizeof(type), src, sizeof(src)) &&
	    !strcmp(type, "fuse.offloadfs")) {
		fprintf(stderr, "offloadfs: MOUNTPOINT %s is already an offloadfs mount (of %s): "
				"refusing to mount over it; unmount it first\n", real, src);
		return 0;
	}
	return 1;
}

/*
 * Let the kernel read ahead as much as one READ carries.  A FUSE mount's
 * read-ahead is the smaller of max_readahead and its bdi's, which starts
 * at 128 KiB: a cold read of a 2 MiB object was then 16 READs.  The
 * bdi is named after the mount's device, read from mountinfo (a stat of
 * the mount point would wait for the INIT that this daemon has not
 * served yet).  Best effort: only root may write it.
 */
static void ofs_mount_readahead(const char *real)
{
	char path[64], dev[32], type[64], src[PATH_MAX];
	unsigned kb = 0;
	FILE *f;

	/* The last mount there is ours. */
	if (!ofs_mountinfo_top(real, dev, sizeof(dev), type, sizeof(type), src, sizeof(src)))
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "r+");
	if (!f)
		return;
	if (fscanf(f, "%u", &kb) == 1 && kb < OFS_MAX_REQUEST / 1024) {
		rewind(f);
		fprintf(f, "%u\n", OFS_MAX_REQUEST / 1024);
	}
	if (fclose(f))
		ofs_log("cannot raise the read-ahead of %s from %u KiB: %s", real, kb,
			strerror(errno));
}

/*
 * Serve the mount until it ends: detach (unless -f), the
 * group-commit, promotion and eviction threads, libfuse's loop.  0 for a normal stop.
 */
static int ofs_serve(struct ofs *ofs, struct fuse_session *se,
		     const struct fuse_cmdline_opts *opts)
{
	struct fuse_loop_config *loop;
	int ret;

	ofs_log_mounted(ofs, opts->mountpoint);
	fuse_daemonize(opts->foreground);
	ofs_log_to_syslog(!opts->foreground);
	/* Its parent gone, the detached daemon holds again what the parent held for it. */
	if (!opts->foreground && (ret = meta_forked(ofs->store.meta))) {
		ofs_log("cannot lock %s again after detaching (%s): another process holds it; "
			"unmounting", ofs->store.meta_shown, strerror(-ret));
		return 1;
	}
	/* After daemonize: a thread does not survive its fork. */
	if (ofs_syncer_start(ofs))
		ofs_log("cannot start the group-commit thread: only fsync makes data durable");
	if (ofs_promoter_start(ofs))
		ofs_log("cannot start the promotion worker: the DRAM tier stays empty");
	if (ofs_evictor_start(ofs))
		ofs_log("cannot start the eviction worker: the group-commit thread evicts at "
			"its tick, and writers that find no room evict themselves");
	if (opts->singlethread) {
		ret = fuse_session_loop(se);
	} else {
		loop = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(loop, (unsigned)opts->clone_fd);
		fuse_loop_cfg_set_max_threads(loop, opts->max_threads ? opts->max_threads
								   : OFS_DEFAULT_MAX_THREADS);
		ret = fuse_session_loop_mt(se, loop);
		fuse_loop_cfg_destroy(loop);
	}
	/* Ended by SIGTERM, SIGINT or SIGHUP: a normal stop, not a failure. */
	if (ret == SIGTERM || ret == SIGINT || ret == SIGHUP)
		ret = 0;
	ofs_uring_stop(ofs);
	ofs_evictor_stop(ofs);
	ofs_promoter_stop(ofs);
	ofs_syncer_stop(ofs);
	return ret;
}

/*
 * sqlite's own log, for what it found damaged in the database: the
 * requests that meet it fail with EUCLEAN, and the log is where the
 * operator learns why and what to run.  At most one line a minute.
 */
static void ofs_sqlite_log(void *arg, int code, const char *msg)
{
	static time_t last;
	static unsigned quiet;
	time_t now = time(NULL);
	unsigned n;

	(void)arg;
	if ((code & 0xff) != SQLITE_CORRUPT && (code & 0xff) != SQLITE_NOTADB)
		return;
	if (__atomic_load_n(&last, __ATOMIC_RELAXED) &&
	    now - __atomic_load_n(&last, __ATOMIC_RELAXED) < 60) {
		__atomic_fetch_add(&quiet, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&last, now, __ATOMIC_RELAXED);
	n = __atomic_exchange_n(&quiet, 0, __ATOMIC_RELAXED);
	ofs_log("the metadata database is damaged (sqlite: %s%s%.0u%s): requests that read "
		"it fail with EUCLEAN; unmount and run offloadctl fsck", msg,
		n ? "; " : "", n, n ? " more such messages not logged" : "");
}

/* fuse_opt_parse strdup()s the values of our %s options. */
static void ofs_cli_free(struct ofs_cli *cli)
{
	free(cli->page_size);
	free(cli->bucket_size);
	free(cli->bucket_count);
	free(cli->meta);
	free(cli->timeout);
	free(cli->sync_ms);
	free(cli->dram);
	free(cli->promote_after);
	free(cli->promote_window);
	free(cli->backend);
	free(cli->ubsio_lib);
	free(cli->ubsio_device);
	free(cli->ubsio_ssd_size);
	free(cli->ubsio_key_max);
	free(cli->kv_max_bytes);
	free(cli->kv_max_keys);
	free(cli->kv_buffer_max);
	free(cli->kv_cache);
	free(cli->metrics);
	free(cli->prefill);
	free(cli->extent_size);
	free(cli->data_group);
	free(cli->evict);
	free(cli->evict_high);
	free(cli->evict_low);
	free(cli->evict_min_age);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = { 0 };
	struct fuse_session *se = NULL;
	struct ofs_cli cli = { 0 };
	struct ofs_config cfg;
	struct ofs ofs;
	char err[1024], mnt_real[PATH_MAX], *fsname = NULL;
	int ret = 1, mounted = 0;

	memset(&ofs, 0, sizeof(ofs));
	/* Before sqlite is first used: its configuration is fixed from there. */
	sqlite3_config(SQLITE_CONFIG_LOG, ofs_sqlite_log, NULL);
	if (fuse_opt_parse(&args, &cli, ofs_opts, ofs_opt_proc) == -1 || cli.bad)
		goto out_args;
	if (cli.help) {
		ofs_usage(argv[0]);
		ret = 0;
		goto out_args;
	}
	if (cli.version) {
		printf("offloadfs %s (libfuse %s, schema %d)\n", OFS_VERSION, fuse_pkgversion(),
		       META_SCHEMA_VERSION);
		ret = 0;
		goto out_args;
	}
	if (cli.npos == 1 && getenv("MOONCAKE_DISTRIBUTED_ROOT_DIR")) {
		/* The only argument was the mount point. */
		if (fuse_opt_add_arg(&args, cli.root) == -1)
			goto out_args;
		cli.root = getenv("MOONCAKE_DISTRIBUTED_ROOT_DIR");
	}
	if (!cli.root || cli.npos < 1 || (cli.npos < 2 && !getenv("MOONCAKE_DISTRIBUTED_ROOT_DIR"))) {
		fprintf(stderr, OFS_USAGE " (see --help)\n", argv[0]);
		goto out_args;
	}
	if (ofs_config_from(&cli, &cfg))
		goto out_args;
	if (ofs_daemon_opts(&cli, &ofs, &cfg))
		goto out_args;
	/* The kernel enforces modes and owners: we store them, it checks them. */
	fsname = ofs_fsname_opt(cli.root);
	if (!fsname || fuse_opt_add_arg(&args, fsname) == -1)
		goto out_args;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		goto out_args;
	if (!opts.mountpoint) {
		fprintf(stderr, "offloadfs: no MOUNTPOINT given (see --help)\n");
		goto out_args;
	}
	if (!ofs_mnt_is_dir(opts.mountpoint) || ofs_root_outside(cli.root, opts.mountpoint) ||
	    !ofs_mnt_not_ours(opts.mountpoint))
		goto out_args;
	ofs.foreground = opts.foreground;
	pthread_cond_init(&ofs.kcond, NULL);
	/* Unknown -o options are refused here, by name, before anything is touched. */
	se = fuse_session_new(&args, ofs_batch_ops(), sizeof(struct fuse_lowlevel_ops), &ofs);
	if (!se)
		goto out_args;
	ofs.se = se;
	if (ofs_store_open(&ofs.store, &cfg, err, sizeof(err))) {
		fprintf(stderr, "offloadfs: %s\n", err);
		goto out_session;
	}
	ofs_evict_init(&ofs.store, ofs.evict_on, ofs.evict_high, ofs.evict_low, ofs.evict_min_age);
	ofs.store.evict.gone = ofs_evicted;
	ofs.store.evict.moved = ofs_atime_moved;
	ofs.store.evict.gone_arg = &ofs;
	if (ofs_table_init(&ofs)) {
		fprintf(stderr, "offloadfs: %s: cannot load the root directory\n",
			ofs.store.meta_shown);
		goto out_store;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_store;
	/* Resolved before the mount: a stat of a component once mounted waits for INIT. */
	if (!realpath(opts.mountpoint, mnt_real))
		mnt_real[0] = '\0';
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	mounted = 1;
	/*
	 * Only when it may be used: uring.c under libfuse's I/O costs libfuse
	 * its splice of read replies, also for requests on /dev/fuse.
	 */
	if ((cli.uring == 1 || (cli.uring == 0 && ofs_uring_enabled())) &&
	    ofs_uring_attach(&ofs, se))
		ofs_log("uring: cannot set up; requests stay on /dev/fuse");
	if (mnt_real[0])
		ofs_mount_readahead(mnt_real);
	ret = ofs_serve(&ofs, se, &opts);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_store:
	/* destroy() drops unclosed writers before the snapshot is taken. */
	fuse_session_destroy(se);
	se = NULL;
	ofs_uring_free(&ofs);
	ofs_table_release(&ofs);
	ofs_evict_fini(&ofs.store);
	if (ofs_store_close(&ofs.store)) {
		ofs_log("unmount: the clean snapshot could not be saved; the next mount rebuilds");
		ret = 1;
	} else if (mounted) {
		ofs_log("unmounted %s cleanly", opts.mountpoint);
	} else {
		/* libfuse said why above: nothing was served. */
		ofs_log("not mounted at %s; the store is closed cleanly", opts.mountpoint);
	}
out_session:
	if (se)
		fuse_session_destroy(se);
out_args:
	ofs_cli_free(&cli);
	free(opts.mountpoint);
	free(fsname);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
