/* SPDX-License-Identifier: Apache-2.0 */
/* Files out of a sandbox's working directory into a result (files-out.c). */
#pragma once

#include <stdbool.h>

#include "hexr-sandbox/sandbox.h"
#include "engine/request.h"

/* Fills res->files from the working directory at home_fd (the caller's; not closed):
 * output/ and the request's return globs, within MAX_RETURN_FILES / MAX_RETURN_BYTES.
 * -ENOMEM only; what cannot be read safely is left out. */
int files_collect(int home_fd, const hxs_request *req, const hxs_config *cfg, hxs_result *res);

/* fnmatch per path segment; a "**" segment matches any number of them. */
bool files_glob_match(const char *pattern, const char *path);

/* From the extension; application/octet-stream when unknown. Static. */
const char *files_mime(const char *path);
