/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hypervisor's cgroups, for both drivers: memory (guest RAM plus the VMM's own),
 * pids and a CPU share, joined at birth (see ns/cgroup.h), killed and removed with
 * the VM. One layout per process, set up on first use; the cgroups of a predecessor
 * that died are swept then.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "vm/vm.h"

/* Cgroup names go "<instance>-<seq>" as the namespace backend's; ours count from
 * here so that both backends in one process never pick the same name. */
#define VM_CG_SEQ_BASE (1ull << 40)

static pthread_mutex_t cg_mu = PTHREAD_MUTEX_INITIALIZER;
static bool cg_ready;
static cg_layout cg_vms;

int vm_cgroup_create(const cg_limits *lim, cg_exec *ret, char *name, size_t name_size, hxs_error *err)
{
        pthread_mutex_lock(&cg_mu);
        int r = 0;
        if (!cg_ready) {
                r = cg_layout_init(&cg_vms, err);
                if (r == 0) {
                        cg_vms.seq = VM_CG_SEQ_BASE;
                        (void)cg_sweep(&cg_vms);
                        cg_ready = true;
                }
        }
        if (r == 0)
                r = cg_exec_create(&cg_vms, lim, ret, err);
        if (r == 0 && name)
                snprintf(name, name_size, "%s-%llu", cg_vms.instance, (unsigned long long)cg_vms.seq);
        pthread_mutex_unlock(&cg_mu);
        return r < 0 ? hxs_wrap(err, r, "the microVM's cgroup") : 0;
}

void vm_cgroup_destroy(vm_instance *v)
{
        if (!v->have_cg)
                return;
        cg_exec_kill(&v->cg);
        /* v1 lets go of a cgroup a moment after its last task was reaped */
        for (int i = 0; i < 100 && cg_exec_remove(&v->cg) == -EBUSY; i++)
                usleep(2000);
        v->have_cg = false;
}
