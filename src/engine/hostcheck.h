/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The start-up check for containers: a container runtime gives a process less than a
 * host does (capabilities, a read-only cgroup mount, a /proc with masked paths), and
 * without it every execution would fail with a 500 while /health says ok. Inside a
 * container, `serve` runs this first and refuses to start, naming what is missing;
 * `doctor` prints the same.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"

/* Are we in a container? When so, ret_why (may be NULL) says what shows it. */
bool hxs_in_container(char *ret_why, size_t cap);

/* What sandboxes need that this process lacks, as "; "-separated items in msg (each
 * naming the capability, mount or setting and how to provide it). Returns how many
 * items are missing: 0 when everything is there. Forks short-lived children to try
 * the namespaces and the /proc mount a sandbox makes. */
size_t hxs_hostcheck(const hxs_config *cfg, char *msg, size_t cap);
