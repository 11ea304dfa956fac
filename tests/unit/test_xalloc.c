/*
 * test_xalloc.c - the big-array allocation (common/xalloc.h): zeroed, every byte
 * writable, on both sides of the 2 MiB line, and freed again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/xalloc.h"

#include <string.h>

static void check_one(size_t n, size_t size)
{
    unsigned char *p = fg_xcalloc_big(n, size);
    assert_non_null(p);
    const size_t bytes = n * size;
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != 0)
            fail_msg("byte %zu of %zu x %zu is %u, not 0", i, n, size, p[i]);
    memset(p, 0xa5, bytes);
    assert_int_equal(p[0], 0xa5);
    assert_int_equal(p[bytes - 1], 0xa5);
    fg_xfree_big(p, n, size);
}

static void test_sizes(void **state)
{
    (void)state;
    const size_t mib = (size_t)1 << 20;
    const size_t sizes[][2] = {{1, 1},           {1000, 80},  {2 * mib - 1, 1}, {2 * mib, 1},
                               {2 * mib + 1, 1}, {74167, 80}, {3, 3 * mib},     {0, 16}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        check_one(sizes[k][0] ? sizes[k][0] : 1, sizes[k][1]);
    /* again, after the same sizes were freed: fresh memory is zeroed too */
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        check_one(sizes[k][0] ? sizes[k][0] : 1, sizes[k][1]);
    fg_xfree_big(NULL, 5 * mib, 1); /* freeing nothing is fine */
    fg_xfree_big(NULL, 1, 1);
}

/* Two big arrays at once do not overlap. */
static void test_apart(void **state)
{
    (void)state;
    const size_t n = (size_t)3 << 20;
    unsigned char *a = fg_xcalloc_big(n, 1), *b = fg_xcalloc_big(n, 1);
    memset(a, 1, n);
    memset(b, 2, n);
    for (size_t i = 0; i < n; i += 4096)
        assert_true(a[i] == 1 && b[i] == 2);
    assert_true(a[n - 1] == 1 && b[n - 1] == 2);
    fg_xfree_big(a, n, 1);
    fg_xfree_big(b, n, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
