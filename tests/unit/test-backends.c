/* SPDX-License-Identifier: Apache-2.0 */
/* The backend table's rule (engine/backends.c): a named backend is taken as named,
 * auto takes a candidate only when it is usable with KVM, else the fallback. Fake
 * backends stand in, so the rule is tested apart from this host. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/backend.h"

static bool vm_here;                    /* what the fake microVM backend answers */
static hxs_vm_accel asked_accel;        /* the acceleration it was asked about */
static unsigned vm_asked, ns_asked;

static int fake_vm_usable(const hxs_config *cfg, hxs_error *err)
{
        vm_asked++;
        asked_accel = cfg->vm_accel;
        return vm_here ? 0 : err_fail(err, HXS_ERR_UNSUPPORTED, -ENODEV, "no /dev/kvm");
}

static int fake_ns_usable(const hxs_config *cfg, hxs_error *err)
{
        ns_asked++;
        return 0;
}

static const backend_ops fake_ns = { .name = "ns", .usable = fake_ns_usable };
static const backend_ops fake_vm = { .name = "vm", .usable = fake_vm_usable };
static const backend_ops fake_fc = { .name = "fc", .usable = fake_vm_usable };

static const backend_entry table[] = {
        { HXS_BACKEND_NAMESPACES, &fake_ns, BACKEND_AUTO_FALLBACK },
        { HXS_BACKEND_QEMU, &fake_vm, BACKEND_AUTO_CANDIDATE },
        { HXS_BACKEND_FIRECRACKER, &fake_fc, BACKEND_AUTO_NEVER },
};

static const backend_entry *pick(hxs_backend_kind kind, hxs_config *cfg, char *note, size_t size)
{
        hxs_config_defaults(cfg);
        cfg->backend = kind;
        cfg->vm_accel = HXS_VM_ACCEL_AUTO;
        vm_asked = ns_asked = 0;
        note[0] = '\0';
        return backend_pick_in(table, sizeof(table) / sizeof(table[0]), cfg, note, size);
}

static void test_a_named_backend_is_taken_without_asking(void **state)
{
        hxs_config cfg;
        char note[128];
        vm_here = false;
        assert_ptr_equal(pick(HXS_BACKEND_QEMU, &cfg, note, sizeof(note))->ops, &fake_vm);
        assert_ptr_equal(pick(HXS_BACKEND_FIRECRACKER, &cfg, note, sizeof(note))->ops, &fake_fc);
        assert_ptr_equal(pick(HXS_BACKEND_NAMESPACES, &cfg, note, sizeof(note))->ops, &fake_ns);
        assert_int_equal(vm_asked + ns_asked, 0);
        assert_int_equal(cfg.vm_accel, HXS_VM_ACCEL_AUTO);
}

static void test_auto_takes_a_usable_candidate_with_kvm(void **state)
{
        hxs_config cfg;
        char note[128];
        vm_here = true;
        const backend_entry *b = pick(HXS_BACKEND_AUTO, &cfg, note, sizeof(note));
        assert_int_equal(b->kind, HXS_BACKEND_QEMU);
        assert_int_equal(asked_accel, HXS_VM_ACCEL_KVM);   /* never TCG */
        assert_int_equal(cfg.vm_accel, HXS_VM_ACCEL_KVM);
        assert_int_equal(vm_asked, 1);                     /* the never-entry is not asked */
        assert_string_equal(note, "auto: vm with KVM");
}

static void test_auto_falls_back_without_asking_the_fallback(void **state)
{
        hxs_config cfg;
        char note[128];
        vm_here = false;
        const backend_entry *b = pick(HXS_BACKEND_AUTO, &cfg, note, sizeof(note));
        assert_int_equal(b->kind, HXS_BACKEND_NAMESPACES);
        assert_int_equal(ns_asked, 0);
        assert_int_equal(cfg.vm_accel, HXS_VM_ACCEL_AUTO); /* untouched */
        assert_string_equal(note, "auto: ns (no /dev/kvm)");
}

static void test_the_real_table_has_every_kind_and_one_fallback(void **state)
{
        size_t n, fallbacks = 0;
        const backend_entry *t = backends_table(&n);
        for (hxs_backend_kind k = HXS_BACKEND_NAMESPACES; k < HXS_BACKEND_MAX; k++) {
                bool found = false;
                for (size_t i = 0; i < n; i++)
                        found |= t[i].kind == k;
                assert_true(found);
        }
        for (size_t i = 0; i < n; i++) {
                fallbacks += t[i].for_auto == BACKEND_AUTO_FALLBACK;
                assert_non_null(t[i].ops->usable);
                assert_non_null(t[i].ops->stats);
                assert_true(t[i].ops->exec_size > 0);
        }
        assert_int_equal(fallbacks, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_a_named_backend_is_taken_without_asking),
                cmocka_unit_test(test_auto_takes_a_usable_candidate_with_kvm),
                cmocka_unit_test(test_auto_falls_back_without_asking_the_fallback),
                cmocka_unit_test(test_the_real_table_has_every_kind_and_one_fallback),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
