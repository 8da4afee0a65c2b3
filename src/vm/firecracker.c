/* SPDX-License-Identifier: Apache-2.0 */
/* The Firecracker driver (being written): until then it refuses clearly. */
#include <errno.h>

#include "core/error.h"
#include "vm/vm.h"

int vm_firecracker_spawn(const vm_host *h, uint32_t ram_mb, vm_instance *v, hxs_error *err)
{
        (void)h;
        (void)ram_mb;
        (void)v;
        return hxs_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOTSUP, "SANDBOX_BACKEND",
                              "SANDBOX_BACKEND: the firecracker driver is not built yet");
}

void vm_firecracker_cleanup(vm_instance *v)
{
        v->jail[0] = '\0';
}
