/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hxs-init: PID 1 of a namespace sandbox, once set-up is done (see ns-init.h). It is
 * exec'd by the set-up code with no capabilities, no_new_privs and the sandbox's
 * seccomp filter already in place, so it is a fresh, tiny process image: nothing of
 * the service (or template) it was cloned from is in its memory.
 *
 *   hxs-init REPORT_FD PROGRAM_PID [HOLD_FD]
 *
 * It reaps every process that ends up its child; it passes the signals a supervisor
 * sends to stop a program (TERM, INT, HUP, QUIT, USR1, USR2) on to the program; when
 * the program ends it writes 'S' and the wait status (an int, host byte order) to the
 * report pipe, waits for HOLD_FD to be written or hung up (the supervisor takes the
 * files out of the working directory meanwhile) and exits, which makes the kernel kill
 * every other process of the pid namespace: ns_init_reap (ns-init.h), which the set-up
 * code runs itself where there is no init to exec.
 *
 * HOLD_FD hung up while the program still runs means the supervisor is gone: it exits
 * then too, and the sandbox with it. The parent-death signal is not enough on its own:
 * the kernel sends it with the credentials of the parent thread as it dies, and a
 * service thread that died while it acted as another owner uid (cloning the next
 * sandbox) may not signal this one, which then outlived the service.
 *
 * No libc: every sandbox execs it, and a static libc's start-up alone costs more than
 * all the rest of it. x86_64 system calls, numbers and structures of the kernel's ABI.
 */
#define NR_read 0
#define NR_write 1
#define NR_rt_sigaction 13
#define NR_rt_sigprocmask 14
#define NR_rt_sigreturn 15
#define NR_wait4 61
#define NR_kill 62
#define NR_prctl 157
#define NR_exit_group 231
#define NR_ppoll 271
#define E_INTR 4
#define PR_SET_DUMPABLE_ 4
#define SA_NOCLDSTOP_ 1UL
#define SA_RESTART_ 0x10000000UL
#define SA_RESTORER_ 0x04000000UL
#define SIG_BLOCK_ 0
#define SIGCHLD_ 17
#define WNOHANG_ 1
#define POLLIN_ 1
#define REPORT_STATUS 'S' /* NS_INIT_REPORT_STATUS */

static long sys3(long nr, long a, long b, long c)
{
        long r;
        __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
        return r;
}

static long sys4(long nr, long a, long b, long c, long d)
{
        long r;
        register long r10 __asm__("r10") = d;
        __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
        return r;
}

static long sys5(long nr, long a, long b, long c, long d, long e)
{
        long r;
        register long r10 __asm__("r10") = d;
        register long r8 __asm__("r8") = e;
        __asm__ volatile("syscall"
                         : "=a"(r)
                         : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                         : "rcx", "r11", "memory");
        return r;
}

static __attribute__((noreturn)) void exit_with(int code)
{
        for (;;)
                sys3(NR_exit_group, code, 0, 0);
}

/* the return from a signal handler, which the kernel's sigaction needs given */
void init_restore(void);
__asm__(".text\n"
        ".globl init_restore\n"
        "init_restore:\n"
        "        mov $15, %eax\n" /* NR_rt_sigreturn */
        "        syscall\n");

static volatile long program;

static void forward(int sig)
{
        sys3(NR_kill, program, sig, 0);
}

/* only so that SIGCHLD interrupts the wait for the hold (below) */
static void child_ended(int sig)
{
        (void)sig;
}

/* The kernel's struct sigaction. */
typedef struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
} kernel_sigaction;

/* Until one of PID 1's children has ended (SIGCHLD) or the hold is hung up, with
 * SIGCHLD blocked but here (so that none comes between the reaping and the wait, to be
 * missed): a positive return is the hang-up, -EINTR a signal, anything else that the
 * kernel refused ppoll (the caller then blocks in wait4 instead). */
static long wait_child_or_hold(long hold)
{
        struct {
                int fd;
                short events, revents;
        } pfd = { (int)hold, POLLIN_, 0 };
        unsigned long none = 0;
        return sys5(NR_ppoll, (long)&pfd, 1, 0, (long)&none, sizeof(none));
}

static long number(const char *s)
{
        long v = 0;
        if (!*s)
                return -1;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > 100000000)
                        return -1;
                v = v * 10 + (*s - '0');
        }
        return v;
}

__attribute__((noreturn, used)) void init_main(long *sp);
__attribute__((noreturn, used)) void init_main(long *sp)
{
        long argc = sp[0];
        char **argv = (char **)(sp + 1);
        sys3(NR_prctl, PR_SET_DUMPABLE_, 0, 0);
        long fd = argc >= 3 ? number(argv[1]) : -1, pid = argc >= 3 ? number(argv[2]) : -1;
        long hold = argc == 4 ? number(argv[3]) : -1;
        if (fd < 0 || pid <= 0 || argc > 4 || (argc == 4 && hold < 0))
                exit_with(125);
        program = pid;
        static const int forwarded[] = { 15, 2, 1, 3, 10, 12 }; /* TERM INT HUP QUIT USR1 USR2 */
        kernel_sigaction sa = { forward, SA_RESTART_ | SA_RESTORER_, init_restore, 0 };
        for (unsigned i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
                sys4(NR_rt_sigaction, forwarded[i], (long)&sa, 0, sizeof(sa.mask));
        int watch = hold >= 0; /* the hold, for a hang-up while the program runs */
        if (watch) {
                unsigned long chld = 1UL << (SIGCHLD_ - 1);
                kernel_sigaction on_chld = { child_ended, SA_NOCLDSTOP_ | SA_RESTORER_, init_restore, 0 };
                if (sys4(NR_rt_sigprocmask, SIG_BLOCK_, (long)&chld, 0, sizeof(chld)) < 0 ||
                    sys4(NR_rt_sigaction, SIGCHLD_, (long)&on_chld, 0, sizeof(on_chld.mask)) < 0)
                        exit_with(125);
        }
        for (;;) {
                int status = 0;
                long got = sys4(NR_wait4, -1, (long)&status, watch ? WNOHANG_ : 0, 0);
                if (got == -E_INTR)
                        continue;
                if (got < 0)
                        exit_with(126); /* no children: the program cannot be gone unreported */
                if (got == 0) {
                        /* every child still running: wait for one to end, or the hang-up */
                        long r = wait_child_or_hold(hold);
                        if (r > 0)
                                exit_with(124); /* the supervisor is gone: so is the sandbox */
                        if (r < 0 && r != -E_INTR)
                                watch = 0; /* no ppoll: wait4 blocks, SIGCHLD or not */
                        continue;
                }
                if (got != program)
                        continue; /* an orphan */
                unsigned char msg[1 + sizeof(int)];
                msg[0] = REPORT_STATUS;
                for (unsigned i = 0; i < sizeof(int); i++)
                        msg[1 + i] = ((const unsigned char *)&status)[i];
                sys3(NR_write, fd, (long)msg, sizeof(msg));
                while (hold >= 0 && sys3(NR_read, hold, (long)msg, 1) == -E_INTR)
                        ;
                exit_with(0);
        }
}

/* the entry point: argc, argv... on the stack */
__asm__(".text\n"
        ".globl _start\n"
        "_start:\n"
        "        xor %ebp, %ebp\n"
        "        mov %rsp, %rdi\n"
        "        and $-16, %rsp\n"
        "        call init_main\n"
        "        hlt\n");
