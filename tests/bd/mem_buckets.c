/*
 * mem_buckets.c: buckets in memory with fault injection (mem_buckets.h).
 * Each bucket keeps two copies: the bytes as written, and the bytes as of
 * its last sync, which a power cut brings back.
 */
#include "mem_buckets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pages_io.h"

/* Never-written bytes read as this pattern, so that reading them shows. */
#define MEM_FILL 0xa5

struct mem_buckets {
	uint64_t bucket_size;
	uint32_t n;
	unsigned char **mem;
	unsigned char **durable; /* the bytes as of the last sync */
	struct kvb_mem_faults *faults;
};

static ssize_t mem_pread(void *dev, uint32_t b, void *buf, size_t len, uint64_t off)
{
	struct mem_buckets *m = dev;

	if (off >= m->bucket_size)
		return 0;
	if (len > m->bucket_size - off)
		len = (size_t)(m->bucket_size - off);
	if (m->faults)
		m->faults->read_bytes += len;
	memcpy(buf, m->mem[b] + off, len);
	return (ssize_t)len;
}

static ssize_t mem_pwrite(void *dev, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	struct mem_buckets *m = dev;

	if (m->faults) {
		m->faults->writes++;
		if (m->faults->fail_write_at && m->faults->writes == m->faults->fail_write_at)
			return -EIO;
	}
	if (off + len > m->bucket_size)
		return -ENOSPC;
	if (m->faults)
		m->faults->write_bytes += len;
	memcpy(m->mem[b] + off, buf, len);
	return (ssize_t)len;
}

static ssize_t mem_copy(void *dev, uint32_t fb, uint64_t from, uint32_t tb, uint64_t to,
			size_t len)
{
	struct mem_buckets *m = dev;

	if (m->faults) {
		m->faults->copies++;
		if (m->faults->copy_err)
			return m->faults->copy_err;
		m->faults->writes++;
		if (m->faults->fail_write_at && m->faults->writes == m->faults->fail_write_at)
			return -EIO;
	}
	if (from + len > m->bucket_size || to + len > m->bucket_size)
		return -EINVAL;
	if (m->faults)
		m->faults->copy_bytes += len;
	memmove(m->mem[tb] + to, m->mem[fb] + from, len);
	return (ssize_t)len;
}

static int mem_zero(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct mem_buckets *m = dev;

	if (off + len > m->bucket_size)
		return -ENOSPC;
	memset(m->mem[b] + off, 0, len);
	return 0;
}

/* Memory needs no blocks: only the refusals asked for. */
static int mem_reserve(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct mem_buckets *m = dev;

	(void)b;
	if (!m->faults)
		return 0;
	m->faults->reserves++;
	if (m->faults->reserve_max && len > m->faults->reserve_max)
		return -ENOSPC;
	if (m->faults->reserve_fail_at && m->faults->reserve_fail_at - 1 >= off &&
	    m->faults->reserve_fail_at - 1 < off + len)
		return -ENOSPC;
	return 0;
}

static int mem_sync(void *dev, uint32_t b)
{
	struct mem_buckets *m = dev;

	/* What a power cut cannot take away: the bytes as of this sync. */
	memcpy(m->durable[b], m->mem[b], m->bucket_size);
	return 0;
}

/* Nothing to write out in memory: the hint is only counted, for tests. */
static void mem_writeback(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct mem_buckets *m = dev;

	(void)b;
	(void)off;
	if (m->faults) {
		m->faults->writebacks++;
		m->faults->writeback_bytes += len;
	}
}

/* Nothing to prefetch in memory: the hint is only recorded, for tests. */
static void mem_willneed(void *dev, uint32_t b, uint64_t off, uint64_t len)
{
	struct mem_buckets *m = dev;

	if (!m->faults)
		return;
	m->faults->willneeds++;
	m->faults->willneed_bucket = b;
	m->faults->willneed_off = off;
	m->faults->willneed_len = len;
}

static void mem_release(void *dev)
{
	struct mem_buckets *m = dev;
	uint32_t i;

	for (i = 0; i < m->n; i++) {
		free(m->mem[i]);
		free(m->durable[i]);
	}
	free(m->mem);
	free(m->durable);
	free(m);
}

static const struct kvb_pages_io mem_io = {
	.pread = mem_pread,
	.pwrite = mem_pwrite,
	.zero = mem_zero,
	.reserve = mem_reserve,
	.sync = mem_sync,
	.copy = mem_copy,
	.writeback = mem_writeback,
	.willneed = mem_willneed,
	.release = mem_release,
};

int kvb_mem_init(struct kvb *kvb, const struct kvb_pages_geom *g, struct kvb_mem_faults *faults)
{
	struct mem_buckets *m = calloc(1, sizeof(*m));
	char err[256];
	uint32_t i;
	int ret;

	if (!m)
		return -ENOMEM;
	ret = kvb_pages_init_io(kvb, g, &mem_io, m, err, sizeof(err));
	if (ret) {
		free(m);
		return ret;
	}
	/* The geometry is checked now: buckets of it can be made. */
	m->bucket_size = g->bucket_size;
	m->faults = faults;
	m->mem = calloc(g->bucket_count, sizeof(*m->mem));
	m->durable = calloc(g->bucket_count, sizeof(*m->durable));
	if (!m->mem || !m->durable) {
		kvb_release(kvb);
		return -ENOMEM;
	}
	for (i = 0; i < g->bucket_count; i++, m->n++) {
		m->mem[i] = malloc(g->bucket_size);
		m->durable[i] = malloc(g->bucket_size);
		if (!m->mem[i] || !m->durable[i]) {
			m->n++; /* mem_release frees this one's too */
			kvb_release(kvb);
			return -ENOMEM;
		}
		memset(m->mem[i], MEM_FILL, g->bucket_size);
		memset(m->durable[i], MEM_FILL, g->bucket_size);
	}
	return 0;
}

void kvb_mem_power_cut(struct kvb *kvb)
{
	struct mem_buckets *m = kvb_pages_io_dev(kvb);
	uint32_t i;

	for (i = 0; i < m->n; i++)
		memcpy(m->mem[i], m->durable[i], m->bucket_size);
}
