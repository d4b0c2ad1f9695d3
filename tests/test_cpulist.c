/*
 * test_cpulist: the kernel's CPU list format (common/cpulist.c), which
 * fuse/uring.c reads from /sys/devices/system/cpu/possible to know how
 * many queues the kernel keeps: lists with gaps in the numbering
 * included, as on machines whose CPUs are not numbered from 0 without one.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "cpulist.h"

static void expect(const char *s, unsigned count, unsigned last)
{
	unsigned c = 12345, l = 12345;

	ck_assert_msg(cpulist_parse(s, &c, &l) == 0, "'%s' refused", s);
	ck_assert_msg(c == count && l == last, "'%s': count %u last %u, expected %u and %u", s, c,
		      l, count, last);
}

static void refuse(const char *s)
{
	unsigned c = 12345, l = 12345;

	ck_assert_msg(cpulist_parse(s, &c, &l) == -EINVAL, "'%s' taken", s);
	ck_assert_msg(c == 12345 && l == 12345, "'%s': refused, yet the counts were set", s);
}

START_TEST(test_contiguous)
{
	expect("0\n", 1, 0);
	expect("0", 1, 0);
	expect("0-1\n", 2, 1);
	expect("0-255\n", 256, 255);
}
END_TEST

/* Gaps: the count (the kernel's num_possible_cpus()) is not the highest number plus one. */
START_TEST(test_gaps)
{
	expect("0-3,8-11\n", 8, 11);
	expect("0,2-3\n", 3, 3);
	expect("0,2,4,6\n", 4, 6);
	expect("1-3\n", 3, 3);
	expect("0-1,4-5,64\n", 5, 64);
	expect("3\n", 1, 3);
}
END_TEST

START_TEST(test_refused)
{
	refuse("");
	refuse("\n");
	refuse("x");
	refuse("0-");
	refuse("-3");
	refuse("3-1");       /* backwards */
	refuse("0-3,2-5");   /* overlaps the range before it */
	refuse("4,0");       /* out of order */
	refuse("0,,1");
	refuse("0,");
	refuse("0-7:2/4");   /* strides: never printed by the kernel */
	refuse("0 - 3");
	refuse("+1");
	refuse("0\n1");
	refuse("99999999999999999999");
	ck_assert_int_eq(cpulist_parse(NULL, NULL, NULL), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cpulist");
	TCase *tc = tcase_create("parse");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_contiguous);
	tcase_add_test(tc, test_gaps);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
