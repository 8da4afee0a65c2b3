/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's root filesystem, built by the cloned child (ns-child.c) on the mount
 * point: a const table of steps run by one loop (as bubblewrap's SetupOp), the
 * optional package binds being rows of it. Async-signal-safe in the sense of
 * ns-child.c: system calls and formatting into stack buffers only.
 */
#pragma once

#include "ns/ns.h"
#include "ns/payload.h"

/* Builds the root at a->mountpoint and pivots into it; the program's uptime starts
 * then. A failing step ends the child through ns_child_die (ns-report.h). */
void ns_root_build(const ns_child_args *a, const payload_view *pl);
