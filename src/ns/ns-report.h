/* SPDX-License-Identifier: Apache-2.0 */
/* The cloned child's report pipe (NS_REPORT_* of ns.h): where its set-up failures go,
 * from ns-child.c and ns-root.c alike. Between clone and exec: no malloc, no locks. */
#pragma once

/* The descriptor failures are written to from now on (-1: none). */
void ns_report_to(int fd);
int ns_report_fd(void);

/* Reports a set-up failure on the report pipe (with errno's text when set) and ends
 * the child. */
_Noreturn void ns_child_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
