/* SPDX-License-Identifier: Apache-2.0 */
/* Text of the /etc files a sandbox gets when the host has none of its own (ns-etc.c). */
#pragma once

extern const char ns_etc_services[];    /* /etc/services: the well-known ports */
extern const char ns_etc_protocols[];   /* /etc/protocols: the common IP protocols */
