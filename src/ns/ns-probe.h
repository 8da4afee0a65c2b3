/* SPDX-License-Identifier: Apache-2.0 */
/* What this host offers the namespace backend (ns-probe.c), for its ops table. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hexr-sandbox/sandbox.h"

/* doctor's lines: privileges, namespaces, cgroups, seccomp, landlock. */
size_t ns_probe(const hxs_config *cfg, hxs_probe_item *items, size_t max, size_t n);
/* Whether sandboxes can run here: 0, or -ENOTSUP and err naming the first thing missing. */
int ns_usable(const hxs_config *cfg, hxs_error *err);
