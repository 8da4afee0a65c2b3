/* SPDX-License-Identifier: Apache-2.0 */
/* The backends the engine knows, and the rule `auto` follows among them. */
#include <stdio.h>

#include "core/macro.h"
#include "engine/backend.h"

static const backend_entry backends[] = {
        { HXS_BACKEND_NAMESPACES, &ns_backend, BACKEND_AUTO_FALLBACK },
        { HXS_BACKEND_QEMU, &qemu_backend, BACKEND_AUTO_CANDIDATE },
        { HXS_BACKEND_FIRECRACKER, &firecracker_backend, BACKEND_AUTO_NEVER },
};

const backend_entry *backends_table(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(backends);
        return backends;
}

/* auto takes the stronger boundary when it is ready to use (for QEMU: KVM, the binary
 * and a built guest image), else the fallback, without asking it; it never picks TCG,
 * which is far slower. A kind the table lacks resolves as auto's fallback. */
const backend_entry *backend_pick_in(const backend_entry *table, size_t n, hxs_config *cfg, char *note,
                                     size_t note_size)
{
        const backend_entry *fallback = NULL;
        for (size_t i = 0; i < n; i++) {
                if (cfg->backend != HXS_BACKEND_AUTO && table[i].kind == cfg->backend)
                        return &table[i];
                if (table[i].for_auto == BACKEND_AUTO_FALLBACK)
                        fallback = &table[i];
        }
        if (cfg->backend != HXS_BACKEND_AUTO)
                return fallback;
        hxs_error why = { 0 };
        for (size_t i = 0; i < n; i++) {
                if (table[i].for_auto != BACKEND_AUTO_CANDIDATE)
                        continue;
                hxs_config kvm_cfg = *cfg;
                kvm_cfg.vm_accel = HXS_VM_ACCEL_KVM;
                if (table[i].ops->usable(&kvm_cfg, &why) == 0) {
                        cfg->vm_accel = HXS_VM_ACCEL_KVM;
                        snprintf(note, note_size, "auto: %s with KVM", table[i].ops->name);
                        return &table[i];
                }
        }
        snprintf(note, note_size, "auto: %s (%s)", fallback->ops->name, why.message);
        return fallback;
}

const backend_entry *backend_pick(hxs_config *cfg, char *note, size_t note_size)
{
        return backend_pick_in(backends, ARRAY_SIZE(backends), cfg, note, note_size);
}
