/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every hypervisor process has, whichever driver started it: a cgroup in the
 * engine's layout, killed and removed with the VM, and its stderr, read into failure
 * messages. The drivers (qemu.c, firecracker.c) and vm-instance.c call these, and
 * these call none of them: calls among the VM files run one way (vm-instance.c starts
 * a driver, a driver never calls back into vm-instance.c).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "vm/vm.h"

int vm_cgroup_create(const vm_host *h, const cg_limits *lim, cg_exec *ret, char *name, size_t name_size,
                     hxs_error *err)
{
        int r = cg_exec_create(h->cg, lim, ret, err);
        if (r < 0)
                return err_wrap(err, r, "the microVM's cgroup");
        if (name)
                cg_exec_name(ret, name, name_size);
        return 0;
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

void vm_stderr_text(vm_instance *v, char *buf, size_t size)
{
        if (v->err_fd < 0 || size == 0)
                return;
        size_t len = strlen(buf);
        while (len + 1 < size) {
                ssize_t n = read(v->err_fd, buf + len, size - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        /* one line for an error message */
        for (char *p = buf; *p; p++)
                if (*p == '\n' || *p == '\r' || (unsigned char)*p < 0x20)
                        *p = ' ';
}
