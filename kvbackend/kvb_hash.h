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

#endif
