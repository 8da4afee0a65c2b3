/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a seed corpus through a fuzz target without libFuzzer, so that every
 * `ctest` (gcc, or the ASan/UBSan build) runs each seed once.
 *
 *   replay-<target> DIR|FILE...
 *
 * Every regular file of each directory (sorted, dot files skipped) is read into a
 * buffer of exactly its size (so that the sanitizers see any over-read) and handed to
 * LLVMFuzzerTestOneInput. A target reports a broken invariant by aborting, which fails
 * the test. An argument that yields no input at all is an error too: an empty or
 * misnamed corpus must not pass silently.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        size_t size = (size_t)st.st_size;
        /* malloc(0) may return NULL: keep one byte, but pass the exact size. */
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf) {
                close(fd);
                fprintf(stderr, "replay: %s: out of memory\n", path);
                return -1;
        }
        size_t got = 0;
        while (got < size) {
                ssize_t n = read(fd, buf + got, size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        close(fd);
        if (got != size) {
                fprintf(stderr, "replay: %s: short read\n", path);
                free(buf);
                return -1;
        }
        LLVMFuzzerTestOneInput(buf, size);
        free(buf);
        return 0;
}

static int keep(const struct dirent *de)
{
        return de->d_name[0] != '.';
}

/* Returns the number of inputs run, or -1. */
static int run_path(const char *path)
{
        struct stat st;

        if (stat(path, &st) < 0) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        if (!S_ISDIR(st.st_mode))
                return run_file(path) < 0 ? -1 : 1;

        struct dirent **names;
        int n = scandir(path, &names, keep, alphasort);
        if (n < 0) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        int count = 0, failed = 0;
        for (int i = 0; i < n; i++) {
                char file[4096];
                snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
                free(names[i]);
                if (stat(file, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (run_file(file) < 0)
                        failed = 1;
                else
                        count++;
        }
        free(names);
        return failed ? -1 : count;
}

int main(int argc, char **argv)
{
        int total = 0;

        if (argc < 2) {
                fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
                return 2;
        }
        if (LLVMFuzzerInitialize)
                LLVMFuzzerInitialize(&argc, &argv);
        for (int i = 1; i < argc; i++) {
                int n = run_path(argv[i]);
                if (n < 0)
                        return 1;
                if (n == 0) {
                        fprintf(stderr, "replay: %s: no inputs\n", argv[i]);
                        return 1;
                }
                total += n;
        }
        printf("replay: %d inputs ran without a failure\n", total);
        return 0;
}
