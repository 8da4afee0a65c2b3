/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one settings table. Each row names an environment variable, its default as a
 * user would write it, its parser and bounds, and a line of help; environment parsing,
 * `--help`, `doctor` and docs/configuration.md all come from here.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/uidcheck.h"

typedef enum setting_type {
        SET_UINT,       /* plain number within [min, max] */
        SET_DURATION,   /* seconds: 30, 30s, 2m, 1h */
        SET_BYTES,      /* bytes: 1048576, 1024k, 1M */
        SET_STRING,     /* free text (paths, URLs) */
        SET_BACKEND,    /* auto | namespaces | qemu | firecracker */
        SET_ACCEL,      /* auto | kvm | tcg */
        SET_LISTEN,     /* host:port | :port | unix:/path */
        SET_CPUS,       /* 0.5, 1, 2 -> thousandths */
        SET_BOOL,       /* on/off, true/false, 1/0, yes/no */
        SET_TYPE_MAX,
} setting_type;

typedef struct setting {
        hxs_setting_info info;
        setting_type type;
        size_t offset;
        size_t size;            /* for strings */
        uint64_t min, max;      /* for numbers, in the parsed unit */
} setting;

#define U32(field) offsetof(hxs_config, field), 0
#define STR(field) offsetof(hxs_config, field), sizeof(((hxs_config *)0)->field)

static const setting settings[] = {
        { { "MAX_EXECUTION_TIME", "30s", "largest timeout a request may ask for (30, 30s, 2m)" },
          SET_DURATION, U32(max_timeout_s), 1, 24 * 3600 },
        { { "MAX_MEMORY_MB", "512", "largest memory_mb a request may ask for" },
          SET_UINT, U32(max_memory_mb), 16, 1024 * 1024 },
        { { "LISTEN_ADDRESS", "127.0.0.1:8080", "host:port, :port (all interfaces) or unix:/path" },
          SET_LISTEN, STR(listen_address), 0, 0 },
        { { "FIRECRACKER_BIN", "/usr/bin/firecracker", "Firecracker binary for the microVM backend" },
          SET_STRING, STR(firecracker_bin), 0, 0 },
        { { "SANDBOX_BACKEND", "auto", "auto, namespaces, qemu or firecracker (auto: qemu when KVM and the VM image are there)" },
          SET_BACKEND, U32(backend), 0, 0 },
        { { "QEMU_BIN", "/usr/bin/qemu-system-x86_64", "QEMU binary for the qemu backend (any path: a QEMU installed elsewhere, or a stand-in for tests)" },
          SET_STRING, STR(qemu_bin), 0, 0 },
        { { "SANDBOX_VM_IMAGE_DIR", "/var/cache/hexr-sandbox/image", "guest kernel, initramfs and root image (hexr-sandbox image build)" },
          SET_STRING, STR(vm_image_dir), 0, 0 },
        { { "SANDBOX_VM_ACCEL", "auto", "auto (KVM when usable, else TCG), kvm or tcg" },
          SET_ACCEL, U32(vm_accel), 0, 0 },
        { { "VM_POOL_SIZE", "2", "booted microVMs kept ready for the next executions (serve only)" },
          SET_UINT, U32(vm_pool_size), 0, 64 },
        { { "VM_POOL_MEMORY_MB", "2048", "guest memory the pool of ready microVMs may hold in all" },
          SET_UINT, U32(vm_pool_memory_mb), 0, 1024 * 1024 },
        { { "MAX_CONCURRENT", "0", "executions running at once, whatever they use (0: what the host's pid budget allows: half of kernel.pid_max and threads-max over SANDBOX_PIDS_MAX, within the service's open-file limit, 2 to 1024); they share the CPU by equal cgroup weight, and MEMORY_BUDGET_MB bounds them too" },
          SET_UINT, U32(max_concurrent), 0, 4096 },
        { { "MEMORY_BUDGET_MB", "0", "memory_mb of the running executions together (and of what sessions hold); past it requests wait in the queue (0: half of MemAvailable at start, or of the service's cgroup memory limit when that is smaller); never below MAX_MEMORY_MB" },
          SET_UINT, U32(memory_budget_mb), 0, 64u * 1024 * 1024 },
        { { "MAX_QUEUE", "64", "requests waiting for a slot before 429" },
          SET_UINT, U32(max_queue), 0, 100000 },
        { { "QUEUE_TIMEOUT", "10s", "longest a request waits in the queue before 429" },
          SET_DURATION, U32(queue_timeout_s), 0, 3600 },
        { { "DEFAULT_TIMEOUT", "30s", "timeout of a request that names none" },
          SET_DURATION, U32(default_timeout_s), 1, 24 * 3600 },
        { { "DEFAULT_MEMORY_MB", "256", "memory_mb of a request that names none" },
          SET_UINT, U32(default_memory_mb), 16, 1024 * 1024 },
        { { "MAX_CODE_BYTES", "4M", "largest code a request may send" },
          SET_BYTES, U32(max_code_bytes), 1, 256u << 20 },
        { { "MAX_OUTPUT_BYTES", "1M", "captured stdout and stderr, each; the rest is dropped and flagged" },
          SET_BYTES, U32(max_output_bytes), 1024, 256u << 20 },
        { { "MAX_STDIN_BYTES", "1M", "largest stdin a request may send" },
          SET_BYTES, U32(max_stdin_bytes), 0, 256u << 20 },
        { { "MAX_STREAM_BYTES", "64M", "most a program may print on stdout and stderr together (streamed in full); past it, it is killed; at least MAX_OUTPUT_BYTES" },
          SET_BYTES, U32(max_stream_bytes), 1024, 4095u << 20 },
        { { "MAX_FILES", "100", "most files a request may send into the sandbox" },
          SET_UINT, U32(max_files), 0, 10000 },
        { { "MAX_FILE_BYTES", "64M", "largest file a request may send" },
          SET_BYTES, U32(max_file_bytes), 0, 1u << 30 },
        { { "MAX_FILES_BYTES", "128M", "total size of the files a request sends (they also count against SANDBOX_TMPFS_MB)" },
          SET_BYTES, U32(max_files_bytes), 0, 4095u << 20 },
        { { "UPLOAD_STAGING_BYTES", "1G", "files of multipart requests staged under STATE_DIR at once, across all requests (kept until the request ends); an upload past it gets 429 overloaded; below MAX_FILES_BYTES, a request's files may never all fit" },
          SET_BYTES, U32(upload_staging_bytes), 1024 * 1024, 4095u << 20 },
        { { "MAX_RETURN_FILES", "100", "most files a result returns (output/ and return_files); the rest are not listed" },
          SET_UINT, U32(max_return_files), 0, 10000 },
        { { "MAX_RETURN_BYTES", "32M", "total content of the files a result returns; files past it are listed as truncated" },
          SET_BYTES, U32(max_return_bytes), 0, 1u << 30 },
        { { "MAX_ENV_VARS", "256", "most env_vars a request may set" },
          SET_UINT, U32(max_env_vars), 0, 100000 },
        { { "MAX_ENV_BYTES", "64k", "total size of env_vars names and values" },
          SET_BYTES, U32(max_env_bytes), 0, 16u << 20 },
        { { "MAX_PACKAGES", "32", "most packages a request may name" },
          SET_UINT, U32(max_packages), 0, 1000 },
        { { "MAX_BODY_BYTES", "8M", "largest HTTP request body (413 beyond)" },
          SET_BYTES, U32(max_body_bytes), 1024, 1024u << 20 },
        { { "MAX_CONNECTIONS", "256", "open HTTP connections at once" },
          SET_UINT, U32(max_connections), 4, 65536 },
        { { "MAX_CONNECTIONS_PER_ADDRESS", "32", "open HTTP connections from one IP address (trusted proxies' addresses are not limited)" },
          SET_UINT, U32(max_connections_per_address), 1, 65536 },
        { { "HANDSHAKE_TIMEOUT", "5s", "time a new connection has to finish its TLS handshake and send its request line" },
          SET_DURATION, U32(handshake_timeout_s), 1, 60 },
        { { "DRAIN_TIMEOUT", "30s", "on SIGTERM, how long running executions may finish" },
          SET_DURATION, U32(drain_timeout_s), 0, 3600 },
        { { "DRAIN_QUIET", "1s", "on SIGTERM, once nothing runs: new requests keep getting 503 until none came for this long (health checks and /metrics aside), so a load balancer has taken the instance out before its socket closes; within DRAIN_TIMEOUT; not after SIGINT" },
          SET_DURATION, U32(drain_quiet_s), 0, 60 },
        { { "STREAM_HEARTBEAT", "15s", "silence after which an event stream (Accept: text/event-stream) gets a keep-alive comment, so proxies keep it open" },
          SET_DURATION, U32(stream_heartbeat_s), 1, 300 },
        { { "SANDBOX_TMPFS_MB", "64", "size of the sandbox's /tmp and of its home, each" },
          SET_UINT, U32(tmpfs_mb), 1, 1024 * 1024 },
        { { "SANDBOX_PIDS_MAX", "256", "processes and threads a sandbox may have" },
          SET_UINT, U32(pids_max), 8, 1u << 22 },
        { { "SANDBOX_CPUS", "1", "CPU share of one sandbox, in cores (0.5, 1, 2)" },
          SET_CPUS, U32(cpus_milli), 10, 1024 * 1000 },
        { { "SANDBOX_NOFILE", "1024", "open files a sandbox process may have" },
          SET_UINT, U32(nofile), 16, 1u << 20 },
        { { "SANDBOX_UID_BASE", "1000000",
            "host uids: +0 the sandbox's root, +1000 the sandbox user, +2000 the templates, +3000-3002 the downloader and VMMs, from +4000 one owner per live sandbox; "
            "checked at start against /etc/subuid, /etc/subgid and the accounts (an overlap refuses to start)" },
          SET_UINT, U32(uid_base), 1000, 4000000000u },
        { { "SANDBOX_INOTIFY_INSTANCES", "32", "inotify instances a sandbox may hold (the limit of its own user namespace)" },
          SET_UINT, U32(inotify_instances), 1, 65536 },
        { { "SANDBOX_INOTIFY_WATCHES", "16384", "inotify watches a sandbox may hold (the limit of its own user namespace)" },
          SET_UINT, U32(inotify_watches), 1, 1u << 22 },
        { { "SANDBOX_WARM", "on", "start Python from pre-initialised templates (serve only; exec is always cold)" },
          SET_BOOL, offsetof(hxs_config, warm), 0, 0, 0 },
        { { "SANDBOX_WARM_SLOTS", "0", "warm templates of each kind, one per Python execution that may start warm at once; more run cold (0: as many as MAX_CONCURRENT, at most 32; each is a fork of its kind's first and shares its pages; at most 64)" },
          SET_UINT, U32(warm_slots), 0, 64 },
        { { "SANDBOX_TEMPLATE_MEMORY_MB", "512", "memory cap of the warm templates of each kind, together (they share their pages)" },
          SET_UINT, U32(template_memory_mb), 64, 64 * 1024 },
        { { "SANDBOX_POOL", "1", "pre-started single-use sandboxes kept ready of each kind (Python from each warm template, plain and scientific; JavaScript; Bash; serve only, with SANDBOX_WARM on): each runs one execution and is destroyed, the pool refilled after it; requests it cannot serve as a cold start would (stdin, env_vars, files, packages, another memory_mb) start as without it (0: off)" },
          SET_UINT, U32(pool_size), 0, 16 },
        { { "SANDBOX_POOL_MEMORY_MB", "1024", "memory (their memory_mb, DEFAULT_MEMORY_MB each) the pre-started sandboxes may hold in all, at most a quarter of MEMORY_BUDGET_MB; what they hold is taken from that budget and given up to executions that need it" },
          SET_UINT, U32(pool_memory_mb), 0, 64 * 1024 },
        { { "SANDBOX_ROOTFS", "", "root filesystem directory (empty: host /usr and a synthesized /etc)" },
          SET_STRING, STR(rootfs), 0, 0 },
        { { "STATE_DIR", "/run/hexr-sandbox", "where the engine keeps its mount point and runtime state; it and the directories above it must be root's, not writable by others (sticky /tmp is fine)" },
          SET_STRING, STR(state_dir), 0, 0 },
        { { "PACKAGES_WHEELHOUSE", "", "directory of wheels packages= may install from (empty: only what the image has); must exist, be listable and its wheels readable by other users (checked at start)" },
          SET_STRING, STR(packages_wheelhouse), 0, 0 },
        { { "PACKAGES_INDEX_URL", "",
            "package index (PEP 503, http:// or https:// with a host) the service, never the sandbox, may download wheels from" },
          SET_STRING, STR(packages_index_url), 0, 0 },
        { { "PACKAGES_CACHE_DIR", "/var/cache/hexr-sandbox/packages", "where installed package sets are cached; it and the directories above it must be root's, not writable by others (sticky /tmp is fine)" },
          SET_STRING, STR(packages_cache_dir), 0, 0 },
        { { "PACKAGES_CACHE_MB", "2048", "size limit of that cache (least recently used sets are evicted); also the most one install may write, and the largest wheel" },
          SET_UINT, U32(packages_cache_mb), 16, 1024 * 1024 },
        { { "PACKAGES_CACHE_INODES", "200000", "files and directories that cache may hold (least recently used sets are evicted); also the most one install may create" },
          SET_UINT, U32(packages_cache_inodes), 1000, 100000000 },
        { { "PACKAGES_JOBS", "2", "package cache work done at once off the event loop (hashing wheels, measuring and removing installed sets)" },
          SET_UINT, U32(packages_jobs), 1, 64 },
        { { "TLS_CERT_FILE", "", "server certificate chain (PEM); with TLS_KEY_FILE the service speaks HTTPS" },
          SET_STRING, STR(tls_cert_file), 0, 0 },
        { { "TLS_KEY_FILE", "", "private key of TLS_CERT_FILE (PEM)" },
          SET_STRING, STR(tls_key_file), 0, 0 },
        { { "TLS_CLIENT_CA_FILE", "", "CA bundle (PEM) for client certificates: mTLS; a CA belongs to the trust domain its spiffe:// URI SAN names, else to the service's own" },
          SET_STRING, STR(tls_client_ca_file), 0, 0 },
        { { "SPIFFE_TRUST_BUNDLES", "", "trust bundles per trust domain: trust-domain=/file.pem (comma list); an ID is verified against its own trust domain's only" },
          SET_STRING, STR(spiffe_trust_bundles), 0, 0 },
        { { "SPIFFE_TRUST_DOMAIN", "", "the service's own trust domain (default: that of TLS_CERT_FILE's SPIFFE ID), for CAs that name none" },
          SET_STRING, STR(spiffe_trust_domain), 0, 0 },
        { { "AUTH_ALLOW", "", "callers allowed: spiffe://td/id, spiffe://td (trust domain), spiffe://td/prefix/* (comma list)" },
          SET_STRING, STR(auth_allow), 0, 0 },
        { { "TRUSTED_PROXIES", "", "peers whose X-Forwarded-Client-Cert names the caller: unix, IP addresses and/or the proxies' SPIFFE IDs" },
          SET_STRING, STR(trusted_proxies), 0, 0 },
        { { "ALLOW_NON_LOOPBACK", "off", "listen on a non-loopback address without caller identity (on: anyone who reaches it runs code)" },
          SET_BOOL, offsetof(hxs_config, allow_non_loopback), 0, 0, 0 },
        { { "QUOTA_CONCURRENT_PER_CALLER", "0", "executions one caller may have running or queued (0: no per-caller limit)" },
          SET_UINT, U32(quota_concurrent), 0, 4096 },
        { { "QUOTA_RUNNING_PER_CALLER", "0", "executions one caller may have running; more wait (0: with identities, MAX_CONCURRENT less a quarter, at least 1 slot kept for others); below MAX_CONCURRENT, a caller also holds at most that share of MEMORY_BUDGET_MB" },
          SET_UINT, U32(quota_running), 0, 4096 },
        { { "QUOTA_PER_MINUTE", "0", "executions one caller may start per minute (0: no limit)" },
          SET_UINT, U32(quota_per_minute), 0, 1000000 },
        { { "QUOTA_QUEUE_PER_CALLER", "16", "requests one caller may have waiting for a slot (0: only MAX_QUEUE)" },
          SET_UINT, U32(quota_queue), 0, 100000 },
        { { "METRICS_ALLOW", "", "callers that may read /metrics, as AUTH_ALLOW (unset: every allowed caller)" },
          SET_STRING, STR(metrics_allow), 0, 0 },
        { { "MCP_ALLOWED_ORIGINS", "", "Origins a browser may call /mcp from, comma-separated (http://host:port); unset: only localhost, 127.0.0.1 and [::1], any port" },
          SET_STRING, STR(mcp_allowed_origins), 0, 0 },
        { { "METRICS_CALLERS", "20", "distinct caller labels in /metrics; later callers count as \"other\"" },
          SET_UINT, U32(metrics_callers), 0, 1000 },
        { { "EXECUTION_RECORDS", "1024", "recent executions kept for GET /api/v1/executions/{id}" },
          SET_UINT, U32(execution_records), 1, 100000 },
        /* sessions (issue 15) */
        { { "MAX_SESSIONS", "16", "sessions alive at once in the service (each holds its memory_mb while it lives); past it, 429" },
          SET_UINT, U32(max_sessions), 0, 4096 },
        { { "MAX_SESSIONS_PER_CALLER", "4", "sessions one caller may have alive at once; past it, 429" },
          SET_UINT, U32(max_sessions_per_caller), 0, 4096 },
        { { "SESSION_IDLE_TIMEOUT", "10m", "a session with no cell running for this long ends (idle_timeout of a request that names none)" },
          SET_DURATION, U32(session_idle_timeout_s), 1, 24 * 3600 },
        { { "SESSION_IDLE_TIMEOUT_MAX", "1h", "largest idle_timeout a session may ask for" },
          SET_DURATION, U32(session_idle_timeout_max_s), 1, 24 * 3600 },
        { { "SESSION_LIFETIME", "1h", "a session ends this long after it started, busy or not (lifetime of a request that names none)" },
          SET_DURATION, U32(session_lifetime_s), 1, 7 * 24 * 3600 },
        { { "SESSION_LIFETIME_MAX", "4h", "largest lifetime a session may ask for" },
          SET_DURATION, U32(session_lifetime_max_s), 1, 7 * 24 * 3600 },
};

static const char *const backend_names[HXS_BACKEND_MAX] = {
        [HXS_BACKEND_AUTO] = "auto",
        [HXS_BACKEND_NAMESPACES] = "namespaces",
        [HXS_BACKEND_QEMU] = "qemu",
        [HXS_BACKEND_FIRECRACKER] = "firecracker",
};

static const char *const accel_names[HXS_VM_ACCEL_MAX] = {
        [HXS_VM_ACCEL_AUTO] = "auto",
        [HXS_VM_ACCEL_KVM] = "kvm",
        [HXS_VM_ACCEL_TCG] = "tcg",
};

const char *hxs_vm_accel_name(hxs_vm_accel accel)
{
        return (unsigned)accel < HXS_VM_ACCEL_MAX ? accel_names[accel] : "unknown";
}

const char *hxs_backend_name(hxs_backend_kind kind)
{
        return (unsigned)kind < HXS_BACKEND_MAX ? backend_names[kind] : "unknown";
}

size_t hxs_settings_count(void)
{
        return ARRAY_SIZE(settings);
}

const hxs_setting_info *hxs_settings_get(size_t i)
{
        return i < ARRAY_SIZE(settings) ? &settings[i].info : NULL;
}

int hxs_settings_range(size_t i, hxs_setting_range *ret)
{
        static const hxs_setting_kind kinds[SET_TYPE_MAX] = {
                [SET_UINT] = HXS_SETTING_NUMBER,       [SET_DURATION] = HXS_SETTING_DURATION,
                [SET_BYTES] = HXS_SETTING_BYTES,       [SET_STRING] = HXS_SETTING_TEXT,
                [SET_BACKEND] = HXS_SETTING_BACKEND,   [SET_ACCEL] = HXS_SETTING_ACCEL,
                [SET_LISTEN] = HXS_SETTING_ADDRESS,    [SET_CPUS] = HXS_SETTING_CORES,
                [SET_BOOL] = HXS_SETTING_SWITCH,
        };
        if (i >= ARRAY_SIZE(settings))
                return -ENOENT;
        *ret = (hxs_setting_range){ kinds[settings[i].type], settings[i].min, settings[i].max };
        return 0;
}

/* Digits only, no sign, no overflow; then an optional suffix from `units`. */
static int parse_scaled(const char *s, const char *const *suffixes, const uint64_t *scales,
                        uint64_t *ret)
{
        if (!isdigit((unsigned char)s[0]))
                return -EINVAL;
        uint64_t v = 0;
        const char *p = s;
        for (; isdigit((unsigned char)*p); p++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t)(*p - '0');
        }
        for (size_t i = 0; suffixes[i]; i++) {
                if (strcmp(p, suffixes[i]) == 0) {
                        if (scales[i] && v > UINT64_MAX / scales[i])
                                return -ERANGE;
                        *ret = v * scales[i];
                        return 0;
                }
        }
        return -EINVAL;
}

static int parse_duration(const char *s, uint64_t *ret)
{
        static const char *const sfx[] = { "", "s", "m", "h", NULL };
        static const uint64_t scale[] = { 1, 1, 60, 3600 };
        return parse_scaled(s, sfx, scale, ret);
}

static int parse_bytes(const char *s, uint64_t *ret)
{
        static const char *const sfx[] = { "", "k", "K", "M", "G", NULL };
        static const uint64_t scale[] = { 1, 1024, 1024, 1024 * 1024, 1024 * 1024 * 1024 };
        return parse_scaled(s, sfx, scale, ret);
}

/* "1", "0.5", "2.25" cores -> thousandths. */
static int parse_cpus(const char *s, uint64_t *ret)
{
        uint64_t whole = 0, frac = 0, scale = 1000;
        const char *p = s;
        if (!isdigit((unsigned char)*p))
                return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
                if (whole > 1000000)
                        return -ERANGE;
                whole = whole * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
                p++;
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                for (; isdigit((unsigned char)*p); p++) {
                        if (scale > 1) {
                                scale /= 10;
                                frac += (uint64_t)(*p - '0') * scale;
                        }
                }
        }
        if (*p)
                return -EINVAL;
        *ret = whole * 1000 + frac;
        return 0;
}

static int check_listen(const char *v)
{
        if (strncmp(v, "unix:", 5) == 0)
                return v[5] == '/' && strlen(v + 5) < 108 ? 0 : -EINVAL;
        const char *colon = strrchr(v, ':');
        if (!colon || colon[1] == '\0')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long port = strtoul(colon + 1, &end, 10);
        /* port 0: the kernel picks one (the service prints which) */
        if (errno || *end || port > 65535 || !isdigit((unsigned char)colon[1]) || end - colon > 6)
                return -EINVAL;
        return 0;
}

static const setting *find_setting(const char *env)
{
        for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
                if (strcmp(settings[i].info.env, env) == 0)
                        return &settings[i];
        return NULL;
}

static int apply(hxs_config *cfg, const setting *s, const char *value, hxs_error *err)
{
        char *base = (char *)cfg + s->offset;
        uint64_t v = 0;
        int r = 0;
        const char *rule = NULL;

        switch (s->type) {
        case SET_UINT:
                r = parse_bytes(value, &v);   /* digits only: reject suffixes below */
                if (r == 0 && strspn(value, "0123456789") != strlen(value))
                        r = -EINVAL;
                rule = "a whole number";
                break;
        case SET_DURATION:
                r = parse_duration(value, &v);
                rule = "a duration such as 30, 30s, 2m or 1h";
                break;
        case SET_BYTES:
                r = parse_bytes(value, &v);
                rule = "a size such as 1048576, 1024k or 1M";
                break;
        case SET_CPUS:
                r = parse_cpus(value, &v);
                rule = "a number of cores such as 0.5, 1 or 2";
                break;
        case SET_BACKEND:
                for (int k = 0; k < HXS_BACKEND_MAX; k++)
                        if (strcmp(value, backend_names[k]) == 0) {
                                *(uint32_t *)base = (uint32_t)k;
                                return 0;
                        }
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, s->info.env,
                                      "%s: \"%s\" is not one of auto, namespaces, qemu, firecracker",
                                      s->info.env, value);
        case SET_ACCEL:
                for (int k = 0; k < HXS_VM_ACCEL_MAX; k++)
                        if (strcmp(value, accel_names[k]) == 0) {
                                *(uint32_t *)base = (uint32_t)k;
                                return 0;
                        }
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, s->info.env,
                                      "%s: \"%.64s\" is not one of auto, kvm, tcg", s->info.env, value);
        case SET_LISTEN:
                if (check_listen(value) < 0)
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, s->info.env,
                                              "%s: \"%s\" is not host:port, :port or unix:/absolute/path",
                                              s->info.env, value);
                _fallthrough_;
        case SET_STRING:
                if (strlen(value) >= s->size)
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, s->info.env,
                                              "%s: longer than %zu characters", s->info.env,
                                              s->size - 1);
                memcpy(base, value, strlen(value) + 1);
                return 0;
        case SET_BOOL: {
                static const char *const yes[] = { "on", "true", "1", "yes" }, *const no[] = { "off", "false", "0", "no" };
                for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                        if (strcmp(value, yes[i]) == 0) {
                                *(bool *)base = true;
                                return 0;
                        }
                        if (strcmp(value, no[i]) == 0) {
                                *(bool *)base = false;
                                return 0;
                        }
                }
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, s->info.env,
                                      "%s: \"%.64s\" is not on or off", s->info.env, value);
        }
        case SET_TYPE_MAX:
        default:
                return err_fail(err, HXS_ERR_INTERNAL, -EINVAL, "bad settings table");
        }

        if (r < 0)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, s->info.env,
                                      "%s: \"%.64s\" is not %s", s->info.env, value, rule);
        if (v < s->min || v > s->max)
                return err_fail_field(err, HXS_ERR_INVALID, -ERANGE, s->info.env,
                                      "%s: %llu is outside %llu..%llu", s->info.env,
                                      (unsigned long long)v, (unsigned long long)s->min,
                                      (unsigned long long)s->max);
        *(uint32_t *)base = (uint32_t)v;
        return 0;
}

int hxs_config_set(hxs_config *cfg, const char *env, const char *value, hxs_error *err)
{
        const setting *s = find_setting(env);
        if (!s)
                return err_fail_field(err, HXS_ERR_INVALID, -ENOENT, env, "%s: no such setting", env);
        return apply(cfg, s, value, err);
}

void hxs_config_defaults(hxs_config *ret)
{
        memset(ret, 0, sizeof(*ret));
        for (size_t i = 0; i < ARRAY_SIZE(settings); i++) {
                int r = apply(ret, &settings[i], settings[i].info.default_text, NULL);
                if (r < 0)
                        abort(); /* the table's own defaults must parse */
        }
}

static int config_check(hxs_config *cfg, hxs_error *err)
{
        if (cfg->default_timeout_s > cfg->max_timeout_s)
                cfg->default_timeout_s = cfg->max_timeout_s;
        if (cfg->default_memory_mb > cfg->max_memory_mb)
                cfg->default_memory_mb = cfg->max_memory_mb;
        if (cfg->session_idle_timeout_s > cfg->session_idle_timeout_max_s)
                cfg->session_idle_timeout_s = cfg->session_idle_timeout_max_s;
        if (cfg->session_lifetime_s > cfg->session_lifetime_max_s)
                cfg->session_lifetime_s = cfg->session_lifetime_max_s;
        if (cfg->max_stream_bytes < cfg->max_output_bytes)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "MAX_STREAM_BYTES",
                                      "MAX_STREAM_BYTES: %" PRIu32 " is below MAX_OUTPUT_BYTES (%" PRIu32
                                      "): a program may print at least what a result keeps",
                                      cfg->max_stream_bytes, cfg->max_output_bytes);
        if (cfg->state_dir[0] != '/')
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "STATE_DIR",
                                      "STATE_DIR: must be an absolute path");
        if (cfg->packages_wheelhouse[0]) {
                struct stat st;
                if (cfg->packages_wheelhouse[0] != '/')
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "PACKAGES_WHEELHOUSE",
                                              "PACKAGES_WHEELHOUSE: must be an absolute path");
                if (stat(cfg->packages_wheelhouse, &st) < 0 || !S_ISDIR(st.st_mode))
                        return err_fail_field(err, HXS_ERR_INVALID, -ENOTDIR, "PACKAGES_WHEELHOUSE",
                                              "PACKAGES_WHEELHOUSE: %s is not an existing directory",
                                              cfg->packages_wheelhouse);
        }
        if (cfg->packages_index_url[0]) {
                const char *u = cfg->packages_index_url;
                size_t scheme = strncmp(u, "https://", 8) == 0 ? 8 : strncmp(u, "http://", 7) == 0 ? 7 : 0;
                bool ok = scheme && u[scheme] && u[scheme] != '/';
                for (const char *c = u; ok && *c; c++)
                        ok = (unsigned char)*c > ' ' && (unsigned char)*c < 0x7f;
                if (!ok)
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "PACKAGES_INDEX_URL",
                                              "PACKAGES_INDEX_URL: must be an http:// or https:// URL with a host, without spaces or control characters");
        }
        if (cfg->packages_cache_dir[0] != '/' || strstr(cfg->packages_cache_dir, "/../") ||
            strlen(cfg->packages_cache_dir) > 200)
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "PACKAGES_CACHE_DIR",
                                      "PACKAGES_CACHE_DIR: must be an absolute path of at most 200 characters, without ..");
        if (cfg->rootfs[0] && cfg->rootfs[0] != '/')
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "SANDBOX_ROOTFS",
                                      "SANDBOX_ROOTFS: must be an absolute path");
        static const struct { const char *env; size_t off; } paths[] = {
                { "SANDBOX_VM_IMAGE_DIR", offsetof(hxs_config, vm_image_dir) },
                { "QEMU_BIN", offsetof(hxs_config, qemu_bin) },
                { "FIRECRACKER_BIN", offsetof(hxs_config, firecracker_bin) },
        };
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
                if (((const char *)cfg + paths[i].off)[0] != '/')
                        return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, paths[i].env,
                                              "%s: must be an absolute path", paths[i].env);
        /* named after the one that is set: that is what the operator wrote */
        if (cfg->tls_cert_file[0] && !cfg->tls_key_file[0])
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TLS_CERT_FILE",
                                      "TLS_CERT_FILE: needs TLS_KEY_FILE, the certificate's private key");
        if (!cfg->tls_cert_file[0] && cfg->tls_key_file[0])
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TLS_KEY_FILE",
                                      "TLS_KEY_FILE: needs TLS_CERT_FILE, the certificate of the key");
        if (cfg->tls_client_ca_file[0] && !cfg->tls_cert_file[0])
                return err_fail_field(err, HXS_ERR_INVALID, -EINVAL, "TLS_CLIENT_CA_FILE",
                                      "TLS_CLIENT_CA_FILE: needs TLS_CERT_FILE and TLS_KEY_FILE (mTLS is TLS)");
        return 0;
}

int hxs_config_from_env(hxs_config *ret, hxs_error *err)
{
        hxs_config cfg;
        hxs_config_defaults(&cfg);
        for (size_t i = 0; i < ARRAY_SIZE(settings); i++) {
                const char *v = getenv(settings[i].info.env);
                if (!v)
                        continue;
                int r = apply(&cfg, &settings[i], v, err);
                if (r < 0)
                        return r;
        }
        int r = config_check(&cfg, err);
        if (r < 0)
                return r;
        *ret = cfg;
        return 0;
}

/* ---- SANDBOX_UID_BASE against the host's ids (uidcheck.h) ----------------------------- */

static const uid_range *range_hit(const uid_range *ranges, size_t n, uint64_t lo, uint64_t count)
{
        for (size_t i = 0; i < n; i++) {
                uint64_t a = ranges[i].first, b = a + ranges[i].count;
                if (count && lo < b && a < lo + count)
                        return &ranges[i];
        }
        return NULL;
}

/* A field of a ':'-separated line as a number (decimal, no sign), or -1. */
static long long colon_number(const char *line, unsigned field)
{
        const char *p = line;
        for (unsigned i = 0; i < field; i++) {
                p = strchr(p, ':');
                if (!p)
                        return -1;
                p++;
        }
        if (!isdigit((unsigned char)*p))
                return -1;
        unsigned long long v = 0;
        for (; isdigit((unsigned char)*p); p++) {
                if (v > UINT32_MAX)
                        return -1;
                v = v * 10 + (unsigned long long)(*p - '0');
        }
        return *p == ':' || *p == '\0' || *p == '\n' ? (long long)v : -1;
}

enum id_file_kind { ID_SUBORDINATE, ID_ACCOUNT };

static int check_id_file(const char *path, enum id_file_kind kind, const unsigned *fields, size_t n_fields,
                         const uid_range *ranges, size_t n, hxs_error *err)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT)
                        return 0;
                return err_fail_field(err, HXS_ERR_UNSUPPORTED, -errno, "SANDBOX_UID_BASE",
                                      "SANDBOX_UID_BASE: cannot read %s to check the sandbox uids against it: %s",
                                      path, strerror(errno));
        }
        char line[1024];
        unsigned lineno = 0;
        int r = 0;
        while (r == 0 && fgets(line, sizeof(line), f)) {
                lineno++;
                size_t len = strlen(line);
                if (len && line[len - 1] == '\n')
                        line[--len] = '\0';
                if (line[0] == '#' || line[0] == '\0')
                        continue;
                for (size_t i = 0; i < n_fields && r == 0; i++) {
                        long long lo = colon_number(line, fields[i]);
                        if (lo < 0)
                                continue;
                        long long count = 1;
                        if (kind == ID_SUBORDINATE && (count = colon_number(line, 2)) < 0)
                                continue;
                        const uid_range *hit = range_hit(ranges, n, (uint64_t)lo, (uint64_t)count);
                        if (!hit)
                                continue;
                        if (kind == ID_SUBORDINATE)
                                r = err_fail_field(err, HXS_ERR_INVALID, -EEXIST, "SANDBOX_UID_BASE",
                                                   "SANDBOX_UID_BASE: host ids %u..%u (%s) overlap %s line %u "
                                                   "(\"%.80s\": %lld..%lld); choose a SANDBOX_UID_BASE whose ids "
                                                   "are nobody's",
                                                   hit->first, hit->first + hit->count - 1, hit->what, path, lineno,
                                                   line, lo, lo + count - 1);
                        else
                                r = err_fail_field(err, HXS_ERR_INVALID, -EEXIST, "SANDBOX_UID_BASE",
                                                   "SANDBOX_UID_BASE: host ids %u..%u (%s) include id %lld of %s "
                                                   "line %u (\"%.40s...\"); choose a SANDBOX_UID_BASE whose ids are "
                                                   "nobody's",
                                                   hit->first, hit->first + hit->count - 1, hit->what, lo, path,
                                                   lineno, line);
                }
        }
        if (r == 0 && ferror(f))
                r = err_fail_field(err, HXS_ERR_UNSUPPORTED, -EIO, "SANDBOX_UID_BASE",
                                   "SANDBOX_UID_BASE: cannot read %s", path);
        fclose(f);
        return r;
}

int uid_ranges_check(const uid_range *ranges, size_t n, const id_files *files, hxs_error *err)
{
        id_files def = { "/etc/subuid", "/etc/subgid", "/etc/passwd", "/etc/group" };
        if (!files)
                files = &def;
        static const unsigned sub_fields[] = { 1 }, passwd_fields[] = { 2, 3 }, group_fields[] = { 2 };
        const struct {
                const char *path, *fallback;
                enum id_file_kind kind;
                const unsigned *fields;
                size_t n_fields;
        } checks[] = {
                { files->subuid, def.subuid, ID_SUBORDINATE, sub_fields, ARRAY_SIZE(sub_fields) },
                { files->subgid, def.subgid, ID_SUBORDINATE, sub_fields, ARRAY_SIZE(sub_fields) },
                { files->passwd, def.passwd, ID_ACCOUNT, passwd_fields, ARRAY_SIZE(passwd_fields) },
                { files->group, def.group, ID_ACCOUNT, group_fields, ARRAY_SIZE(group_fields) },
        };
        for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
                int r = check_id_file(checks[i].path ? checks[i].path : checks[i].fallback, checks[i].kind,
                                      checks[i].fields, checks[i].n_fields, ranges, n, err);
                if (r < 0)
                        return r;
        }
        return 0;
}
