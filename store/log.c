/*
 * log.c: the daemon's log: stderr in the foreground, syslog once detached.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

static int ofs_syslog;

void ofs_log_to_syslog(int on)
{
	ofs_syslog = on;
	if (on)
		openlog("offloadfs", LOG_PID, LOG_DAEMON);
}

void ofs_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (!ofs_syslog) {
		fputs("offloadfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(LOG_NOTICE, fmt, ap);
	}
	va_end(ap);
}
