/*
 * htab.c: see htab.h.  Fibonacci hashing: the key times 2^64/phi, its top
 * bits the slot, so sequential keys (inode numbers, value ids) spread.
 */
#include "htab.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

static size_t htab_slot(const struct htab *t, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 20) & (t->size - 1);
}

int htab_init(struct htab *t)
{
	t->size = HTAB_INITIAL;
	t->count = 0;
	t->scan = 0;
	t->slots = calloc(t->size, sizeof(*t->slots));
	return t->slots ? 0 : -ENOMEM;
}

void htab_release(struct htab *t)
{
	free(t->slots);
	t->slots = NULL;
	t->size = t->count = 0;
}

struct htab_node *htab_find(const struct htab *t, uint64_t key)
{
	struct htab_node *n;

	for (n = t->slots[htab_slot(t, key)]; n; n = n->next)
		if (n->key == key)
			return n;
	return NULL;
}

static void htab_grow(struct htab *t)
{
	struct htab_node **old = t->slots;
	size_t oldsize = t->size, i;

	t->slots = calloc(oldsize * 2, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return;
	}
	t->size = oldsize * 2;
	for (i = 0; i < oldsize; i++) {
		struct htab_node *n = old[i], *next;

		for (; n; n = next) {
			size_t s = htab_slot(t, n->key);

			next = n->next;
			n->next = t->slots[s];
			t->slots[s] = n;
		}
	}
	free(old);
}

void htab_insert(struct htab *t, struct htab_node *n)
{
	size_t s;

	assert(!htab_find(t, n->key));
	if (t->count >= t->size)
		htab_grow(t);
	s = htab_slot(t, n->key);
	n->next = t->slots[s];
	t->slots[s] = n;
	t->count++;
}

void htab_remove(struct htab *t, struct htab_node *n)
{
	struct htab_node **pp = &t->slots[htab_slot(t, n->key)];

	while (*pp && *pp != n)
		pp = &(*pp)->next;
	assert(*pp == n);
	if (*pp) {
		*pp = n->next;
		t->count--;
	}
}

/* From where the last pop found one: emptying the table costs one pass. */
struct htab_node *htab_pop(struct htab *t)
{
	size_t i;

	for (i = 0; t->count && i < t->size; i++) {
		size_t s = (t->scan + i) & (t->size - 1);
		struct htab_node *n = t->slots[s];

		if (n) {
			t->slots[s] = n->next;
			t->count--;
			t->scan = s;
			return n;
		}
	}
	return NULL;
}
