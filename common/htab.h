/*
 * htab: a chained hash table of 64-bit keys (inode numbers, value ids),
 * intrusive: an entry embeds a struct htab_node and is found again with
 * htab_entry.  The table never owns or frees entries.  It doubles when it
 * holds as many entries as slots; when that allocation fails the chains
 * just grow longer, so an insert never fails.  Not thread-safe: the
 * caller's lock guards it.
 */
#ifndef OFFLOADFS_HTAB_H
#define OFFLOADFS_HTAB_H

#include <stddef.h>
#include <stdint.h>

struct htab_node {
	struct htab_node *next;
	uint64_t key;
};

struct htab {
	struct htab_node **slots;
	size_t size;   /* a power of two */
	size_t count;
	size_t scan;   /* where htab_pop looks first */
};

#define htab_entry(node, type, member) \
	((type *)(void *)((char *)(node) - offsetof(type, member)))

#define HTAB_INITIAL 1024

/* An empty table of HTAB_INITIAL slots; -ENOMEM. */
int htab_init(struct htab *t);
/* Frees the slots (the entries are the caller's). */
void htab_release(struct htab *t);
struct htab_node *htab_find(const struct htab *t, uint64_t key);
/* n->key set by the caller; a key must not be in the table already. */
void htab_insert(struct htab *t, struct htab_node *n);
/* n must be in the table. */
void htab_remove(struct htab *t, struct htab_node *n);
/*
 * Take any one entry out of the table and return it (NULL when empty):
 * for emptying it at the end.
 */
struct htab_node *htab_pop(struct htab *t);

#endif
