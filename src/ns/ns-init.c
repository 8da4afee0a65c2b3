/* SPDX-License-Identifier: Apache-2.0 */
/* The embedded init as a sealed memfd (see ns-init.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ns/ns-init.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* the hxs-init binary (generated hxs-init-bin.c) */
extern const unsigned char embed_init_bin[], embed_init_bin_end[];

int ns_init_memfd(void)
{
        /* MFD_EXEC says so explicitly where the kernel has vm.memfd_noexec (6.3 on);
         * older kernels refuse the flag, and their memfds are executable anyway */
        int fd = memfd_create("hxs-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
        if (fd < 0 && errno == EINVAL)
                fd = memfd_create("hxs-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        size_t off = 0, len = (size_t)(embed_init_bin_end - embed_init_bin);
        while (off < len) {
                ssize_t n = write(fd, embed_init_bin + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        close(fd);
                        return r;
                }
                off += (size_t)n;
        }
        if (fchmod(fd, 0555) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        /* exec refuses a file open for writing (ETXTBSY): keep a read-only descriptor */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        int r = ro < 0 ? -errno : ro;
        close(fd);
        return r;
}
