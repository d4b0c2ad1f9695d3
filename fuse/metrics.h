/*
 * metrics: the counters operators graph, in the Prometheus text format.
 *
 * The store keeps the counters (stats.h); rendering reads them, the
 * backend's counters and per-bucket usage.  The
 * text is written atomically (temp file + rename, the node_exporter
 * textfile-collector convention) every few seconds to -o metrics=PATH, and
 * served live as the xattr user.offload.metrics of the mount's root
 * (offloadctl stats reads it).
 */
#ifndef OFFLOADFS_METRICS_H
#define OFFLOADFS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "stats.h"

struct ofs;
/* The exposition text (malloc'd, NUL-terminated); NULL on ENOMEM. */
char *ofs_metrics_render(struct ofs *ofs, size_t *len);
/* Write it to path atomically; 0 or -errno. */
int ofs_metrics_write(struct ofs *ofs, const char *path);

#endif
