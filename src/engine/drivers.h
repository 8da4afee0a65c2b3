/* SPDX-License-Identifier: Apache-2.0 */
/* The session drivers (src/session/drivers/), embedded in the library at build time
 * (CMakeLists.txt): what every interactive sandbox finds, read-only, in DRIVERS_DIR.
 * Nothing is installed on the host; a backend puts them in its sandbox's root. */
#pragma once

#include <stddef.h>

#define DRIVERS_DIR "/opt/hexr-session"

typedef struct driver_file {
        const char *name;       /* "driver.py": DRIVERS_DIR/<name> */
        const char *text;       /* NUL-terminated */
} driver_file;

/* n_driver_files rows, then { NULL, NULL }. */
extern const driver_file driver_files[];
extern const size_t n_driver_files;
