/* SPDX-License-Identifier: Apache-2.0 */
/* The packages= step as the engine sees it (pkg/pkg-step.h): when nothing is to be
 * installed pkg_step_begin answers 0 and no step (no packages, all in the image, or a
 * cached set, which the execution then holds); a missing package is named in the
 * error's subject, and a backend that installs nothing refuses it by name. The engine
 * here is built by hand around a fake backend; no sandbox starts. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/exec.h"
#include "pkg/packages.h"
#include "pkg/pkg-step.h"

static char tmp[] = "/tmp/hxs-pkg-step-XXXXXX";
static pkg_req image_pkgs[] = { { "pandas", "1.5.3" } };

static const backend_ops installs = { .name = "installs", .features = BACKEND_INSTALLS_PACKAGES };
static const backend_ops fixed = { .name = "fixed-image", .features = BACKEND_BUILT_IMAGE };

static hxs_engine *engine(const backend_ops *ops)
{
        hxs_engine *e = calloc(1, sizeof(*e));
        assert_non_null(e);
        hxs_config_defaults(&e->cfg);
        e->ops = ops;
        e->pkgs = (pkg_index){ image_pkgs, 1 };
        e->pkgcache.dirfd = e->pkgcache.sets_fd = e->pkgcache.meta_fd = e->pkgcache.req_fd = -1;
        e->pkgcache.tmp_fd = e->pkgcache.work_fd = e->pkgcache.trash_fd = -1;
        return e;
}

static hxs_exec *exec_of(hxs_engine *e, const char *package)
{
        hxs_request *r = hxs_request_new();
        assert_non_null(r);
        hxs_request_set_language(r, HXS_LANG_PYTHON);
        hxs_request_set_code(r, "x", 1);
        if (package)
                assert_int_equal(hxs_request_add_package(r, package), 0);
        hxs_exec *x;
        hxs_error err = { 0 };
        assert_int_equal(exec_new(e, r, &x, &err), 0);
        return x;
}

static void test_nothing_to_install_is_no_step(void **state)
{
        hxs_engine *e = engine(&installs);
        hxs_error err = { 0 };
        pkg_step *s = (pkg_step *)1;
        hxs_exec *x = exec_of(e, NULL);
        assert_int_equal(pkg_step_begin(e, x, &s, &err), 0);
        assert_null(s);
        assert_int_equal(x->packages, HXS_PACKAGES_NONE);
        hxs_exec_free(x);

        x = exec_of(e, "pandas>=1.5");
        assert_int_equal(pkg_step_begin(e, x, &s, &err), 0);
        assert_null(s);
        assert_int_equal(x->packages, HXS_PACKAGES_IMAGE);
        assert_string_equal(x->pkgs.path, "");
        hxs_exec_free(x);
        free(e);
}

static void test_a_missing_package_is_the_subject(void **state)
{
        hxs_engine *e = engine(&installs); /* no package source: the cache is off */
        hxs_error err = { 0 };
        pkg_step *s = NULL;
        hxs_exec *x = exec_of(e, "leftpad==1.0");
        assert_int_equal(pkg_step_begin(e, x, &s, &err), -ENOENT);
        assert_null(s);
        assert_int_equal(err.kind, HXS_ERR_NOT_FOUND);
        assert_string_equal(err.field, "packages");
        assert_string_equal(err.subject, "leftpad==1.0");
        hxs_exec_free(x);
        free(e);
}

static void test_a_backend_that_installs_nothing_names_it(void **state)
{
        hxs_engine *e = engine(&fixed);
        e->pkgcache.enabled = true; /* a source is configured, for another backend */
        hxs_error err = { 0 };
        pkg_step *s = NULL;
        hxs_exec *x = exec_of(e, "leftpad");
        assert_int_equal(pkg_step_begin(e, x, &s, &err), -ENOENT);
        assert_null(s);
        assert_int_equal(err.kind, HXS_ERR_NOT_FOUND);
        assert_non_null(strstr(err.message, "\"leftpad\" is not in the microVM image, and the fixed-image backend "
                                            "installs nothing"));
        hxs_exec_free(x);
        free(e);
}

static void test_a_cached_set_is_held_without_a_step(void **state)
{
        hxs_engine *e = engine(&installs);
        char wheels[64], cache[64];
        snprintf(wheels, sizeof(wheels), "%s/wheels", tmp);
        snprintf(cache, sizeof(cache), "%s/cache", tmp);
        assert_int_equal(mkdir(wheels, 0755), 0);
        snprintf(e->cfg.packages_wheelhouse, sizeof(e->cfg.packages_wheelhouse), "%s", wheels);
        snprintf(e->cfg.packages_cache_dir, sizeof(e->cfg.packages_cache_dir), "%s", cache);
        snprintf(e->cfg.rootfs, sizeof(e->cfg.rootfs), "%s", tmp);
        hxs_error err = { 0 };
        if (pkgcache_init(&e->pkgcache, &e->cfg, &e->pkgs, false, &err) < 0)
                fail_msg("pkgcache_init: %s", err.message);

        /* a set committed earlier: its content key under sets/, the request key to it */
        hxs_exec *x = exec_of(e, "leftpad == 1.0");
        assert_int_equal(pkg_canonicalize(x->req), 0);
        char key[65];
        assert_int_equal(pkgcache_request_key(&e->pkgcache, x->req, key, &err), 0);
        static const char set[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_int_equal(mkdirat(e->pkgcache.sets_fd, set, 0755), 0);
        assert_int_equal(symlinkat(set, e->pkgcache.req_fd, key), 0);

        pkg_step *s = (pkg_step *)1;
        assert_int_equal(pkg_step_begin(e, x, &s, &err), 0);
        assert_null(s);
        assert_int_equal(x->packages, HXS_PACKAGES_CACHED);
        char want[600];
        snprintf(want, sizeof(want), "%s/sets/%s", cache, set);
        assert_string_equal(x->pkgs.path, want);
        assert_true(x->pkgs.lock_fd >= 0); /* held while the execution lives */
        hxs_exec_free(x);
        pkgcache_fini(&e->pkgcache);
        free(e);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s/wheels' '%s/cache'", tmp, tmp);
        assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
        return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
        return rmdir(tmp);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nothing_to_install_is_no_step),
                cmocka_unit_test(test_a_missing_package_is_the_subject),
                cmocka_unit_test(test_a_backend_that_installs_nothing_names_it),
                cmocka_unit_test(test_a_cached_set_is_held_without_a_step),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
