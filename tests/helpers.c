#include <check.h>
#include <string.h>

#include "helpers.h"

void fill(char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 37 + i * 11 + (i >> 8));
}

struct meta_inode new_record(struct ofs_store *s, const char *name)
{
	struct meta_inode m = { 0 };

	m.parent = META_ROOT_INO;
	m.mode = 0100644;
	m.bucket = -1;
	m.prev_bucket = -1;
	m.state = META_NEW;
	ck_assert_int_eq(meta_insert(s->meta, &m, name, strlen(name)), 0);
	return m;
}
