/* SPDX-License-Identifier: Apache-2.0 */
/* The cloned child's report pipe (ns-report.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ns/ns-report.h"
#include "ns/ns.h"

/* a copy of the supervisor per child: one child, one pipe */
static int report_fd = -1;

void ns_report_to(int fd)
{
        report_fd = fd;
}

int ns_report_fd(void)
{
        return report_fd;
}

_Noreturn void ns_child_die(const char *fmt, ...)
{
        char buf[400];
        int saved = errno;
        buf[0] = NS_REPORT_ERROR;
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(buf + 1, sizeof(buf) - 1, fmt, ap) < 0)
                buf[1] = '\0';
        va_end(ap);
        size_t len = strlen(buf);
        if (saved)
                snprintf(buf + len, sizeof(buf) - len, ": %s", strerror(saved));
        /* sent with its NUL: PID 1's status record may follow in the pipe */
        len = strlen(buf) + 1;
        if (report_fd >= 0)
                (void)!write(report_fd, buf, len);
        _exit(127);
}
