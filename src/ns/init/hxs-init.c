/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hxs-init: PID 1 of a namespace sandbox, once set-up is done (see ns-init.h). It is
 * exec'd by the set-up code with no capabilities, no_new_privs and the sandbox's
 * seccomp filter already in place, so it is a fresh, tiny process image: nothing of
 * the service (or template) it was cloned from is in its memory.
 *
 *   hxs-init REPORT_FD PROGRAM_PID
 *
 * It reaps every process that ends up its child; it passes the signals a supervisor
 * sends to stop a program (TERM, INT, HUP, QUIT, USR1, USR2) on to the program; when
 * the program ends it writes 'S' and the wait status (an int, host byte order) to the
 * report pipe and exits, which makes the kernel kill every other process of the pid
 * namespace. Static, libc only.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ns/ns-init.h"

static volatile pid_t program;

static void forward(int sig)
{
        int saved = errno;
        (void)kill(program, sig);
        errno = saved;
}

static long number(const char *s)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        return errno || *end || end == s || v < 0 ? -1 : v;
}

int main(int argc, char **argv)
{
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        long fd = argc == 3 ? number(argv[1]) : -1, pid = argc == 3 ? number(argv[2]) : -1;
        if (fd < 0 || pid <= 0)
                return 125;
        program = (pid_t)pid;
        static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
        struct sigaction sa = { .sa_handler = forward, .sa_flags = SA_RESTART };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
                (void)sigaction(forwarded[i], &sa, NULL);
        ns_init_reap(program, (int)fd);
}
