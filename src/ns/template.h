/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm templates: pre-initialised Python processes ("zygotes") that have paid the
 * interpreter start-up and, for the scientific one, the imports of numpy and pandas.
 * Each execution is cloned from one with the same C code as the cold path
 * (ns_child_main), so it still gets fresh namespaces, its own cgroup and limits, a
 * fresh tmpfs and the seccomp filter; only the process image is a copy of the template
 * instead of a fresh exec. A used sandbox is never reused; the template itself never
 * runs a request's code.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "engine/request.h"
#include "ns/cgroup.h"
#include "ns/ns.h"

typedef enum template_kind {
        TEMPLATE_PYTHON = 0,    /* the interpreter only */
        TEMPLATE_PYTHON_SCI,    /* plus numpy and pandas */
        TEMPLATE_KIND_MAX,
} template_kind;

typedef struct hxs_templates hxs_templates;

/* Starts the templates (they become ready in the background), each in a memory-capped
 * cgroup of cgl. The _hxs_zygote extension is found beside the running binary. If this
 * fails, everything simply runs cold. */
int templates_new(const hxs_config *cfg, cg_layout *cgl, hxs_templates **ret, hxs_error *err);
void templates_free(hxs_templates *t);

/* Which template suits a request (both are behaviourally identical). */
template_kind template_pick(const hxs_request *req, bool installed_set);
/* Can this request run warm? Python, a ready template, and no environment variable
 * that only interpreter start-up reads (PYTHON*, LANG, LC_*). */
bool template_eligible(hxs_templates *t, const hxs_request *req);

/* Asks a ready template to clone a sandbox with these arguments. On success the
 * sandbox is blocked on args->sync_fd like a cold one. -EAGAIN when the template is
 * not ready (it is restarted if it died): run cold instead. */
int template_spawn(hxs_templates *t, template_kind kind, const ns_child_args *args,
                   pid_t *ret_pid, int *ret_pidfd);

/* For /health and /metrics: ready templates, and templates started since start-up. */
void templates_state(hxs_templates *t, unsigned *ret_ready, unsigned *ret_total,
                     unsigned long *ret_restarts);

/* The wire format between the engine and a template (one SOCK_SEQPACKET message,
 * with the descriptors in SCM_RIGHTS: payload, sync, report, stdout, stderr[, stdin]). */
#define TEMPLATE_MAGIC 0x68787a31u /* "hxz1" */
typedef struct template_request {
        uint32_t magic;
        uint32_t n_fds;
        uint32_t memory_mb;     /* ns_child_args.memory_mb */
        hxs_config cfg;
        char mountpoint[300];
        char code_name[16];
        char pkgs_dir[512];     /* an installed package set to bind, "" = none */
} template_request;

typedef struct template_reply {
        int32_t pid;    /* > 0, or -errno */
} template_reply;
