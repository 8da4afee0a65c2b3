/* SPDX-License-Identifier: Apache-2.0 */
/* The host uid layout's sizes (uids.h): how many warm slots and owner uids a
 * configuration takes, and every range, for the start-up check. */
#include "core/uids.h"

unsigned ns_warm_slots(const hxs_config *cfg)
{
        if (!cfg->warm || cfg->rootfs[0])
                return 0;
        unsigned n = cfg->warm_slots ? cfg->warm_slots : cfg->max_concurrent ? cfg->max_concurrent : 2;
        if (cfg->max_concurrent && n > cfg->max_concurrent)
                n = cfg->max_concurrent; /* a slot no execution could use */
        return n < NS_WARM_SLOTS_MAX ? n : NS_WARM_SLOTS_MAX;
}

unsigned ns_owner_pool(const hxs_config *cfg)
{
        unsigned live = ns_warm_slots(cfg) + (cfg->max_concurrent ? cfg->max_concurrent : 2) + 16;
        return 4 * live > NS_OWNER_POOL_MIN ? 4 * live : NS_OWNER_POOL_MIN;
}

size_t host_uid_ranges(const hxs_config *cfg, uid_range ret[HOST_UID_RANGES])
{
        uint32_t b = cfg->uid_base;
        ret[0] = (uid_range){ b, 1, "the sandbox's root" };
        ret[1] = (uid_range){ b + NS_SANDBOX_UID, 1, "the sandbox user" };
        ret[2] = (uid_range){ b + NS_TEMPLATE_UID, 1, "the warm templates" };
        ret[3] = (uid_range){ b + PKG_FETCH_UID, HOST_VMM_UIDS, "the package downloader and the VMMs" };
        ret[4] = (uid_range){ b + NS_OWNER_UID, ns_owner_pool(cfg),
                                  "the owners of the sandboxes' user namespaces" };
        return HOST_UID_RANGES;
}
