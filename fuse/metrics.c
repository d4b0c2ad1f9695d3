/*
 * metrics.c: counters and their Prometheus exposition.  Every metric has
 * HELP and TYPE lines; names and meanings are listed in README.md.
 */
#include "metrics.h"
#include "uring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ofs.h"

struct mbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void mb_printf(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mb_printf(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = (b->cap + (size_t)n + 1) * 2;
			char *p = realloc(b->p, cap);

			if (!p) {
				b->oom = 1;
				return;
			}
			b->p = p;
			b->cap = cap;
		}
	}
}

static void mb_head(struct mbuf *b, const char *name, const char *type, const char *help)
{
	mb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void mb_one(struct mbuf *b, const char *name, const char *type, const char *help,
		   uint64_t v)
{
	mb_head(b, name, type, help);
	mb_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static uint64_t ld(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static void mb_hist(struct mbuf *b, const char *name, const char *help, const struct ofs_hist *h)
{
	uint64_t cum = 0;
	int i;

	mb_head(b, name, "histogram", help);
	for (i = 0; i < OFS_LAT_NBUCKETS; i++) {
		cum += ld(&h->counts[i]);
		mb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, ofs_lat_bounds[i],
			  (unsigned long long)cum);
	}
	cum += ld(&h->counts[OFS_LAT_NBUCKETS]);
	mb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
	mb_printf(b, "%s_sum %.9f\n", name, (double)ld(&h->sum_ns) / 1e9);
	mb_printf(b, "%s_count %llu\n", name, (unsigned long long)cum);
}

static void mb_tenant(struct mbuf *b, const char *metric, const char *tenant, uint64_t v)
{
	const char *l;

	mb_printf(b, "%s{tenant=\"", metric);
	for (l = tenant; *l; l++)
		mb_printf(b, *l == '"' || *l == '\\' ? "\\%c" : *l == '\n' ? "\\n" : "%c", *l);
	mb_printf(b, "\"} %llu\n", (unsigned long long)v);
}

/*
 * Tenants with a quota: what their files hold and the quota; tenants
 * evictions touched: how many files and bytes were evicted from them.
 */
static void ofs_metrics_tenants(struct ofs *ofs, struct mbuf *b)
{
	struct ofs_tenant_use t[64];
	struct ofs_tenant_evicted ev[OFS_EVICT_TENANTS];
	int i, n = ofs_evict_tenants(&ofs->store, t, 64), nev;

	mb_head(b, "offloadfs_tenant_used_bytes", "gauge",
		"Bytes (whole pages) a tenant's files hold, for tenants with a quota.");
	for (i = 0; i < n; i++)
		mb_tenant(b, "offloadfs_tenant_used_bytes", t[i].name, t[i].used);
	mb_head(b, "offloadfs_tenant_quota_bytes", "gauge",
		"A tenant's quota (user.offload.quota on its directory).");
	for (i = 0; i < n; i++)
		mb_tenant(b, "offloadfs_tenant_quota_bytes", t[i].name, t[i].quota);
	nev = ofs_evict_tenant_counts(&ofs->store, ev, OFS_EVICT_TENANTS);
	mb_head(b, "offloadfs_tenant_evictions_total", "counter",
		"Files evicted from a tenant (any reason).");
	for (i = 0; i < nev; i++)
		mb_tenant(b, "offloadfs_tenant_evictions_total", ev[i].name, ev[i].count);
	mb_head(b, "offloadfs_tenant_evicted_bytes_total", "counter",
		"Bytes of the files evicted from a tenant.");
	for (i = 0; i < nev; i++)
		mb_tenant(b, "offloadfs_tenant_evicted_bytes_total", ev[i].name, ev[i].bytes);
}

/* Eviction: by reason, bytes, and the pinned objects (a count of their xattrs). */
static void ofs_metrics_evict(struct ofs *ofs, struct mbuf *b)
{
	struct ofs_evict *e = &ofs->store.evict;
	uint64_t pinned = 0;
	int r;

	mb_head(b, "offloadfs_evictions_total", "counter",
		"Files evicted (unlinked as least recently used), by reason.");
	for (r = 0; r < OFS_EVICT_NREASONS; r++)
		mb_printf(b, "offloadfs_evictions_total{reason=\"%s\"} %llu\n",
			  ofs_evict_reason_name[r], (unsigned long long)ld(&e->evictions[r]));
	mb_one(b, "offloadfs_evicted_bytes_total", "counter", "Bytes of the files evicted.",
	       ld(&e->evicted_bytes));
	mb_one(b, "offloadfs_evict_waits_total", "counter",
	       "Writes that found no room and waited for the eviction worker's pass.",
	       ld(&e->put_waits));
	pthread_mutex_lock(&ofs->store.lock);
	if (meta_xattr_count(ofs->store.meta, OFS_PIN_XATTR, &pinned))
		pinned = 0;
	pthread_mutex_unlock(&ofs->store.lock);
	mb_one(b, "offloadfs_objects_pinned", "gauge",
	       "Files with user.offload.pin set, never evicted.", pinned);
	ofs_metrics_tenants(ofs, b);
}

char *ofs_metrics_render(struct ofs *ofs, size_t *len)
{
	struct kvb *kvb = &ofs->store.kvb;
	struct ofs_metrics *m = &ofs->store.metrics;
	struct mbuf b = { 0 };
	struct kvb_stats ks = { 0 };
	struct kvb_statfs sf = { 0 };
	uint64_t used, fr, largest, nfiles;
	uint32_t i, nb = ofs->store.geom.bucket_count;
	int c;

	kvb_stats(kvb, &ks);
	pthread_mutex_lock(&ofs->store.lock);
	nfiles = ofs->store.nfiles;
	pthread_mutex_unlock(&ofs->store.lock);

	mb_one(&b, "offloadfs_page_size_bytes", "gauge", "Allocation unit of the store.",
	       ofs->store.geom.page_size);
	/* From the backend's statfs: all pages of all buckets, or a KV store's capacity. */
	if (kvb_statfs(kvb, &sf))
		memset(&sf, 0, sizeof(sf));
	mb_one(&b, "offloadfs_capacity_bytes", "gauge",
	       "Bytes the store can hold (all pages of all buckets; kv_max_bytes on ubsio).",
	       sf.blocks * sf.block_size);
	mb_one(&b, "offloadfs_store_pages", "gauge", "Pages (statfs blocks) of the store.",
	       sf.blocks);
	mb_one(&b, "offloadfs_store_pages_free", "gauge",
	       "Free pages (statfs free blocks) of the store.", sf.blocks_free);
	mb_head(&b, "offloadfs_backend_info", "gauge", "The storage backend of the store.");
	mb_printf(&b, "offloadfs_backend_info{backend=\"%s\"} 1\n", kvb_name(kvb));
	if (!strcmp(ofs->store.backend, "ubsio")) {
		const struct kvb_ubsio_config *uc = &ofs->store.ubsio;
		const char *l = uc->lib ? uc->lib : "";

		/* How the library was reached: offloadctl scrub loads it the same way. */
		mb_head(&b, "offloadfs_ubsio_info", "gauge",
			"The UBSIO library, Init variant and device of this mount.");
		mb_printf(&b, "offloadfs_ubsio_info{lib=\"");
		for (; *l; l++)
			mb_printf(&b, *l == '"' || *l == '\\' ? "\\%c" : *l == '\n' ? "\\n" : "%c",
				  *l);
		if (uc->new_init > 0)
			mb_printf(&b, "\",init=\"%llu\",device=\"%d\"} 1\n",
				  (unsigned long long)uc->ssd_size, uc->device_id);
		else
			mb_printf(&b, "\",init=\"old\",device=\"%d\"} 1\n", uc->device_id);
	}
	mb_head(&b, "offloadfs_bucket_pages_allocated", "gauge",
		"Pages in use in each bucket (objects, writes in progress, frees awaiting a sync).");
	for (i = 0; i < nb; i++)
		if (kvb_bucket_usage(kvb, i, &used, &fr, &largest) == 0)
			mb_printf(&b, "offloadfs_bucket_pages_allocated{bucket=\"%02x\"} %llu\n", i,
				  (unsigned long long)used);
	mb_head(&b, "offloadfs_bucket_pages_free", "gauge", "Free pages in each bucket.");
	for (i = 0; i < nb; i++)
		if (kvb_bucket_usage(kvb, i, &used, &fr, &largest) == 0)
			mb_printf(&b, "offloadfs_bucket_pages_free{bucket=\"%02x\"} %llu\n", i,
				  (unsigned long long)fr);
	mb_head(&b, "offloadfs_bucket_largest_free_run_pages", "gauge",
		"Longest run of free pages in each bucket (fragmentation).");
	for (i = 0; i < nb; i++)
		if (kvb_bucket_usage(kvb, i, &used, &fr, &largest) == 0)
			mb_printf(&b, "offloadfs_bucket_largest_free_run_pages{bucket=\"%02x\"} %llu\n",
				  i, (unsigned long long)largest);
	mb_one(&b, "offloadfs_objects", "gauge", "Regular files (objects) in the store.", nfiles);
	mb_one(&b, "offloadfs_page_allocations_total", "counter",
	       "Page runs allocated or extended in place.", ks.allocations);
	mb_one(&b, "offloadfs_page_frees_total", "counter", "Page runs freed.", ks.frees);
	mb_one(&b, "offloadfs_page_allocation_failures_total", "counter",
	       "Allocations that found no room in any bucket (ENOSPC).", ks.alloc_failures);
	mb_one(&b, "offloadfs_bytes_written_total", "counter", "Bytes written by clients.",
	       ld(&m->bytes_written));
	mb_one(&b, "offloadfs_bytes_read_total", "counter",
	       "Bytes read by clients through the daemon, prefills included (page-cache hits "
	       "are not seen).",
	       ld(&m->bytes_read));
	mb_one(&b, "offloadfs_prefills_total", "counter",
	       "Objects put whole into the kernel's page cache at their first open (-o prefill).",
	       ld(&m->prefills));
	mb_one(&b, "offloadfs_objects_committed_total", "counter",
	       "Objects committed (a close or fsync after writes).", ld(&m->objects_committed));
	mb_one(&b, "offloadfs_commit_failures_total", "counter",
	       "Commits that failed; the previous content stayed.", ld(&m->commit_failures));
	mb_one(&b, "offloadfs_objects_read_total", "counter", "Objects opened for reading.",
	       ld(&m->objects_read));
	mb_head(&b, "offloadfs_objects_lost_total", "counter",
		"Files dropped because the backend no longer had their value, by reason "
		"(missing: a KV store evicted or lost it; a cache miss, not corruption).");
	mb_printf(&b, "offloadfs_objects_lost_total{reason=\"missing\"} %llu\n",
		  (unsigned long long)ld(&m->values_missing));
	mb_head(&b, "offloadfs_copies_total", "counter",
		"copy_file_range requests by how the bytes moved (backend: inside the storage, "
		"copy_file_range(2) between bucket files; memory: read and written by the daemon).");
	mb_printf(&b, "offloadfs_copies_total{how=\"backend\"} %llu\n",
		  (unsigned long long)ld(&m->copies_backend));
	mb_printf(&b, "offloadfs_copies_total{how=\"memory\"} %llu\n",
		  (unsigned long long)ld(&m->copies_memory));
	mb_one(&b, "offloadfs_uring_requests_total", "counter",
	       "Requests that came over io_uring (-o uring); the others came through /dev/fuse.",
	       ofs_uring_served(ofs));
	ofs_metrics_evict(ofs, &b);
	mb_hist(&b, "offloadfs_read_latency_seconds", "Daemon time per read request.",
		&m->read_lat);
	mb_hist(&b, "offloadfs_write_latency_seconds", "Daemon time per write request.",
		&m->write_lat);
	mb_head(&b, "offloadfs_recovery_dropped_objects", "gauge",
		"What the recovery of this mount dropped or reverted, by kind.");
	mb_printf(&b, "offloadfs_recovery_dropped_objects{kind=\"unfinished_write\"} %llu\n",
		  (unsigned long long)ofs->store.dropped_new);
	mb_printf(&b, "offloadfs_recovery_dropped_objects{kind=\"unlinked_open\"} %llu\n",
		  (unsigned long long)ofs->store.dropped_orphans);
	mb_printf(&b, "offloadfs_recovery_dropped_objects{kind=\"reverted_unsynced\"} %llu\n",
		  (unsigned long long)ofs->store.reverted);
	mb_printf(&b, "offloadfs_recovery_dropped_objects{kind=\"dropped_unsynced\"} %llu\n",
		  (unsigned long long)ofs->store.dropped_corrupt);
	mb_printf(&b, "offloadfs_recovery_dropped_objects{kind=\"value_missing\"} %llu\n",
		  (unsigned long long)ofs->store.dropped_missing);
	mb_one(&b, "offloadfs_checksum_failures_total", "counter",
	       "Reads refused (EIO) because a page did not match its checksum.",
	       ld(&m->checksum_failures));
	mb_one(&b, "offloadfs_syncs_total", "counter",
	       "Durability barriers (fsync, fsyncdir, group commit).", ld(&m->barriers));
	mb_one(&b, "offloadfs_promotions_queued_total", "counter",
	       "Promotions to the DRAM tier queued.", ld(&m->promotions_queued));
	mb_one(&b, "offloadfs_promotions_done_total", "counter",
	       "Promotions carried out.", ld(&m->promotions_done));
	mb_one(&b, "offloadfs_promotions_failed_total", "counter",
	       "Promotions that failed (read error, no room).", ld(&m->promotions_failed));
	mb_one(&b, "offloadfs_promotions_dropped_total", "counter",
	       "Promotions dropped because their object was deleted or overwritten.",
	       ld(&m->promotions_dropped));
	mb_one(&b, "offloadfs_dram_hits_total", "counter", "Reads served by the DRAM tier.",
	       ld(&m->dram_hits));
	mb_one(&b, "offloadfs_dram_misses_total", "counter",
	       "Reads of committed objects not in the DRAM tier.", ld(&m->dram_misses));
	mb_one(&b, "offloadfs_dram_evictions_total", "counter",
	       "Objects evicted from the DRAM tier (least recently used).",
	       ld(&m->dram_evictions));
	mb_one(&b, "offloadfs_dram_bytes", "gauge", "Bytes held by the DRAM tier.",
	       ofs->store.dram_capacity ? ofs_dram_used(&ofs->store.dram) : 0);
	mb_one(&b, "offloadfs_dram_capacity_bytes", "gauge", "Capacity of the DRAM tier.",
	       ofs->store.dram_capacity);
	mb_head(&b, "offloadfs_backend_calls_total", "counter",
		"Calls the storage backend made, by call.");
	for (c = 0; c < KVB_NCALLS; c++)
		mb_printf(&b, "offloadfs_backend_calls_total{backend=\"%s\",call=\"%s\"} %llu\n",
			  kvb_name(kvb), kvb_call_name(c), (unsigned long long)ks.calls[c]);
	mb_head(&b, "offloadfs_backend_errors_total", "counter",
		"Calls the storage backend made that failed, by call.");
	for (c = 0; c < KVB_NCALLS; c++)
		mb_printf(&b, "offloadfs_backend_errors_total{backend=\"%s\",call=\"%s\"} %llu\n",
			  kvb_name(kvb), kvb_call_name(c), (unsigned long long)ks.errors[c]);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

int ofs_metrics_write(struct ofs *ofs, const char *path)
{
	char tmp[4200];
	size_t len;
	char *text = ofs_metrics_render(ofs, &len);
	int fd, ret = 0;

	if (!text)
		return -ENOMEM;
	/* Same directory, then rename: a collector never sees half a file. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		free(text);
		return -errno;
	}
	if (write(fd, text, len) != (ssize_t)len)
		ret = -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	free(text);
	return ret;
}
