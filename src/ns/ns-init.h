/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's init (src/ns/init/hxs-init.c), a static binary embedded in the library.
 * PID 1 of every namespace sandbox builds the root, forks the program, drops every
 * privilege and then execs it from a sealed memfd that the engine made at start (the
 * descriptor is opened before the root changes, so nothing in the sandbox's file system
 * is involved): PID 1 is then a fresh image, not a copy of the service or a template.
 */
#pragma once

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where the init finds the report pipe (argv[1] says so too). */
#define NS_INIT_REPORT_FD 3
/* And the supervisor's hold (argv[3]): the read end of the sync pipe. Once it has
 * reported, PID 1 waits there for the supervisor to let go (it takes the files out of
 * the working directory first, which goes with PID 1), or to be gone. */
#define NS_INIT_HOLD_FD 5
/* Its one message: this byte, then the program's wait status (an int). The same as
 * NS_REPORT_STATUS (ns.h). */
#define NS_INIT_REPORT_STATUS 'S'

/* A sealed, executable memfd holding the init (O_CLOEXEC), or -errno. */
int ns_init_memfd(void);

/* only so that SIGCHLD interrupts ns_init_reap's wait for the hold */
static inline void ns_init_child_ended(int sig)
{
        (void)sig;
}

/* What PID 1 does last, in the init and (without one) in the set-up code: reaps every
 * child until `program` ends, writes its status to report_fd and exits, which makes the
 * kernel kill everything else in the pid namespace. Exits at once, and so ends the
 * sandbox, if hold_fd hangs up before that: the supervisor is gone (see hxs-init.c on
 * why its parent-death signal may not come). */
static inline _Noreturn void ns_init_reap(pid_t program, int report_fd, int hold_fd)
{
        sigset_t chld, none;
        sigemptyset(&chld);
        sigemptyset(&none);
        sigaddset(&chld, SIGCHLD);
        bool watch = hold_fd >= 0; /* the hold, for a hang-up while the program runs */
        if (watch) {
                struct sigaction sa = { .sa_handler = ns_init_child_ended, .sa_flags = SA_NOCLDSTOP };
                if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 || sigaction(SIGCHLD, &sa, NULL) < 0)
                        _exit(125);
        }
        for (;;) {
                int status;
                pid_t got = waitpid(-1, &status, watch ? WNOHANG : 0);
                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(126); /* no children: the program cannot be gone unreported */
                }
                if (got == 0) {
                        /* every child still running: until one ends (SIGCHLD, unblocked only
                         * here, so none is missed) or the hold hangs up */
                        struct pollfd pfd = { .fd = hold_fd, .events = POLLIN };
                        int r = ppoll(&pfd, 1, NULL, &none);
                        if (r > 0)
                                _exit(124); /* the supervisor is gone: so is the sandbox */
                        if (r < 0 && errno != EINTR)
                                watch = false; /* no ppoll: waitpid blocks, SIGCHLD or not */
                        continue;
                }
                if (got != program)
                        continue; /* an orphan */
                char msg[1 + sizeof(int)];
                msg[0] = NS_INIT_REPORT_STATUS;
                memcpy(msg + 1, &status, sizeof(int));
                (void)!write(report_fd, msg, sizeof(msg));
                while (hold_fd >= 0 && read(hold_fd, msg, 1) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
}
