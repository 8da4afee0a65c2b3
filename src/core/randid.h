/* SPDX-License-Identifier: Apache-2.0 */
/* Ids that name what a caller owns (executions, sessions): 128 random bits as 32
 * lowercase hex digits. One maker, so every id has the same form and the same source. */
#pragma once

#define RANDID_LEN 32

/* Fills id (RANDID_LEN + 1 bytes) from getrandom; before the kernel has entropy
 * (early boot) from the clock and a counter: unique, which is what an id needs, as
 * ownership, not secrecy, guards what it names. */
void randid_make(char id[RANDID_LEN + 1]);
