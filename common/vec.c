/* vec.c: see vec.h. */
#include "vec.h"

#include <errno.h>
#include <stdlib.h>

int vec_u64_push(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		uint64_t *w = realloc(*v, c * sizeof(*w));

		if (!w)
			return -ENOMEM;
		*v = w;
		*cap = c;
	}
	(*v)[(*n)++] = x;
	return 0;
}
