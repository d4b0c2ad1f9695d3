/* test_htab: the shared hash table (common/htab.c) and growable array (common/vec.c). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "htab.h"
#include "vec.h"

struct item {
	int payload;
	struct htab_node node;
};

/* Inserts past several doublings, finds, removes half, empties with pop. */
START_TEST(test_insert_find_remove_pop)
{
	enum { N = 20000 };
	struct item *items = calloc(N, sizeof(*items));
	struct htab t;
	struct htab_node *n;
	size_t i, popped = 0;

	ck_assert_ptr_nonnull(items);
	ck_assert_int_eq(htab_init(&t), 0);
	for (i = 0; i < N; i++) {
		items[i].payload = (int)i;
		/* Sequential and scattered keys both. */
		items[i].node.key = i % 2 ? i : (uint64_t)i << 40;
		htab_insert(&t, &items[i].node);
	}
	ck_assert_uint_eq(t.count, N);
	ck_assert_uint_ge(t.size, N);
	for (i = 0; i < N; i++) {
		n = htab_find(&t, items[i].node.key);
		ck_assert_ptr_nonnull(n);
		ck_assert_int_eq(htab_entry(n, struct item, node)->payload, (int)i);
	}
	ck_assert_ptr_null(htab_find(&t, 3ULL << 40));
	for (i = 0; i < N; i += 2)
		htab_remove(&t, &items[i].node);
	ck_assert_uint_eq(t.count, N / 2);
	for (i = 0; i < N; i++)
		ck_assert(!htab_find(&t, items[i].node.key) == !(i % 2));
	while ((n = htab_pop(&t))) {
		ck_assert_int_eq(htab_entry(n, struct item, node)->payload % 2, 1);
		popped++;
	}
	ck_assert_uint_eq(popped, N / 2);
	ck_assert_uint_eq(t.count, 0);
	htab_release(&t);
	free(items);
}
END_TEST

/* Pushes past several doublings keep every value, in order. */
START_TEST(test_vec_push)
{
	uint64_t *v = NULL;
	size_t n = 0, cap = 0, i;

	for (i = 0; i < 1000; i++)
		ck_assert_int_eq(vec_u64_push(&v, &n, &cap, i * 7), 0);
	ck_assert_uint_eq(n, 1000);
	ck_assert_uint_ge(cap, 1000);
	for (i = 0; i < 1000; i++)
		ck_assert_uint_eq(v[i], i * 7);
	free(v);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("htab");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_insert_find_remove_pop);
	tcase_add_test(tc, test_vec_push);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
