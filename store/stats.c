/* stats.c: the latency histograms (see stats.h). */
#include "stats.h"

#include <time.h>

const double ofs_lat_bounds[OFS_LAT_NBUCKETS] = {
	0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
	0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    1.0,
};

uint64_t ofs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void ofs_hist_observe(struct ofs_hist *h, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < OFS_LAT_NBUCKETS && s > ofs_lat_bounds[i])
		i++;
	OFS_COUNT(h->counts[i], 1);
	OFS_COUNT(h->sum_ns, ns);
	OFS_COUNT(h->n, 1);
}
