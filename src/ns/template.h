/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm templates: pre-initialised Python processes ("zygotes") that have paid the
 * interpreter start-up and, for the scientific one, the imports of numpy and pandas.
 * Each execution is cloned from one with the same C code as the cold path
 * (ns_child_main), so it still gets fresh namespaces, its own cgroup and limits, a
 * fresh tmpfs and the seccomp filter; only the process image is a copy of the template
 * instead of a fresh exec. A used sandbox is never reused; the template itself never
 * runs a request's code.
 *
 * Who owns a warm sandbox's user namespace: its creator's effective uid, to which the
 * kernel charges what the sandbox takes of the per-user counters (inotify, ...). So
 * that no two live sandboxes share one, there is a template per kind and per warm
 * owner slot (ns.h, NS_OWNER_UID), running as that slot's owner uid and serving one
 * sandbox at a time. The templates of a kind are forked from one Python process, the
 * mother, after its imports (so they share its pages): it alone holds CAP_SETUID and
 * CAP_SETGID, to give each child its slot's uid; it reads nothing but its own imports
 * and the slot numbers the engine sends, and exits once it has forked them. A slot
 * template holds no capability at all. Templates and sandboxes are children of the
 * service (CLONE_PARENT): the service proves that what a template answers is a process
 * it made before it touches it.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "engine/request.h"
#include "core/cgroup.h"
#include "ns/ns.h"

typedef enum template_kind {
        TEMPLATE_PYTHON = 0,    /* the interpreter only */
        TEMPLATE_PYTHON_SCI,    /* plus numpy and pandas */
        TEMPLATE_KIND_MAX,
} template_kind;

typedef struct ns_templates ns_templates;

/* Starts the templates of every kind (they become ready in the background), each kind
 * in a memory-capped cgroup of cgl, each slot's as an owner uid taken from owners. The
 * _hxs_zygote extension is found beside the running binary. init_fd (the sandbox
 * init, kept open by the caller) is given to the templates. If this fails, everything
 * simply runs cold. */
struct ns_owners;
int templates_new(const hxs_config *cfg, cg_layout *cgl, int init_fd, struct ns_owners *owners,
                  ns_templates **ret, hxs_error *err);
void templates_free(ns_templates *t);

/* Which template suits a request (both are behaviourally identical). */
template_kind template_pick(const hxs_request *req, bool installed_set);
/* Can this request run warm? Python, a ready template, and no environment variable
 * that only interpreter start-up reads (PYTHON*, LANG, LC_*). */
bool template_eligible(ns_templates *t, const hxs_request *req);
/* A template of that kind is ready in a free slot (template_spawn would not say
 * -EAGAIN); one that died is restarted. */
bool template_ready(ns_templates *t, template_kind kind);

/* Asks a ready template of a free slot to clone a sandbox with these arguments. On
 * success the sandbox is blocked on args->sync_fd like a cold one, *ret_pidfd is a
 * pidfd of it (a child of this process, checked), *ret_slot the slot it holds until
 * templates_release, and *ret_owner the owner uid of its user namespace, which it
 * holds until ns_owner_put. -EAGAIN when no template is ready and free (one that died
 * is restarted): run cold instead. */
int template_spawn(ns_templates *t, template_kind kind, const ns_child_args *args,
                   pid_t *ret_pid, int *ret_pidfd, int *ret_slot, uid_t *ret_owner);
/* The sandbox of that slot is gone: the slot's templates may serve another. */
void templates_release(ns_templates *t, int slot);

/* For /health and /metrics: kinds whose templates are all ready, kinds, and
 * generations of templates started since start-up. */
void templates_state(ns_templates *t, unsigned *ret_ready, unsigned *ret_total,
                     unsigned long *ret_restarts);

/* Whether pidfd (the process pid, so the template says) is a child of this process in
 * a user namespace that owner owns: what the engine checks before it acts on a
 * template's answer. 0, or -EPERM. */
int template_check_child(int pidfd, pid_t pid, uid_t owner);

/* ---- the wire formats (SOCK_SEQPACKET) ---- */

/* engine -> mother: fork the template of one slot; SCM_RIGHTS: its control socket.
 * mother -> engine: a template_reply with the new template's pid; SCM_RIGHTS: a pidfd. */
#define TEMPLATE_SLOT_MAGIC 0x68787331u /* "hxs1" */
typedef struct template_slot_request {
        uint32_t magic;
        uint32_t slot;
        uint32_t owner;         /* its uid and gid (effective and saved) */
} template_slot_request;

/* slot template -> engine, once: "R" when it serves. Then, for each request:
 * engine -> template: a template_request; SCM_RIGHTS: payload, sync, report, stdout,
 * stderr[, stdin]. template -> engine: a template_reply with the request's seq; SCM_RIGHTS:
 * a pidfd of the sandbox (none on failure). A request may get a second answer (PID 1
 * answers for itself, and the template does too when PID 1 died before it could say
 * that it had): the engine drops every answer whose seq is not its request's. */
#define TEMPLATE_MAGIC 0x68787a33u /* "hxz3" */
typedef struct template_request {
        uint32_t magic;
        uint32_t seq;           /* echoed by its answers */
        uint32_t n_fds;
        uint32_t memory_mb;     /* ns_child_args.memory_mb */
        ns_limits limits;       /* ns_child_args.limits */
        char mountpoint[300];
        char code_name[16];
        char pkgs_dir[512];     /* an installed package set to bind, "" = none */
        uint32_t has_files;     /* the last fd is the files in (ns-files.h) */
        uint32_t code_fifo;     /* ns_child_args.code_fifo: a pre-started sandbox (pool.h) */
} template_request;

typedef struct template_reply {
        int32_t pid;    /* > 0, or -errno */
        uint32_t seq;   /* the request's (0 from the mother) */
} template_reply;

/* Where a slot template has its control socket and the sandbox init. */
#define TEMPLATE_SOCK_FD 3
#define TEMPLATE_INIT_FD 4
