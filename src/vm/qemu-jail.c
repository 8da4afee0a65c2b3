/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What QEMU's jail holds of the host: QEMU's own files and nothing else. Worked out
 * once at start-up (vm_qemu_jail_files) and bound read-only, one by one, into the empty
 * root each QEMU gets (qemu.c):
 *  - the binary (QEMU_BIN, links resolved), executed from there;
 *  - for a dynamically linked QEMU, its ELF interpreter and the shared libraries that
 *    interpreter resolves for it (`<interp> --list QEMU_BIN`, run as QEMU's uid with
 *    no_new_privs and no environment: the loader's list mode maps the libraries and
 *    prints them, it runs none of their code), and ld.so.cache;
 *  - QEMU's accelerator modules (accel-*.so, which it loads when it starts TCG) and
 *    their libraries, from its module directory;
 *  - its data directory (firmware: the microvm BIOS and pvh.bin), and the files that
 *    directory's symlinks point to elsewhere.
 * The module and data directories are found relative to the binary, as QEMU looks for
 * them (<prefix>/bin/.. + share/qemu, lib/x86_64-linux-gnu/qemu, lib64/qemu,
 * lib/qemu). No device, socket, configuration or home directory of the host is in
 * the list, so none is in the jail.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/macro.h"
#include "vm/vm.h"

#define LD_LIST_TIMEOUT_MS 10000
#define LD_LIST_OUTPUT_MAX (64u << 10)

/* Adds "<type><path>\0" once. */
static int add_path(vm_host *h, char type, const char *path, hxs_error *err)
{
        if (path[0] != '/' || strncmp(path, "/dev/", 5) == 0 || strncmp(path, "/proc/", 6) == 0)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -EINVAL, "QEMU_BIN",
                                      "QEMU_BIN: QEMU needs %s, which its jail cannot hold (an absolute path "
                                      "outside /dev and /proc)", path);
        for (size_t o = 0; o < h->jail_len; o += strlen(h->jail + o) + 1)
                if (strcmp(h->jail + o + 1, path) == 0)
                        return 0;
        size_t n = strlen(path) + 2;
        if (h->jail_len + n + 1 > sizeof(h->jail))
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -E2BIG, "QEMU_BIN",
                                      "QEMU_BIN: QEMU needs more files than its jail takes (%zu bytes of paths)",
                                      sizeof(h->jail));
        h->jail[h->jail_len] = type;
        memcpy(h->jail + h->jail_len + 1, path, n - 1);
        h->jail_len += n;
        h->jail[h->jail_len] = '\0'; /* an empty entry ends the list */
        return 0;
}

/* The PT_INTERP of an ELF executable: 1 with it in out, 0 for a static one. */
static int elf_interp(const char *path, char *out, size_t size)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        Elf64_Ehdr eh;
        if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
            eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256)
                return -ENOEXEC;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
                Elf64_Phdr ph;
                if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) != (ssize_t)sizeof(ph))
                        return -ENOEXEC;
                if (ph.p_type != PT_INTERP)
                        continue;
                if (ph.p_filesz < 2 || ph.p_filesz > size)
                        return -ENOEXEC;
                if (pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz ||
                    out[ph.p_filesz - 1] != '\0' || out[0] != '/')
                        return -ENOEXEC;
                return 1;
        }
        return 0;
}

/* Runs `interp --list file` as uid; its output (NUL-terminated) in out. */
static int ld_list(const char *interp, const char *file, uint32_t uid, char *out, size_t size, hxs_error *err)
{
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0)
                return err_fail(err, HXS_ERR_SETUP, -errno, "pipe: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(pp[0]);
                close(pp[1]);
                return err_fail(err, HXS_ERR_SETUP, -e, "fork: %s", strerror(e));
        }
        if (pid == 0) {
                char *const argv[] = { (char *)interp, "--list", (char *)file, NULL };
                char *const envp[] = { NULL };
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || dup2(null, 0) < 0 || dup2(pp[1], 1) < 0 || dup2(null, 2) < 0 ||
                    prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
                    syscall(SYS_setresgid, uid, uid, uid) < 0 || syscall(SYS_setresuid, uid, uid, uid) < 0 ||
                    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        _exit(126);
                execve(interp, argv, envp);
                _exit(127);
        }
        close(pp[1]);
        size_t len = 0;
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int r = 0;
        for (;;) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                long left = LD_LIST_TIMEOUT_MS - ((now.tv_sec - start.tv_sec) * 1000 +
                                                  (now.tv_nsec - start.tv_nsec) / 1000000);
                struct pollfd pfd = { .fd = pp[0], .events = POLLIN };
                if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
                        r = -ETIMEDOUT;
                        break;
                }
                ssize_t n = read(pp[0], out + len, size - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
                if (len == size - 1) {
                        r = -E2BIG;
                        break;
                }
        }
        out[len] = '\0';
        close(pp[0]);
        if (r < 0)
                kill(pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                r = -ENOEXEC;
        if (r < 0)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, r, "QEMU_BIN",
                                      "QEMU_BIN: listing the libraries of %s with `%s --list` as uid %u failed (%s)",
                                      file, interp, uid,
                                      r == -ETIMEDOUT ? "no answer in 10 s"
                                      : r == -E2BIG   ? "too much output"
                                                      : "it did not exit 0: is every library there and readable?");
        return 0;
}

/* The libraries in `ld.so --list` output: "name => /path (0x...)", "/path (0x...)";
 * "name => not found" is an error naming it. */
static int add_listed(vm_host *h, const char *file, char *text, hxs_error *err)
{
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                while (*line == '\t' || *line == ' ')
                        line++;
                char *arrow = strstr(line, " => ");
                char *path = arrow ? arrow + 4 : line;
                if (strncmp(path, "not found", 9) == 0) {
                        if (arrow)
                                *arrow = '\0';
                        return err_fail_field(err, HXS_ERR_UNSUPPORTED, -ENOENT, "QEMU_BIN",
                                              "QEMU_BIN: %s needs %s, which the loader does not find", file, line);
                }
                if (path[0] != '/')
                        continue; /* linux-vdso.so.1: the kernel's */
                char *end = strstr(path, " (0x");
                if (end)
                        *end = '\0';
                int r = add_path(h, 'f', path, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_with_libraries(vm_host *h, const char *interp, const char *file, hxs_error *err)
{
        int r = add_path(h, 'f', file, err);
        if (r < 0 || !interp[0])
                return r;
        _cleanup_free_ char *out = malloc(LD_LIST_OUTPUT_MAX);
        if (!out)
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        r = ld_list(interp, file, h->vmm_uid, out, LD_LIST_OUTPUT_MAX, err);
        if (r < 0)
                return r;
        return add_listed(h, file, out, err);
}

/* path, with "." and ".." taken out (no links followed), into out. */
static int normalize(const char *path, char *out, size_t size)
{
        size_t len = 0;
        const char *p = path;
        while (*p) {
                while (*p == '/')
                        p++;
                const char *e = strchrnul(p, '/');
                size_t n = (size_t)(e - p);
                if (n == 0 || (n == 1 && p[0] == '.')) {
                } else if (n == 2 && p[0] == '.' && p[1] == '.') {
                        while (len > 0 && out[len - 1] != '/')
                                len--;
                        if (len > 0)
                                len--;
                } else {
                        if (len + n + 2 > size)
                                return -ENAMETOOLONG;
                        out[len++] = '/';
                        memcpy(out + len, p, n);
                        len += n;
                }
                p = e;
        }
        if (len == 0)
                out[len++] = '/';
        out[len] = '\0';
        return 0;
}

/* The data directory, and what its links point to outside it. */
static int add_data_dir(vm_host *h, const char *dir, hxs_error *err)
{
        int r = add_path(h, 'd', dir, err);
        if (r < 0)
                return r;
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                if (de->d_type != DT_LNK)
                        continue;
                char link[PATH_MAX], joined[2 * PATH_MAX + 2], target[PATH_MAX];
                ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
                if (n <= 0)
                        continue;
                link[n] = '\0';
                snprintf(joined, sizeof(joined), "%s/%s", link[0] == '/' ? "" : dir, link);
                struct stat st;
                if (normalize(joined, target, sizeof(target)) < 0 || stat(target, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                size_t dl = strlen(dir);
                if (strncmp(target, dir, dl) == 0 && target[dl] == '/')
                        continue; /* in the directory already */
                r = add_path(h, 'f', target, err);
        }
        closedir(d);
        return r;
}

static int add_modules(vm_host *h, const char *interp, const char *dir, hxs_error *err)
{
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (strncmp(de->d_name, "accel-", 6) != 0 || n < 9 || strcmp(de->d_name + n - 3, ".so") != 0)
                        continue;
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                r = add_with_libraries(h, interp, path, err);
        }
        closedir(d);
        return r;
}

int vm_qemu_jail_files(vm_host *h, hxs_error *err)
{
        h->jail_len = 0;
        h->jail[0] = '\0';
        if (!realpath(h->hypervisor, h->exec_path))
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "QEMU_BIN", "QEMU_BIN: %s: %s", h->hypervisor,
                                      strerror(errno));
        char interp[PATH_MAX] = "";
        int r = elf_interp(h->exec_path, interp, sizeof(interp));
        if (r < 0)
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, r, "QEMU_BIN",
                                      "QEMU_BIN: %s is not an x86-64 ELF executable (%s): QEMU runs in a jail "
                                      "that holds only its own files", h->exec_path, strerror(-r));
        if (r == 0)
                interp[0] = '\0'; /* static: nothing to load */
        if ((r = add_with_libraries(h, interp, h->exec_path, err)) < 0)
                return r;
        if (interp[0] && access("/etc/ld.so.cache", R_OK) == 0 && (r = add_path(h, 'f', "/etc/ld.so.cache", err)) < 0)
                return r;
        char prefix[PATH_MAX], dir[PATH_MAX + 64];
        snprintf(prefix, sizeof(prefix), "%s", h->exec_path);
        *strrchr(prefix, '/') = '\0'; /* <prefix>/bin */
        char *up = strrchr(prefix, '/');
        if (up)
                *up = '\0';
        static const char *const module_dirs[] = { "lib/x86_64-linux-gnu/qemu", "lib64/qemu", "lib/qemu" };
        for (size_t i = 0; i < ARRAY_SIZE(module_dirs); i++) {
                snprintf(dir, sizeof(dir), "%s/%s", prefix, module_dirs[i]);
                char real[PATH_MAX];
                if (realpath(dir, real) && (r = add_modules(h, interp, real, err)) < 0)
                        return r;
        }
        snprintf(dir, sizeof(dir), "%s/share/qemu", prefix);
        char real[PATH_MAX];
        if (realpath(dir, real) && (r = add_data_dir(h, real, err)) < 0)
                return r;
        return 0;
}
