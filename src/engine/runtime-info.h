/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime manifest (scripts/runtimes.txt, built into the library) and the versions
 * a sandbox root holds of its packages. The parts are exposed for tests. */
#pragma once

#include "hexr-sandbox/sandbox.h"

/* The manifest's text, generated from scripts/runtimes.txt at build time. */
extern const char embed_runtimes_txt[];

/* Parses a manifest into ret (versions left ""). -EINVAL with err naming the line
 * when a line breaks the format, a package repeats, a language has no package or
 * there are more than HXS_RUNTIME_PACKAGES_MAX. */
int runtime_manifest_parse(const char *text, hxs_runtime_info *ret, hxs_error *err);

/* Fills debian_version from a dpkg status file (installed packages only). 0, or
 * -errno when the file cannot be read. */
int runtime_read_dpkg_status(hxs_runtime_info *ri, const char *path);

/* The upstream part of a Debian version: "1:1.24.2-1+deb12u1" -> "1.24.2". */
void runtime_upstream_version(const char *debian, char *buf, size_t size);

/* The engine's runtimes' versions, read from its root the first time this is called
 * (from any thread): a start that never asks (a CLI exec) does not read the root's
 * dpkg database, which cost a tenth of its CPU. */
void runtime_info_versions_once(hxs_engine *e);

/* Refreshes the distributions' versions from the root's dist-packages (rootfs "" is
 * the host's). -ENOENT with err naming every distribution the root lacks. */
int runtime_check_distributions(hxs_runtime_info *ri, const char *rootfs, hxs_error *err);
