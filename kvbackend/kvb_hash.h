/*
 * kvb_hash.h: XXH3 for object bytes (checksums, page sums), through
 * libxxhash's x86 dispatcher where the build found it: AVX2 or AVX-512
 * rather than the plain entry points' SSE2 (meson.build).
 */
#ifndef OFS_KVB_HASH_H
#define OFS_KVB_HASH_H

#ifndef XXH_STATIC_LINKING_ONLY
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#endif
#include <xxhash.h>
#ifdef OFS_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#endif
#include <stddef.h>
#include <stdint.h>

/*
 * An object's checksum is one of two sums of its bytes (DESIGN.md,
 * "Checksums"): the XXH3-64 of the bytes, or, for a version committed
 * after writes in place, the XXH3-64 of its page sums (the XXH3-64 of
 * each page, the last one cut at the size) as 64-bit little-endian
 * integers, which a commit updates by hashing only the pages it changed.
 * A reader accepts either.  An empty object has the same sum both ways.
 */
/* One page sum into a page-sum checksum being made, as 64-bit little endian. */
static inline void kvb_pcsum_update(XXH3_state_t *st, uint64_t v)
{
	unsigned char le[8];
	int b;

	for (b = 0; b < 8; b++)
		le[b] = (unsigned char)(v >> (8 * b));
	XXH3_64bits_update(st, le, sizeof(le));
}

/* The page sums of len bytes starting on a page boundary into st, pages of ps bytes. */
static inline void kvb_pages_sum_update(XXH3_state_t *st, const void *buf, size_t len,
					uint64_t ps)
{
	const unsigned char *b = buf;
	size_t at;

	for (at = 0; at < len; at += (size_t)ps)
		kvb_pcsum_update(st, XXH3_64bits(b + at, len - at < ps ? len - at : (size_t)ps));
}

static inline uint64_t kvb_pcsums_sum(const uint64_t *pcs, uint64_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return XXH3_64bits(pcs, (size_t)(n * sizeof(*pcs)));
#else
	XXH3_state_t st;
	uint64_t i;

	XXH3_64bits_reset(&st);
	for (i = 0; i < n; i++)
		kvb_pcsum_update(&st, pcs[i]);
	return XXH3_64bits_digest(&st);
#endif
}

/* The page-sum checksum of len bytes in memory, with pages of ps bytes. */
static inline uint64_t kvb_pages_sum_buf(const void *buf, size_t len, uint64_t ps)
{
	XXH3_state_t st;

	XXH3_64bits_reset(&st);
	kvb_pages_sum_update(&st, buf, len, ps);
	return XXH3_64bits_digest(&st);
}

/* Whether buf matches csum, of either kind (the bytes' sum tried first: one pass). */
static inline int kvb_csum_matches(const void *buf, size_t len, uint64_t ps, uint64_t csum)
{
	return XXH3_64bits(buf, len) == csum || kvb_pages_sum_buf(buf, len, ps) == csum;
}

#endif
