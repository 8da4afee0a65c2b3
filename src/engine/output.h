/* SPDX-License-Identifier: Apache-2.0 */
/* An execution's output, for the backends (output.c): the streaming callback, the
 * head+tail buffers, the MAX_STREAM_BYTES limit, and the end reason with its kill line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "hexr-sandbox/sandbox.h"

/* A chunk the program wrote on stream 1 (stdout) or 2 (stderr). true when it just went
 * past MAX_STREAM_BYTES: the backend kills the program now (once). */
bool exec_output(hxs_exec *x, int stream, const void *data, size_t len);
/* One read(2) of at most max (> 0) bytes of the program's stream from fd, handled as
 * exec_output handles a chunk; read's return and errno. *ret_over as exec_output's return. */
ssize_t exec_output_read(hxs_exec *x, int stream, int fd, size_t max, bool *ret_over);

/* Once the backend has set the status in x->result: the end reason and message, the
 * outputs moved in (head, marker, tail) and, for a kill, the kill line in stderr. */
void exec_result_output(hxs_exec *x);
