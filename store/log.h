/*
 * log: the daemon's log: stderr in the foreground, syslog once detached.
 * The store logs what a caller cannot be told (a failed background
 * commit, a page that failed its checksum).
 */
#ifndef OFFLOADFS_LOG_H
#define OFFLOADFS_LOG_H

void ofs_log_to_syslog(int on);
void ofs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
