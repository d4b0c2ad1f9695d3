/*
 * progress.c: the progress display of long walks (progress.h).
 */
#include "progress.h"

#include <inttypes.h>
#include <unistd.h>

void ofs_progress_start(struct ofs_progress *p, const char *what, uint64_t total, FILE *to,
			FILE *report)
{
	p->what = what;
	p->total = total;
	p->done = 0;
	p->to = to;
	p->report = report;
	p->tty = isatty(fileno(to));
	p->last = 0;
}

void ofs_progress_show(struct ofs_progress *p, int final)
{
	time_t now = time(NULL);
	/* No total, or one the walk went past (files made meanwhile): the count alone. */
	int known = p->total && p->done <= p->total;

	if (p->tty) {
		int width = 40, fill = known ? (int)(p->done * (uint64_t)width / p->total) : 0;

		if (!final && now == p->last && p->done != p->total)
			return;
		if (known)
			fprintf(p->to, "\r%s [%.*s%*s] %" PRIu64 "/%" PRIu64 "%s", p->what, fill,
				"########################################", width - fill, "",
				p->done, p->total, final ? "\n" : "");
		else
			fprintf(p->to, "\r\033[K%s %" PRIu64 "%s", p->what, p->done,
				final ? "\n" : "");
	} else {
		if (!final && now - p->last < 5)
			return;
		if (known)
			fprintf(p->to, "%s: %" PRIu64 "/%" PRIu64 "\n", p->what, p->done, p->total);
		else
			fprintf(p->to, "%s: %" PRIu64 "\n", p->what, p->done);
	}
	p->last = now;
	fflush(p->to);
}

void ofs_progress_clear(struct ofs_progress *p)
{
	if (!p->tty)
		return;
	fflush(p->report);
	fprintf(p->to, "\r\033[K");
	p->last = 0;
}
