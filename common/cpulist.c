/*
 * cpulist.c: the kernel's CPU list format (cpulist.h).
 */
#include "cpulist.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* A CPU number at *s (digits only: strtoul would take a sign or spaces); -1 when none. */
static long cpulist_num(const char **s)
{
	const char *p = *s;
	unsigned long v = 0;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (unsigned long)(*p - '0');
		if (v >= INT_MAX)
			return -1; /* its count would not fit either */
	}
	*s = p;
	return (long)v;
}

int cpulist_parse(const char *s, unsigned *count, unsigned *last)
{
	unsigned long n = 0;
	long hi = -1;

	if (!s)
		return -EINVAL;
	for (;;) {
		long a = cpulist_num(&s), b = a;

		if (a < 0 || a <= hi)
			return -EINVAL;
		if (*s == '-') {
			s++;
			b = cpulist_num(&s);
			if (b < a)
				return -EINVAL;
		}
		n += (unsigned long)(b - a) + 1;
		hi = b;
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s == '\n')
			s++;
		if (*s)
			return -EINVAL;
		break;
	}
	*count = (unsigned)n;
	*last = (unsigned)hi;
	return 0;
}
