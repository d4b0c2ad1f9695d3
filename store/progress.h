/*
 * progress.h: a progress display for long walks (fsck's, offloadctl
 * scrub's): a bar on to when it is a terminal, a line every few seconds
 * otherwise.  report is the stream of the walk's own messages:
 * ofs_progress_clear, called before one, flushes it and clears the bar,
 * so that the message starts a line; the bar is redrawn at the next step.
 */
#ifndef OFFLOADFS_PROGRESS_H
#define OFFLOADFS_PROGRESS_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

struct ofs_progress {
	const char *what;
	uint64_t total, done;
	FILE *to, *report;
	int tty;
	time_t last;
};

/* total: the steps the walk expects; 0 when it cannot tell (the count is shown alone). */
void ofs_progress_start(struct ofs_progress *p, const char *what, uint64_t total, FILE *to,
			FILE *report);
/*
 * Count is p->done (the caller steps it); final ends the display.  Past
 * the total (the walk found more than it expected) the count is shown
 * alone, never as more than all.
 */
void ofs_progress_show(struct ofs_progress *p, int final);
void ofs_progress_clear(struct ofs_progress *p);

#endif
