/* test_util.c — src/common/util.c's path and list helpers:
 * drv_list_has (an element of a comma-separated list: whole elements only,
 * first, middle and last, empty elements, never for an empty item) and
 * drv_dir_make_absolute (a relative dir made and written back absolute, an
 * existing one kept, no room for the absolute path, a missing parent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

static bool has(const char *list, const char *item)
{
    return drv_list_has(list, item, strlen(item));
}

static void test_list_has(void **st)
{
    (void)st;
    assert_true(has("GPU-a,GPU-b,GPU-c", "GPU-a"));
    assert_true(has("GPU-a,GPU-b,GPU-c", "GPU-b"));
    assert_true(has("GPU-a,GPU-b,GPU-c", "GPU-c"));
    assert_true(has("GPU-a", "GPU-a"));
    assert_false(has("GPU-a,GPU-b", "GPU-"));       /* a prefix is not an element */
    assert_false(has("GPU-ab,GPU-b", "GPU-a"));
    assert_false(has("GPU-a,GPU-b", "GPU-a,GPU-b"));
    assert_false(has("", "GPU-a"));
    assert_false(has(",,", ""));                    /* empty elements never match */
    assert_false(has("a,,b", ""));
    assert_true(has("a,,b", "b"));
    /* an item that is part of a longer string: only its len counts */
    assert_true(drv_list_has("x,GPU-b", "GPU-b,GPU-c", 5));
}

static void test_dir_make_absolute(void **st)
{
    (void)st;
    char base[] = "/tmp/drv-util-XXXXXX", cwd[PATH_MAX];
    assert_non_null(mkdtemp(base));
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(base), 0);
    char dir[PATH_MAX] = "./data";
    assert_int_equal(drv_dir_make_absolute(dir, sizeof dir), 0);
    char want[PATH_MAX + 8];
    char *real = realpath(base, NULL);
    assert_non_null(real);
    snprintf(want, sizeof want, "%s/data", real);
    assert_string_equal(dir, want);
    struct stat sb;
    assert_int_equal(stat(want, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    /* it exists: kept, the same answer */
    snprintf(dir, sizeof dir, "data");
    assert_int_equal(drv_dir_make_absolute(dir, sizeof dir), 0);
    assert_string_equal(dir, want);
    /* no room for the absolute path: -1, ENAMETOOLONG */
    char small[8] = "data";
    errno = 0;
    assert_int_equal(drv_dir_make_absolute(small, sizeof small), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    /* a missing parent */
    snprintf(dir, sizeof dir, "no/such/parent");
    assert_int_equal(drv_dir_make_absolute(dir, sizeof dir), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(rmdir(want), 0);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rmdir(base), 0);
    free(real);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_has),
        cmocka_unit_test(test_dir_make_absolute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
