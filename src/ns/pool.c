/* SPDX-License-Identifier: Apache-2.0 */
/* Pre-started single-use sandboxes (pool.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/macro.h"
#include "engine/request.h"
#include "ns/pool.h"

#define POOL_MAX 16     /* SANDBOX_POOL's maximum (config.c) */

struct ns_pool {
        const ns_pool_ops *ops;
        void *ctx;
        uint32_t memory_mb;             /* DEFAULT_MEMORY_MB: what each is started with */
        unsigned target[NS_POOL_KINDS]; /* per kind, within SANDBOX_POOL_MEMORY_MB */
        void *sb[NS_POOL_KINDS][POOL_MAX];
        unsigned n[NS_POOL_KINDS];
        unsigned long served;
        unsigned failures;              /* starts in a row that failed or died unused */
        uint64_t retry_ms;              /* after failures, no start before this (monotonic) */
        uint64_t room_mb;               /* what the caller's memory budget leaves them now */
        unsigned next_trim;             /* the kind that gives one up next (ns_pool_room) */
};

#define RETRY_MAX_MS 30000

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A host that cannot start them (a root being repaired, cgroups refused) is asked
 * again later and later, not at every round of the caller's loop. */
static void failed(ns_pool *p)
{
        uint64_t wait = 100ull << (p->failures < 9 ? p->failures : 9);
        p->failures++;
        p->retry_ms = now_ms() + (wait < RETRY_MAX_MS ? wait : RETRY_MAX_MS);
}

hxs_language ns_pool_language(ns_pool_kind k)
{
        return k == NS_POOL_JAVASCRIPT ? HXS_LANG_JAVASCRIPT : k == NS_POOL_BASH ? HXS_LANG_BASH : HXS_LANG_PYTHON;
}

ns_pool *ns_pool_new(const hxs_config *cfg, const ns_pool_ops *ops, void *ctx)
{
        if (!cfg->warm || cfg->pool_size == 0 || cfg->default_memory_mb == 0)
                return NULL;
        /* sandboxes in all: SANDBOX_POOL_MEMORY_MB, and never more than a quarter of the
         * service's MEMORY_BUDGET_MB, so that a small budget stays the executions' */
        uint32_t mb = cfg->pool_memory_mb;
        if (cfg->memory_budget_mb && mb > cfg->memory_budget_mb / 4)
                mb = cfg->memory_budget_mb / 4;
        unsigned room = mb / cfg->default_memory_mb;
        unsigned each = cfg->pool_size < POOL_MAX ? cfg->pool_size : POOL_MAX;
        ns_pool *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        *p = (ns_pool){ .ops = ops, .ctx = ctx, .memory_mb = cfg->default_memory_mb, .room_mb = UINT64_MAX };
        /* round robin, so that every kind gets one before any gets two; Python, which
         * starts warm without one, last in each round */
        static const ns_pool_kind order[] = { NS_POOL_JAVASCRIPT, NS_POOL_BASH, NS_POOL_PYTHON,
                                              NS_POOL_PYTHON_SCI };
        for (unsigned k = 0; k < each; k++)
                for (size_t i = 0; i < ARRAY_SIZE(order); i++)
                        if (room > 0) {
                                p->target[order[i]]++;
                                room--;
                        }
        unsigned kept = 0;
        for (ns_pool_kind k = 0; k < NS_POOL_KINDS; k++)
                kept += p->target[k];
        if (kept == 0) {
                free(p);
                return NULL;
        }
        return p;
}

void ns_pool_free(ns_pool *p)
{
        if (!p)
                return;
        for (ns_pool_kind k = 0; k < NS_POOL_KINDS; k++)
                for (unsigned i = 0; i < p->n[k]; i++)
                        p->ops->destroy(p->ctx, p->sb[k][i]);
        free(p);
}

/* What a program could find of the cold path's regular file /code/main.*: it reads the
 * FIFO like the file once, to its end. A program that opens its own file again (Node's
 * ES module detection re-reads the entry point after a CommonJS parse fails on
 * import/export/await; a script that reads $0 or __filename) would find it empty or
 * wait: such code runs cold. So does code that reads how long its interpreter or sandbox
 * has run (Bash's $SECONDS, Node's process.uptime(), hrtime and performance clocks, the
 * uptime file): a pre-started one has run since it was started, not since its code
 * came. The check is on the text, so it errs towards cold. */
static const char *const js_cold_words[] = { "import", "export", "await", "filename", "/code", "main.js",
                                             "uptime", "hrtime", "performance", NULL };
static const char *const bash_cold_words[] = { "$0", "${0", "BASH_SOURCE", "/code", "main.sh", "SECONDS",
                                               "uptime", "etime", NULL };
/* Python (which then starts warm, not cold): its own file (__file__, sys.argv[0], the
 * path), and the CPU or start time of its process (time.process_time, os.times,
 * resource.getrusage, /proc/self/stat, psutil). Tracebacks need no word: the program's
 * lines are in linecache (zygote.py). */
static const char *const python_cold_words[] = { "__file__", "argv", "/code", "main.py", "process_time",
                                                 "thread_time", "times", "rusage", "/proc", "psutil",
                                                 "uptime", NULL };

static bool mentions(const char *code, size_t len, const char *const *words)
{
        for (const char *const *w = words; *w; w++)
                if (memmem(code, len, *w, strlen(*w)))
                        return true;
        return false;
}

/* Bash reads a script it cannot seek (the FIFO) one byte per read(2), where the cold
 * path's file is read in blocks: measured, a 4 KiB script still ran sooner pooled than
 * cold, a 16 KiB one took twice as long as from a file. Longer code runs cold. */
#define BASH_POOL_CODE_MAX 4096

bool ns_pool_eligible(const ns_pool *p, const hxs_request *req)
{
        if (!p || req->language >= HXS_LANG_MAX)
                return false;
        /* everything but the code is the pre-started sandbox's already: the environment,
         * /proc/meminfo's memory limit, stdin (/dev/null), no files, no packages */
        if (req->interactive || req->argv || req->n_env || req->n_files || req->n_packages || req->stdin_data ||
            req->memory_mb != p->memory_mb)
                return false;
        if (memchr(req->code, '\0', req->code_len))
                return false;
        if (req->language == HXS_LANG_BASH && req->code_len > BASH_POOL_CODE_MAX)
                return false;
        const char *const *words = req->language == HXS_LANG_PYTHON       ? python_cold_words
                                   : req->language == HXS_LANG_JAVASCRIPT ? js_cold_words
                                                                          : bash_cold_words;
        return !mentions(req->code, req->code_len, words);
}

void *ns_pool_take(ns_pool *p, ns_pool_kind kind, void *arg)
{
        if (!p || kind >= NS_POOL_KINDS)
                return NULL;
        for (unsigned i = 0; i < p->n[kind];) {
                void *sb = p->sb[kind][i];
                int r = p->ops->claim(p->ctx, sb, arg);
                if (r == 0) {
                        i++;
                        continue;
                }
                /* taken or dead: out of the pool either way (order does not matter) */
                p->sb[kind][i] = p->sb[kind][--p->n[kind]];
                if (r > 0) {
                        p->served++;
                        p->failures = 0; /* one was started and used: the host can */
                        return sb;
                }
                p->ops->destroy(p->ctx, sb);
        }
        return NULL;
}

/* Those that ended unused (their set-up failed, or they were killed) are destroyed:
 * nothing of them stays behind until a request would have claimed them. */
static void drop_dead(ns_pool *p)
{
        for (ns_pool_kind k = 0; k < NS_POOL_KINDS; k++)
                for (unsigned i = 0; i < p->n[k];) {
                        if (p->ops->alive(p->ctx, p->sb[k][i])) {
                                i++;
                                continue;
                        }
                        p->ops->destroy(p->ctx, p->sb[k][i]);
                        p->sb[k][i] = p->sb[k][--p->n[k]];
                        failed(p);
                }
}

static uint64_t held_mb(const ns_pool *p)
{
        uint64_t n = 0;
        for (ns_pool_kind k = 0; k < NS_POOL_KINDS; k++)
                n += p->n[k];
        return n * p->memory_mb;
}

/* One more fits in what the caller's budget leaves (ns_pool_room). */
static bool fits(const ns_pool *p)
{
        return held_mb(p) + p->memory_mb <= p->room_mb;
}

void ns_pool_room(ns_pool *p, uint64_t mb)
{
        if (!p)
                return;
        p->room_mb = mb;
        /* the kinds take turns, so that a shrinking budget leaves each one as long as
         * it can */
        while (held_mb(p) > p->room_mb) {
                ns_pool_kind k = (ns_pool_kind)(p->next_trim++ % NS_POOL_KINDS);
                if (p->n[k] == 0)
                        continue;
                p->ops->destroy(p->ctx, p->sb[k][--p->n[k]]);
        }
}

bool ns_pool_fill(ns_pool *p, unsigned max, bool empty_only)
{
        if (!p)
                return false;
        drop_dead(p);
        if (p->failures && now_ms() < p->retry_ms)
                return false;
        bool later = false;
        for (ns_pool_kind k = 0; k < NS_POOL_KINDS; k++)
                while (p->n[k] < p->target[k] && fits(p)) {
                        if (empty_only && p->n[k] > 0) {
                                later = true;
                                break;
                        }
                        if (max == 0)
                                return true;
                        hxs_error err = { 0 };
                        void *sb = NULL;
                        int r = p->ops->start(p->ctx, k, p->memory_mb, &sb, &err);
                        if (r == -EAGAIN)
                                break; /* not now (Python's templates still starting): no failure */
                        if (r < 0) {
                                failed(p);
                                return false;
                        }
                        p->sb[k][p->n[k]++] = sb;
                        max--;
                }
        return later;
}

void ns_pool_stats(const ns_pool *p, hxs_engine_stats *st)
{
        if (!p)
                return;
        uint64_t cap = 0;
        for (ns_pool_kind k = 0; k < NS_POOL_KINDS; k++) {
                hxs_language l = ns_pool_language(k);
                st->pool_ready += p->n[k];
                st->pool_target += p->target[k];
                st->pool_lang_ready[l] += p->n[k];
                st->pool_lang_target[l] += p->target[k];
                st->pool_lang_memory_mb[l] += (uint64_t)p->n[k] * p->memory_mb;
                cap += (uint64_t)p->target[k] * p->memory_mb;
        }
        st->pool_memory_mb = (uint64_t)st->pool_ready * p->memory_mb;
        st->pool_memory_limit_mb = cap < p->room_mb ? cap : p->room_mb;
        st->pool_served = p->served;
}
