/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/macro.h"
#include "ns/payload.h"

/* The biggest payload we accept from a memfd (code and env maxima are far below). */
#define PAYLOAD_MAX ((size_t)512 << 20)

static int write_full(int fd, const void *p, size_t n)
{
        const char *c = p;
        while (n > 0) {
                ssize_t w = write(fd, c, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                c += w;
                n -= (size_t)w;
        }
        return 0;
}

static int write_u32(int fd, size_t v)
{
        if (v > UINT32_MAX)
                return -E2BIG;
        uint32_t u = (uint32_t)v;
        return write_full(fd, &u, sizeof(u));
}

int payload_create(const char *code, size_t code_len, char *const *envp)
{
        int fd = memfd_create("hxs-payload", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        size_t n_env = 0;
        while (envp[n_env])
                n_env++;
        int r = write_u32(fd, code_len);
        if (r == 0)
                r = write_full(fd, code, code_len);
        if (r == 0)
                r = write_u32(fd, n_env);
        for (size_t i = 0; r == 0 && i < n_env; i++) {
                size_t len = strlen(envp[i]);
                r = write_u32(fd, len);
                if (r == 0)
                        r = write_full(fd, envp[i], len);
        }
        if (r == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                r = -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

static int read_u32(const uint8_t *data, size_t size, size_t *off, size_t *ret)
{
        uint32_t u;
        if (size - *off < sizeof(u))
                return -EINVAL;
        memcpy(&u, data + *off, sizeof(u));
        *off += sizeof(u);
        *ret = u;
        return 0;
}

int payload_parse(const uint8_t *data, size_t size, payload_view *ret, char *scratch,
                  size_t scratch_size, char **ptrs, size_t max_ptrs)
{
        size_t off = 0, code_len, n_env, used = 0;
        if (read_u32(data, size, &off, &code_len) < 0 || code_len > size - off)
                return -EINVAL;
        const char *code = (const char *)data + off;
        off += code_len;
        if (read_u32(data, size, &off, &n_env) < 0 || n_env + 1 > max_ptrs)
                return -EINVAL;
        for (size_t i = 0; i < n_env; i++) {
                size_t len;
                if (read_u32(data, size, &off, &len) < 0 || len > size - off)
                        return -EINVAL;
                if (len + 1 > scratch_size - used)
                        return -EINVAL;
                /* NAME=VALUE with a non-empty name and no NUL inside */
                const char *s = (const char *)data + off;
                if (len == 0 || memchr(s, '\0', len) || !memchr(s, '=', len) || s[0] == '=')
                        return -EINVAL;
                memcpy(scratch + used, s, len);
                scratch[used + len] = '\0';
                ptrs[i] = scratch + used;
                used += len + 1;
                off += len;
        }
        if (off != size)
                return -EINVAL;
        ptrs[n_env] = NULL;
        *ret = (payload_view){ .code = code, .code_len = code_len, .env = ptrs, .n_env = n_env };
        return 0;
}

int payload_map(int fd, payload_view *ret)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        size_t size = (size_t)st.st_size;
        if (size < 8 || size > PAYLOAD_MAX)
                return -EINVAL;
        void *data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (data == MAP_FAILED)
                return -errno;
        /* at most size/4 variables fit (each has a 4-byte length) */
        size_t max_ptrs = size / 4 + 1;
        size_t scratch_size = size + max_ptrs;
        size_t total = scratch_size + max_ptrs * sizeof(char *);
        void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
                int r = -errno;
                munmap(data, size);
                return r;
        }
        char **ptrs = (char **)mem;
        char *scratch = (char *)mem + max_ptrs * sizeof(char *);
        int r = payload_parse(data, size, ret, scratch, scratch_size, ptrs, max_ptrs);
        if (r < 0) {
                munmap(data, size);
                munmap(mem, total);
                return r;
        }
        ret->map = data;
        ret->map_len = size;
        ret->mem = mem;
        ret->mem_len = total;
        return 0;
}

void payload_unmap(payload_view *pl)
{
        if (pl->map)
                munmap(pl->map, pl->map_len);
        if (pl->mem)
                munmap(pl->mem, pl->mem_len);
        *pl = (payload_view){ 0 };
}
