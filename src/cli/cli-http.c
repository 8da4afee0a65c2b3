/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs that speak HTTP, in hexr-sandbox itself: handed to hexr-sandbox-http.
 *
 * hexr-sandbox links neither the HTTP server nor TLS: GnuTLS and the nine libraries it
 * brings cost every start about a millisecond of loading, and every sandbox it clones
 * copies their mappings (a cold `exec` of Bash took 14 ms with them, 12 without). The
 * two places that need them, `serve` and `mcp --url`, exec hexr-sandbox-http from the
 * same directory with the same arguments: the same program, the same process, built
 * from the same sources with cli-serve.c and cli-mcp-remote.c instead of this file.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-mcp.h"
#include "cli/cli.h"

#define HTTP_BINARY "hexr-sandbox-http"

static int hand_over(void)
{
        char path[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - sizeof(HTTP_BINARY) - 1);
        char *slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
        if (!slash) {
                fprintf(stderr, "hexr-sandbox: cannot find this binary's directory (/proc/self/exe): %s\n",
                        n < 0 ? strerror(errno) : "no directory");
                return HXS_CLI_EXIT_FAILURE;
        }
        memcpy(slash + 1, HTTP_BINARY, sizeof(HTTP_BINARY));
        fflush(NULL);
        execv(path, cli_argv);
        fprintf(stderr, "hexr-sandbox: %s: %s (it is installed beside hexr-sandbox and runs its HTTP verbs)\n",
                path, strerror(errno));
        return HXS_CLI_EXIT_FAILURE;
}

int cli_serve(int argc, char **argv)
{
        (void)argc;
        (void)argv;
        return hand_over();
}

/* mcp --url: nothing has been read or written yet; returns only when the exec failed. */
int mcp_remote_open(mcp_stdio *m, const char *url, const char *ca, const char *cert, const char *key, char *why,
                    size_t why_size)
{
        (void)m, (void)url, (void)ca, (void)cert, (void)key;
        (void)hand_over();
        snprintf(why, why_size, "cannot run hexr-sandbox-http for --url");
        return -ENOENT;
}

/* Without a remote (this binary never has one) there is nothing to forward. */
void mcp_remote_forward(mcp_stdio *m, const char *msg, size_t len)
{
        (void)m, (void)msg, (void)len;
}

size_t mcp_remote_count(const mcp_stdio *m)
{
        (void)m;
        return 0;
}

size_t mcp_remote_poll(mcp_stdio *m, struct pollfd *fds, mcp_fwd **by, size_t max)
{
        (void)m, (void)fds, (void)by, (void)max;
        return 0;
}

void mcp_remote_process(mcp_stdio *m, mcp_fwd *f)
{
        (void)m, (void)f;
}

void mcp_remote_close(mcp_stdio *m)
{
        (void)m;
}
