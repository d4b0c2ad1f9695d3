/*
 * vec: a growable array of 64-bit values (inode numbers, mostly), kept as
 * three fields of the owner's: the array, its length and its capacity.
 */
#ifndef OFFLOADFS_VEC_H
#define OFFLOADFS_VEC_H

#include <stddef.h>
#include <stdint.h>

/* Append x, doubling the array when full; -ENOMEM (nothing changed) when that fails. */
int vec_u64_push(uint64_t **v, size_t *n, size_t *cap, uint64_t x);

#endif
