/*
 * kvb.c: what every backend, and the tools, share: making a struct kvb, a
 * key's home bucket, bucket file names, and the escaping of descriptor
 * values.
 */
#include "kvb.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>

#include <xxhash.h>

void kvb_init(struct kvb *kvb, const struct kvb_ops *ops, const struct kvb_admin_ops *admin,
	      void *arg)
{
	/* What no backend may leave out: the wrappers call these unchecked. */
	assert(ops->obj_open && ops->obj_write && ops->obj_truncate && ops->obj_view &&
	       ops->obj_dirty && ops->obj_commit_prepare && ops->obj_commit_done &&
	       ops->obj_close);
	assert(ops->read && ops->read_verified && ops->remove && ops->barrier_begin &&
	       ops->barrier_sync && ops->release);
	/* read_unref releases what read_ref handed out: both or neither. */
	assert(!ops->read_ref == !ops->read_unref);
	assert(admin->name && admin->start && admin->stop && admin->statfs && admin->describe &&
	       admin->checksum && admin->stats && admin->free);
	kvb->ops = ops;
	kvb->admin = admin;
	kvb->arg = arg;
}

uint32_t kvb_home_bucket(const char *key, size_t len, uint32_t bucket_count)
{
	return (uint32_t)(XXH64(key, len, 0) % bucket_count);
}

void kvb_bucket_name(uint32_t bucket, char *buf, size_t len)
{
	snprintf(buf, len, "bucket_%02x.data", bucket);
}

size_t kvb_desc_escape(char *out, size_t outlen, const char *v)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		int esc = c == '%' || c < 0x20 || c == 0x7f;

		if (n + (esc ? 3 : 1) < outlen) {
			if (esc) {
				out[n] = '%';
				out[n + 1] = hex[c >> 4];
				out[n + 2] = hex[c & 15];
			} else {
				out[n] = (char)c;
			}
		}
		n += esc ? 3 : 1;
	}
	if (outlen)
		out[n < outlen ? n : outlen - 1] = '\0';
	return n;
}

int kvb_desc_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s != '%') {
			*w++ = *s;
			continue;
		}
		if (!isxdigit((unsigned char)s[1]) || !isxdigit((unsigned char)s[2]))
			return -EINVAL;
		*w++ = (char)((isdigit((unsigned char)s[1]) ? s[1] - '0' : (s[1] | 0x20) - 'a' + 10) << 4 |
			      (isdigit((unsigned char)s[2]) ? s[2] - '0' : (s[2] | 0x20) - 'a' + 10));
		s += 2;
	}
	*w = '\0';
	return 0;
}
