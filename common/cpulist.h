/*
 * cpulist: the kernel's CPU list format, as in /sys/devices/system/cpu/possible
 * or online: CPU numbers and ranges, ascending, separated by commas, with a
 * trailing newline ("0-3,8-11", "0,2-3", "0").  The CPUs of a machine need
 * not be numbered without gaps, so the count and the highest number differ
 * there; each caller takes the one it needs.
 */
#ifndef OFFLOADFS_CPULIST_H
#define OFFLOADFS_CPULIST_H

/*
 * 0 with *count the CPUs listed and *last the highest number; -EINVAL
 * (nothing set) for an empty list, anything but numbers, ranges and commas
 * (the strides "0-7:2/4" that the kernel takes on input but never prints
 * included), a range that runs backwards, or one that does not come after
 * the one before it.
 */
int cpulist_parse(const char *s, unsigned *count, unsigned *last);

#endif
