/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libhexrsandbox: run untrusted code in a fresh, isolated sandbox.
 *
 * Life cycle:
 *
 *   hxs_config_from_env()          settings (immutable once the engine has them)
 *   hxs_engine_new(config)         probes the host, sweeps a crashed predecessor's leftovers
 *   hxs_request_new() + setters    describes one execution
 *   hxs_request_validate()         checks it against the configured maxima
 *   hxs_exec_start(engine, req)    creates the sandbox; returns a handle with one pollable fd
 *   hxs_exec_process(exec)         call when that fd is readable; never blocks
 *   hxs_exec_done() / hxs_exec_result()
 *   hxs_exec_free()                kills whatever is left and frees everything
 *
 * or simply hxs_run(), which does all of the above synchronously.
 *
 * Errors: functions return 0 or a negative errno. Those that a human will read the
 * reason of also fill a caller-owned hxs_error. The library never prints.
 *
 * Threads: an engine and its executions belong to one thread (the service runs them
 * all from one event loop).
 */
#ifndef HEXR_SANDBOX_SANDBOX_H
#define HEXR_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HXS_API __attribute__((visibility("default")))

/* ---- errors ---------------------------------------------------------------- */

/* What kind of failure, so the service can pick an HTTP status. A request over one of
 * the library's size limits (code, stdin, env_vars, packages) breaks a rule like any
 * other: HXS_ERR_INVALID, naming the field and the limit. */
typedef enum hxs_error_kind {
        HXS_ERR_NONE = 0,
        HXS_ERR_INVALID,     /* the request or a setting breaks a rule (400 / bad config) */
        HXS_ERR_UNSUPPORTED, /* the host cannot do what was asked (500 / doctor) */
        HXS_ERR_NOT_FOUND,   /* something the request names does not exist, e.g. a package (422) */
        HXS_ERR_SETUP,       /* the sandbox could not be set up (500) */
        HXS_ERR_INTERNAL,    /* anything else (500) */
        HXS_ERR_KIND_MAX,
} hxs_error_kind;

/* Caller-owned, fixed size: filling it never allocates. */
typedef struct hxs_error {
        hxs_error_kind kind;
        int errnum;           /* positive errno behind it, 0 if none */
        char field[48];       /* request field or setting it is about, "" if none */
        char message[400];    /* one human-readable sentence, naming field and rule */
        char subject[64];     /* what it is about, when one thing (a package name, a path),
                               * for a caller that needs it apart from the message; "" if none */
} hxs_error;

HXS_API const char *hxs_error_kind_name(hxs_error_kind kind);

/* ---- configuration ---------------------------------------------------------- */

typedef enum hxs_backend_kind {
        HXS_BACKEND_AUTO = 0,
        HXS_BACKEND_NAMESPACES,
        HXS_BACKEND_QEMU,
        HXS_BACKEND_FIRECRACKER,
        HXS_BACKEND_MAX,
} hxs_backend_kind;

/* How a microVM is run: KVM when usable (auto), or insist on one. */
typedef enum hxs_vm_accel {
        HXS_VM_ACCEL_AUTO = 0,
        HXS_VM_ACCEL_KVM,
        HXS_VM_ACCEL_TCG,
        HXS_VM_ACCEL_MAX,
} hxs_vm_accel;

/* Every setting, validated. Built from the one settings table (see hxs_settings_*). */
typedef struct hxs_config {
        /* limits a request may ask for */
        uint32_t max_timeout_s;         /* MAX_EXECUTION_TIME */
        uint32_t max_memory_mb;         /* MAX_MEMORY_MB */
        uint32_t default_timeout_s;     /* DEFAULT_TIMEOUT */
        uint32_t default_memory_mb;     /* DEFAULT_MEMORY_MB */
        uint32_t max_code_bytes;        /* MAX_CODE_BYTES */
        uint32_t max_output_bytes;      /* MAX_OUTPUT_BYTES, per stream */
        uint32_t max_env_vars;          /* MAX_ENV_VARS */
        uint32_t max_env_bytes;         /* MAX_ENV_BYTES, names + values */
        uint32_t max_stdin_bytes;       /* MAX_STDIN_BYTES */
        uint32_t max_packages;          /* MAX_PACKAGES */
        /* what every sandbox gets */
        uint32_t tmpfs_mb;              /* SANDBOX_TMPFS_MB: /tmp and home, each */
        uint32_t pids_max;              /* SANDBOX_PIDS_MAX */
        uint32_t cpus_milli;            /* SANDBOX_CPUS, in thousandths of a core */
        uint32_t nofile;                /* SANDBOX_NOFILE */
        uint32_t uid_base;              /* SANDBOX_UID_BASE: host uid of the sandbox's root */
        uint32_t inotify_instances;     /* SANDBOX_INOTIFY_INSTANCES, per sandbox (0: kernel's) */
        uint32_t inotify_watches;       /* SANDBOX_INOTIFY_WATCHES, per sandbox (0: kernel's) */
        hxs_backend_kind backend;       /* SANDBOX_BACKEND */
        bool warm;                      /* SANDBOX_WARM: Python from pre-initialised templates */
        uint32_t warm_slots;            /* SANDBOX_WARM_SLOTS: templates per kind (0: see uids.h) */
        uint32_t template_memory_mb;    /* SANDBOX_TEMPLATE_MEMORY_MB: cap of each template */
        uint32_t pool_size;             /* SANDBOX_POOL: pre-started JS/Bash sandboxes per language */
        uint32_t pool_memory_mb;        /* SANDBOX_POOL_MEMORY_MB: memory_mb the pools hold in all */
        char rootfs[256];               /* SANDBOX_ROOTFS: "" = host /usr + synthesized /etc */
        char state_dir[256];            /* STATE_DIR */
        char firecracker_bin[256];      /* FIRECRACKER_BIN */
        /* microVM backends */
        char qemu_bin[256];             /* QEMU_BIN */
        char vm_image_dir[256];         /* SANDBOX_VM_IMAGE_DIR */
        hxs_vm_accel vm_accel;          /* SANDBOX_VM_ACCEL */
        uint32_t vm_pool_size;          /* VM_POOL_SIZE: booted VMs kept ready */
        uint32_t vm_pool_memory_mb;     /* VM_POOL_MEMORY_MB: guest RAM the pool may hold */
        /* service */
        char listen_address[256];       /* LISTEN_ADDRESS */
        uint32_t max_concurrent;        /* MAX_CONCURRENT (0 in the table = from the pid budget) */
        uint32_t memory_budget_mb;      /* MEMORY_BUDGET_MB: memory_mb of running executions,
                                         * together (0 in the table = from MemAvailable) */
        uint32_t max_queue;             /* MAX_QUEUE */
        uint32_t queue_timeout_s;       /* QUEUE_TIMEOUT */
        uint32_t max_body_bytes;        /* MAX_BODY_BYTES */
        uint32_t drain_timeout_s;       /* DRAIN_TIMEOUT */
        uint32_t drain_quiet_s;         /* DRAIN_QUIET: once drained, no request for this long */
        uint32_t stream_heartbeat_s;    /* STREAM_HEARTBEAT: keep-alive of idle event streams */
        uint32_t max_connections;       /* MAX_CONNECTIONS */
        char packages_wheelhouse[256];  /* PACKAGES_WHEELHOUSE */
        char packages_index_url[256];   /* PACKAGES_INDEX_URL */
        /* caller identity, authorization, quotas (the service only) */
        char tls_cert_file[256];        /* TLS_CERT_FILE: server certificate chain (PEM) */
        char tls_key_file[256];         /* TLS_KEY_FILE: its private key (PEM) */
        char tls_client_ca_file[256];   /* TLS_CLIENT_CA_FILE: trust bundle; mTLS when set */
        char auth_allow[4096];          /* AUTH_ALLOW: SPIFFE IDs, trust domains, prefixes */
        char trusted_proxies[4096];     /* TRUSTED_PROXIES: "unix", IP addresses, proxies' SPIFFE IDs */
        bool allow_non_loopback;        /* ALLOW_NON_LOOPBACK: listen wide without identity */
        uint32_t quota_concurrent;      /* QUOTA_CONCURRENT_PER_CALLER (0: none) */
        uint32_t quota_per_minute;      /* QUOTA_PER_MINUTE (0: none) */
        uint32_t quota_queue;           /* QUOTA_QUEUE_PER_CALLER (0: only MAX_QUEUE) */
        uint32_t metrics_callers;       /* METRICS_CALLERS: distinct caller labels */
        uint32_t execution_records;     /* EXECUTION_RECORDS: recent records kept */
        char spiffe_trust_bundles[4096]; /* SPIFFE_TRUST_BUNDLES: td=/file.pem,... */
        char spiffe_trust_domain[256];  /* SPIFFE_TRUST_DOMAIN: the service's own */
        char metrics_allow[4096];       /* METRICS_ALLOW: who may read /metrics ("" = AUTH_ALLOW) */
        char mcp_allowed_origins[4096]; /* MCP_ALLOWED_ORIGINS: Origins /mcp accepts ("" = loopback) */
        uint32_t quota_running;         /* QUOTA_RUNNING_PER_CALLER (0: automatic) */
        uint32_t max_connections_per_address; /* MAX_CONNECTIONS_PER_ADDRESS */
        uint32_t handshake_timeout_s;   /* HANDSHAKE_TIMEOUT: to the first request line */
        char packages_cache_dir[256];   /* PACKAGES_CACHE_DIR: installed package sets */
        uint32_t packages_cache_mb;     /* PACKAGES_CACHE_MB: size limit of that cache */
        uint32_t packages_cache_inodes; /* PACKAGES_CACHE_INODES: its limit in files and directories */
        uint32_t packages_jobs;         /* PACKAGES_JOBS: cache work (hashing, removing) at once */
        /* output and files (issue 14) */
        uint32_t max_stream_bytes;      /* MAX_STREAM_BYTES: all a program may print, both streams */
        uint32_t max_files;             /* MAX_FILES: files a request sends */
        uint32_t max_file_bytes;        /* MAX_FILE_BYTES: one of them */
        uint32_t max_files_bytes;       /* MAX_FILES_BYTES: all of them */
        uint32_t upload_staging_bytes;  /* UPLOAD_STAGING_BYTES: staged uploads of all requests */
        uint32_t max_return_files;      /* MAX_RETURN_FILES: files a result returns */
        uint32_t max_return_bytes;      /* MAX_RETURN_BYTES: their content, in all */
        /* sessions (issue 15) */
        uint32_t max_sessions;          /* MAX_SESSIONS: alive at once in the service */
        uint32_t max_sessions_per_caller; /* MAX_SESSIONS_PER_CALLER */
        uint32_t session_idle_timeout_s;  /* SESSION_IDLE_TIMEOUT: default idle_timeout */
        uint32_t session_idle_timeout_max_s; /* SESSION_IDLE_TIMEOUT_MAX */
        uint32_t session_lifetime_s;    /* SESSION_LIFETIME: default lifetime */
        uint32_t session_lifetime_max_s; /* SESSION_LIFETIME_MAX */
} hxs_config;

/* One row of the settings table; the table drives env parsing, --help, doctor and docs. */
typedef struct hxs_setting_info {
        const char *env;          /* environment variable */
        const char *default_text; /* default, as a user would write it */
        const char *help;         /* one line */
} hxs_setting_info;

/* Number of settings, and row i (NULL past the end). */
HXS_API size_t hxs_settings_count(void);
HXS_API const hxs_setting_info *hxs_settings_get(size_t i);

/* What a setting accepts, for the printers (`settings`, `--help`, docs/configuration.md). */
typedef enum hxs_setting_kind {
        HXS_SETTING_NUMBER = 0, /* a whole number */
        HXS_SETTING_DURATION,   /* seconds: 30, 30s, 2m, 1h */
        HXS_SETTING_BYTES,      /* bytes: 1048576, 1024k, 1M */
        HXS_SETTING_CORES,      /* thousandths of a core, written 0.5, 1, 2 */
        HXS_SETTING_SWITCH,     /* on or off */
        HXS_SETTING_BACKEND,    /* one of hxs_backend_name(0 .. HXS_BACKEND_MAX - 1) */
        HXS_SETTING_ACCEL,      /* one of hxs_vm_accel_name(0 .. HXS_VM_ACCEL_MAX - 1) */
        HXS_SETTING_ADDRESS,    /* host:port, :port or unix:/path */
        HXS_SETTING_TEXT,       /* free text: paths, URLs, lists */
        HXS_SETTING_KIND_MAX,
} hxs_setting_kind;

typedef struct hxs_setting_range {
        hxs_setting_kind kind;
        uint64_t min, max;        /* the table's bounds in the kind's unit; numeric kinds only */
} hxs_setting_range;

/* Row i's kind and bounds. -ENOENT past the end, *ret untouched. */
HXS_API int hxs_settings_range(size_t i, hxs_setting_range *ret);

/* Fills *ret with the defaults (no environment read). */
HXS_API void hxs_config_defaults(hxs_config *ret);

/* Parses one setting's text into *cfg. -EINVAL with err naming the variable and rule. */
HXS_API int hxs_config_set(hxs_config *cfg, const char *env, const char *value, hxs_error *err);

/* Defaults, then every table variable present in the process environment. */
HXS_API int hxs_config_from_env(hxs_config *ret, hxs_error *err);

HXS_API const char *hxs_backend_name(hxs_backend_kind kind);
HXS_API const char *hxs_vm_accel_name(hxs_vm_accel accel);

/* ---- requests --------------------------------------------------------------- */

typedef enum hxs_language {
        HXS_LANG_PYTHON = 0,
        HXS_LANG_JAVASCRIPT,
        HXS_LANG_BASH,
        HXS_LANG_MAX,
} hxs_language;

/* "python", "javascript" (js, node), "bash" (shell, sh). -EINVAL if unknown. */
HXS_API int hxs_language_parse(const char *name, hxs_language *ret);
HXS_API const char *hxs_language_name(hxs_language lang);

typedef struct hxs_request hxs_request;

HXS_API hxs_request *hxs_request_new(void);
HXS_API void hxs_request_free(hxs_request *req); /* NULL is fine */

/* Setters copy what they are given (the caller keeps ownership of its arguments).
 * Code is bytes: it may contain NUL and need not be UTF-8. They return -ENOMEM only;
 * rules are checked by hxs_request_validate. timeout_s/memory_mb 0 = the default. */
HXS_API int hxs_request_set_language(hxs_request *req, hxs_language lang);
HXS_API int hxs_request_set_code(hxs_request *req, const void *code, size_t len);
HXS_API int hxs_request_set_stdin(hxs_request *req, const void *data, size_t len);
HXS_API void hxs_request_set_timeout_s(hxs_request *req, uint32_t seconds);
HXS_API void hxs_request_set_memory_mb(hxs_request *req, uint32_t mb);
HXS_API int hxs_request_add_env(hxs_request *req, const char *name, const char *value);
HXS_API int hxs_request_add_package(hxs_request *req, const char *requirement);

/* Files written into the working directory (/home/sandbox) before the program starts,
 * owned by the sandbox user, mode 0644 (directories 0755). path: relative; normalised
 * and checked by hxs_request_validate (no "..", no collisions, MAX_FILES, MAX_FILE_BYTES,
 * MAX_FILES_BYTES), which names the field, e.g. "files[3].path", and the path in
 * err->subject. _fd dups fd (the caller keeps its own) and reads size bytes from offset 0
 * when the sandbox is set up: a staging file need never be held in memory. */
HXS_API int hxs_request_add_file(hxs_request *req, const char *path, const void *data, size_t len);
HXS_API int hxs_request_add_file_fd(hxs_request *req, const char *path, int fd, uint64_t size);
/* Files to return besides those under output/: fnmatch patterns relative to the
 * working directory ("*.csv"; "**" also crosses directories). */
HXS_API int hxs_request_add_return_glob(hxs_request *req, const char *glob);

HXS_API hxs_language hxs_request_language(const hxs_request *req);
HXS_API uint32_t hxs_request_timeout_s(const hxs_request *req);   /* after defaults */
HXS_API uint32_t hxs_request_memory_mb(const hxs_request *req);   /* after defaults */
HXS_API size_t hxs_request_code_len(const hxs_request *req);      /* bytes of code */

/* Applies defaults and checks every rule against cfg. On failure: -EINVAL (or -E2BIG
 * for a size limit) and err names the field, e.g.
 * "memory_mb: 4096 exceeds the maximum 512". */
HXS_API int hxs_request_validate(hxs_request *req, const hxs_config *cfg, hxs_error *err);

/* ---- results ---------------------------------------------------------------- */

/* Exit code conventions: the program's own status; killed by signal N -> 128+N;
 * time limit -> 124 and timed_out; memory limit -> 137 and oom_killed. */
#define HXS_EXIT_TIMEOUT 124
#define HXS_EXIT_OOM     137

/* How an execution's packages= were provided. */
typedef enum hxs_packages_source {
        HXS_PACKAGES_NONE = 0,  /* none asked for */
        HXS_PACKAGES_IMAGE,     /* all in the image: nothing installed */
        HXS_PACKAGES_CACHED,    /* an installed set from the package cache */
        HXS_PACKAGES_INSTALLED, /* installed for this execution (then cached) */
        HXS_PACKAGES_SOURCE_MAX,
} hxs_packages_source;

HXS_API const char *hxs_packages_source_name(hxs_packages_source s);

/* Why an execution ended. */
typedef enum hxs_end_reason {
        HXS_END_EXITED = 0,     /* the program ended by itself (any exit status) */
        HXS_END_TIME_LIMIT,     /* killed at its timeout */
        HXS_END_MEMORY_LIMIT,   /* killed by the memory limit */
        HXS_END_OUTPUT_LIMIT,   /* killed past MAX_STREAM_BYTES of output */
        HXS_END_SIGNAL,         /* killed by a signal it did not get from us */
        HXS_END_KILLED,         /* stopped by hxs_exec_kill (client went away, draining) */
        HXS_END_MAX,
} hxs_end_reason;

/* "exited", "timeout", "memory_limit", "output_limit", "signal", "killed". */
HXS_API const char *hxs_end_reason_name(hxs_end_reason end);

/* A file the program left (output/ and return globs), owned by its result. */
typedef struct hxs_file {
        char *path;             /* relative to the working directory */
        unsigned char *data;    /* len bytes kept (NULL when len is 0) */
        size_t len;
        uint64_t size;          /* its size in the sandbox */
        bool truncated;         /* over the return budget: listed, content not kept */
        const char *mime;       /* static: from the extension */
} hxs_file;

/* Output over MAX_OUTPUT_BYTES keeps its first and last halves with, between them, the
 * line "\n[hexr-sandbox: N bytes left out]\n" (N in *_omitted). For every end but
 * HXS_END_EXITED, stderr ends with a line of the engine's own: "hexr-sandbox: " +
 * end_message, e.g. "hexr-sandbox: killed: time limit of 30 s exceeded". */
typedef struct hxs_result {
        char *stdout_data;      /* owned by the result; NUL-terminated for convenience */
        size_t stdout_len;
        char *stderr_data;
        size_t stderr_len;
        int exit_code;
        int signal;             /* 0 = none */
        uint64_t execution_time_ms;
        uint64_t memory_used_mb;
        bool timed_out;
        bool oom_killed;
        bool stdout_truncated;
        bool stderr_truncated;
        bool warm;              /* started from a warm template (for logs and metrics) */
        bool pooled;            /* started from a pre-started single-use sandbox (logs) */
        hxs_packages_source packages; /* where packages= came from */
        hxs_end_reason end;
        char end_message[200];  /* "" for HXS_END_EXITED, else e.g. "killed by signal 11 (SIGSEGV)" */
        uint64_t stdout_omitted, stderr_omitted; /* bytes left out between head and tail */
        hxs_file *files;        /* n_files of them, in path order */
        size_t n_files;
} hxs_result;

HXS_API void hxs_result_clear(hxs_result *res); /* frees the buffers; zeroes the struct */

/* Pure mapping used by every backend (exposed for tests): from a wait status and the
 * engine's observations to exit_code/signal/timed_out/oom_killed in *res. */
HXS_API void hxs_result_set_status(hxs_result *res, int wait_status, bool have_status,
                                   bool timed_out, bool oom_killed);

/* ---- engine ----------------------------------------------------------------- */

typedef struct hxs_engine hxs_engine;

/* Copies cfg. Picks the backend, probes the host, sweeps leftovers of a dead
 * predecessor (cgroups of engines whose process is gone). */
HXS_API int hxs_engine_new(const hxs_config *cfg, hxs_engine **ret, hxs_error *err);
HXS_API void hxs_engine_free(hxs_engine *engine);
HXS_API const hxs_config *hxs_engine_config(const hxs_engine *engine);
HXS_API const char *hxs_engine_backend_name(const hxs_engine *engine);

/* Warm templates, for /health and /metrics. */
typedef struct hxs_engine_stats {
        bool warm_enabled;              /* SANDBOX_WARM and the templates could start */
        unsigned templates_ready;       /* ready to clone right now */
        unsigned templates_total;
        unsigned long template_restarts; /* since the engine started */
        char warm_error[200];           /* why warm starts are off, if asked for */
        /* pre-started single-use JavaScript and Bash sandboxes (namespaces) */
        unsigned pool_ready;            /* started, waiting for code */
        unsigned pool_target;           /* how many the pools keep (size within the memory) */
        uint64_t pool_memory_mb;        /* memory_mb they hold now */
        uint64_t pool_memory_limit_mb;  /* what they may hold now: the target's, within
                                         * hxs_engine_memory_room */
        unsigned pool_lang_ready[HXS_LANG_MAX];         /* pool_ready by language */
        unsigned pool_lang_target[HXS_LANG_MAX];
        uint64_t pool_lang_memory_mb[HXS_LANG_MAX];
        unsigned long pool_served;      /* executions they have served since start-up */
        /* microVM backends */
        const char *vm_accel;           /* "kvm" or "tcg"; NULL for namespaces */
        unsigned vm_pool_ready;         /* booted VMs waiting for an execution */
        unsigned vm_pool_target;        /* how many the pool keeps (size within budget) */
        unsigned long vm_booted;        /* VMs the pool has booted since start-up */
        unsigned long vm_boot_failures; /* boots that did not reach a ready agent */
        char vm_last_boot_error[300];   /* why the last of them failed, "" if none has: the
                                         * library does not print it, its caller may */
} hxs_engine_stats;

HXS_API void hxs_engine_stats_get(hxs_engine *engine, hxs_engine_stats *ret);

/* Work the engine keeps off every execution's path: starting the pre-started
 * sandboxes that replace those used (SANDBOX_POOL). A caller running many executions
 * calls it once their results are delivered (the service: after each round of its
 * loop); without it a pool serves what it started with, then everything runs cold. */
/* True when it has more to do soon: the caller comes back within a few milliseconds
 * (the work is done in small steps, so that none holds up a caller's loop for long). */
HXS_API bool hxs_engine_background(hxs_engine *engine);

/* The memory (MiB of memory_mb) the engine may hold outside executions now: its
 * pre-started sandboxes (SANDBOX_POOL). A caller with a memory budget (the service's
 * MEMORY_BUDGET_MB) passes what its executions and sessions leave of it whenever that
 * changes: ready sandboxes beyond it are destroyed at once and refills stay within it,
 * so that they never hold what an execution needs. Unset: SANDBOX_POOL_MEMORY_MB only. */
HXS_API void hxs_engine_memory_room(hxs_engine *engine, uint64_t mb);

/* 0 when sandboxes can run right now, else -errno with the reason in err. */
HXS_API int hxs_engine_check(hxs_engine *engine, hxs_error *err);

/* ---- runtimes ------------------------------------------------------------------ */

/* What each language offers in the root the sandboxes see: the runtime manifest built
 * into the library (scripts/runtimes.txt), with the versions found in that root (its
 * dpkg database and its Python dist-packages; for the microVM backends, the guest
 * image's manifest.json). Read once; no interpreter is run. */
#define HXS_RUNTIME_PACKAGES_MAX 64

typedef struct hxs_runtime_package {
        hxs_language language;          /* HXS_LANG_MAX: for every language */
        bool interpreter;               /* the language's interpreter package */
        char debian[64];                /* Debian package */
        char distribution[64];          /* Python distribution, "" for other packages */
        char import_name[64];           /* the module a program imports, "" likewise */
        char debian_version[64];        /* installed in the root; "" when not (or unknown) */
        char version[64];               /* the distribution's version there; "" when absent */
} hxs_runtime_package;

typedef struct hxs_runtime_info {
        hxs_runtime_package pkgs[HXS_RUNTIME_PACKAGES_MAX];
        size_t n;
        char version[HXS_LANG_MAX][64]; /* upstream version of the interpreter ("3.11.2"), or "" */
        const char *interpreter[HXS_LANG_MAX]; /* its path in the root */
        char source[320];               /* where the versions were read, in words */
} hxs_runtime_info;

/* Reads the manifest and the versions of the root that `backend` runs in (the host's
 * root or SANDBOX_ROOTFS for namespaces, SANDBOX_VM_IMAGE_DIR for the microVMs). A root
 * without metadata is not an error: its versions stay "". */
HXS_API int hxs_runtime_info_load(const hxs_config *cfg, hxs_backend_kind backend, hxs_runtime_info *ret,
                                  hxs_error *err);
/* The engine's: the manifest parsed when it started, the versions read from the root
 * the first time they are asked for (thread-safe). */
HXS_API const hxs_runtime_info *hxs_engine_runtime_info(hxs_engine *engine);

/* ---- one execution ------------------------------------------------------------ */

typedef struct hxs_exec hxs_exec;

/* Validates req (see hxs_request_validate) and sets the sandbox up. The request is
 * copied; the caller may free it afterwards. On failure nothing is left behind. */
HXS_API int hxs_exec_start(hxs_engine *engine, const hxs_request *req, hxs_exec **ret,
                           hxs_error *err);

/* One fd (an epoll fd) that becomes readable whenever hxs_exec_process has work. */
HXS_API int hxs_exec_fd(const hxs_exec *exec);

/* Does whatever is ready without blocking. Returns 0; the execution may now be done. */
HXS_API int hxs_exec_process(hxs_exec *exec);

HXS_API bool hxs_exec_done(const hxs_exec *exec);

/* Every byte the program writes, as it is read: stream 1 stdout, 2 stderr, up to
 * MAX_STREAM_BYTES in all, and then the engine's kill line (stream 2), if any. The
 * result keeps its head and tail besides. Called from hxs_exec_process only. */
typedef void (*hxs_output_fn)(void *userdata, int stream, const void *data, size_t len);

/* Set right after hxs_exec_start, before the first hxs_exec_process. fn NULL: none. */
HXS_API void hxs_exec_set_output(hxs_exec *exec, hxs_output_fn fn, void *userdata);

/* Kills the whole sandbox now (client went away, service draining). The result then
 * reports signal 9 (exit 137) unless it had already finished. */
HXS_API void hxs_exec_kill(hxs_exec *exec);

/* Moves the result out once done (-EAGAIN before). Its buffers are the caller's.
 * If the sandbox could not be set up (this is only known once it has tried), there is
 * no result: it fills err (kind HXS_ERR_SETUP, or HXS_ERR_NOT_FOUND for a package no
 * source has) and returns the negative errno of err->errnum, -EIO when it has none. */
HXS_API int hxs_exec_take_result(hxs_exec *exec, hxs_result *ret, hxs_error *err);

/* Milliseconds since the execution started (for logs and metrics). */
HXS_API uint64_t hxs_exec_elapsed_ms(const hxs_exec *exec);

/* Kills anything left, reaps, removes cgroups, frees. NULL is fine. */
HXS_API void hxs_exec_free(hxs_exec *exec);

/* Synchronous convenience: start, wait, take the result. */
HXS_API int hxs_run(hxs_engine *engine, const hxs_request *req, hxs_result *ret, hxs_error *err);

/* ---- sessions: one interactive execution that keeps its state across cells ---- */

/* A session is ONE execution of the engine's backend, with every isolation property an
 * execution has, whose program is the language's driver: it takes cells and file
 * operations one at a time, in arrival order, over its stdin and answers on its stdout
 * (docs/sessions.md). Event-driven like hxs_exec (an fd, a process call, callbacks
 * from within hxs_session_process only), plus synchronous calls for a CLI. */
typedef struct hxs_session hxs_session;

typedef enum hxs_session_state {
        HXS_SESSION_STARTING = 0,       /* the sandbox is starting, the driver not ready yet */
        HXS_SESSION_IDLE,               /* ready, nothing running */
        HXS_SESSION_BUSY,               /* a cell or a file operation is running */
        HXS_SESSION_ENDED,              /* gone: the sandbox with everything in it */
        HXS_SESSION_STATE_MAX,
} hxs_session_state;

/* Why a session ended. */
typedef enum hxs_session_end {
        HXS_SESSION_LIVE = 0,           /* it has not */
        HXS_SESSION_DELETED,            /* hxs_session_end_now(HXS_SESSION_DELETED): its owner asked */
        HXS_SESSION_IDLE_TIMEOUT,       /* nothing ran for its idle timeout */
        HXS_SESSION_LIFETIME,           /* its lifetime is over */
        HXS_SESSION_CELL_TIMEOUT,       /* a cell did not stop when interrupted at its time limit */
        HXS_SESSION_MEMORY_LIMIT,       /* the driver was killed at the memory limit */
        HXS_SESSION_CRASHED,            /* the driver or the sandbox went away by itself, or never got ready */
        HXS_SESSION_PROTOCOL,           /* the driver said something that breaks the protocol */
        HXS_SESSION_SHUTDOWN,           /* the service is stopping */
        HXS_SESSION_END_MAX,
} hxs_session_end;

/* "starting", "idle", "busy", "ended"; NULL (live), "deleted", "idle_timeout",
 * "lifetime", "cell_timeout", "memory_limit", "crashed", "protocol", "shutdown". */
HXS_API const char *hxs_session_state_name(hxs_session_state state);
HXS_API const char *hxs_session_end_name(hxs_session_end end);

/* 0: the config's SESSION_IDLE_TIMEOUT / SESSION_LIFETIME; past SESSION_*_MAX:
 * HXS_ERR_INVALID naming "idle_timeout" / "lifetime". */
typedef struct hxs_session_limits {
        uint32_t idle_timeout_s;
        uint32_t lifetime_s;
} hxs_session_limits;

/* Starts a session of req's language, memory_mb (the memory limit of the whole
 * session), env, packages and files (written into the working directory as exec's);
 * its code, stdin, timeout and return globs are not used. Validated as exec's (400
 * naming the field); HXS_ERR_INVALID naming the backend when it cannot run sessions.
 * The request is copied. The session is HXS_SESSION_STARTING until its driver is
 * ready; cells and file operations may be queued at once. */
HXS_API int hxs_session_start(hxs_engine *engine, const hxs_request *req, const hxs_session_limits *lim,
                              hxs_session **ret, hxs_error *err);
/* An fd (epoll) that becomes readable whenever hxs_session_process has work. */
HXS_API int hxs_session_fd(const hxs_session *s);
/* Does what is ready without blocking: reads the driver, sends the next command, runs
 * the timers (cell time limit, idle, lifetime). Callbacks are called from here. */
HXS_API int hxs_session_process(hxs_session *s);
HXS_API hxs_session_state hxs_session_get_state(const hxs_session *s);

typedef struct hxs_session_info {
        hxs_session_state state;
        hxs_session_end end;            /* HXS_SESSION_LIVE until it ended */
        char end_message[240];          /* why, in plain words ("" while live) */
        hxs_language language;
        uint32_t memory_mb;
        uint64_t cells;                 /* cells run (begun) so far */
        int64_t created_at;             /* Unix time, seconds */
        int64_t expires_at;             /* when its lifetime ends */
        int64_t idle_expires_at;        /* when it ends if nothing runs meanwhile (0: busy or ended) */
        uint32_t idle_timeout_s, lifetime_s;
        char driver_version[64];        /* the language's version the driver reported */
} hxs_session_info;
HXS_API void hxs_session_get_info(const hxs_session *s, hxs_session_info *ret);

/* Ends it now (the sandbox is killed); why is kept unless it had already ended. What
 * is queued or running gets HXS_CELL_SESSION_ENDED (or -ESHUTDOWN) from a later
 * hxs_session_process, once the sandbox is gone; then the state is ENDED. */
HXS_API void hxs_session_end_now(hxs_session *s, hxs_session_end why);
/* The sandbox is gone and everything queued or running was answered: nothing more
 * comes from hxs_session_process. */
HXS_API bool hxs_session_finished(const hxs_session *s);
/* Kills anything left, reaps, removes; no callback is called. NULL is fine. */
HXS_API void hxs_session_free(hxs_session *s);

typedef enum hxs_cell_status {
        HXS_CELL_OK = 0,
        HXS_CELL_EXCEPTION,             /* the code raised (exception_json says what) */
        HXS_CELL_INTERRUPTED,           /* interrupted (at its time limit: error "timeout"); state kept */
        HXS_CELL_SESSION_ENDED,         /* the session ended before or while it ran */
        HXS_CELL_STATUS_MAX,
} hxs_cell_status;

/* "ok", "exception", "interrupted", "session_ended". */
HXS_API const char *hxs_cell_status_name(hxs_cell_status status);

/* A cell's result; its buffers are the holder's (hxs_cell_result_clear). */
typedef struct hxs_cell_result {
        hxs_cell_status status;
        uint64_t cell;                  /* its number in the session, from 1 */
        char *stdout_data;              /* head and tail, as an execution's (never NULL) */
        size_t stdout_len;
        char *stderr_data;
        size_t stderr_len;
        bool stdout_truncated, stderr_truncated;
        uint64_t stdout_omitted, stderr_omitted;
        uint64_t execution_time_ms;
        char *value_json;               /* the last expression's mime bundle (a JSON object); NULL: none */
        char *outputs_json;             /* JSON array of {"type":"display","data":{bundle}} (never NULL) */
        char *exception_json;           /* {"type","message","traceback"}; NULL: none */
        char error_type[32];            /* what the sandbox did: "" none, "timeout", "session_ended", "files" */
        char error_message[240];
        hxs_file *files;                /* output/ and return globs, as an execution's */
        size_t n_files;
} hxs_cell_result;
HXS_API void hxs_cell_result_clear(hxs_cell_result *res);

typedef struct hxs_cell_callbacks {
        hxs_output_fn output;           /* the cell's stdout (1) and stderr (2) as they come; NULL: none */
        /* each display() output as it comes: its mime bundle, JSON object text */
        void (*display)(void *userdata, const char *data_json, size_t len);
        /* the end: res is the callee's to keep or clear. Required. */
        void (*done)(void *userdata, hxs_cell_result *res);
        void *userdata;
} hxs_cell_callbacks;

/* Queues a cell: cell's code, timeout_s (0: DEFAULT_TIMEOUT, at most MAX_EXECUTION_TIME;
 * at it the cell is interrupted, and if it has not stopped 2 s later the session ends
 * with HXS_SESSION_CELL_TIMEOUT), files (in) and return globs, validated as exec's; its
 * language is the session's. *ret_handle names it for hxs_session_cancel. -EBUSY when
 * the session's queue is full (HXS_SESSION_QUEUE_MAX), -ESHUTDOWN when it has ended. */
#define HXS_SESSION_QUEUE_MAX 16
HXS_API int hxs_session_exec(hxs_session *s, const hxs_request *cell, const hxs_cell_callbacks *cb,
                             uint64_t *ret_handle, hxs_error *err);
/* No more callbacks for it (its caller went away): queued, it is dropped; running, it
 * is interrupted as by hxs_session_interrupt, unheard. The session and its state stay. */
HXS_API void hxs_session_cancel(hxs_session *s, uint64_t handle);
/* Interrupts a cell (handle 0: the running one), as "interrupt kernel" does: running,
 * its code gets the driver's interrupt (status as the driver says, "interrupted" for an
 * interrupted Python cell; error type "cancelled"), and if it has not stopped 2 s later
 * the session ends (HXS_SESSION_CELL_TIMEOUT); queued, it never reaches the driver and is
 * answered "interrupted" when its turn comes. From the next hxs_session_process.
 * -ENOENT: no such cell (or a file operation, which is not interrupted), or ended. */
HXS_API int hxs_session_interrupt(hxs_session *s, uint64_t handle);

/* File operations in a live session, relative to its working directory, with exec's
 * path rule (HXS_ERR_INVALID naming "path"); queued like cells. */
typedef struct hxs_session_entry {
        char *path;
        char type[8];                   /* "file", "dir", "other" */
        uint64_t size;
} hxs_session_entry;

typedef struct hxs_session_file_result {
        int status;                     /* 0; -ENOENT, -EINVAL... with error_* set; -ESHUTDOWN: the session ended */
        char error_type[64];            /* the driver's (FileNotFoundError...) */
        char error_message[240];
        char path[256];                 /* normalised */
        unsigned char *data;            /* get: the bytes (NULL when len is 0) */
        size_t len;
        uint64_t size;                  /* put: bytes written; get: the file's size */
        bool truncated;                 /* get: larger than MAX_FILE_BYTES, not kept */
        hxs_session_entry *entries;     /* list */
        size_t n_entries;
} hxs_session_file_result;
HXS_API void hxs_session_file_result_clear(hxs_session_file_result *res);

/* res is the callee's to keep or clear. */
typedef void (*hxs_session_file_fn)(void *userdata, hxs_session_file_result *res);
/* put: at most MAX_FILE_BYTES; get: files up to MAX_FILE_BYTES come back; list: path
 * "" or NULL is the working directory, at most MAX_RETURN_FILES entries. */
HXS_API int hxs_session_put_file(hxs_session *s, const char *path, const void *data, size_t len,
                                 hxs_session_file_fn fn, void *userdata, uint64_t *ret_handle, hxs_error *err);
HXS_API int hxs_session_get_file(hxs_session *s, const char *path, hxs_session_file_fn fn, void *userdata,
                                 uint64_t *ret_handle, hxs_error *err);
HXS_API int hxs_session_list_files(hxs_session *s, const char *path, hxs_session_file_fn fn, void *userdata,
                                   uint64_t *ret_handle, hxs_error *err);

/* Synchronous convenience (a CLI, MCP over stdio): wait for the driver to be ready (0,
 * or -ESHUTDOWN with err saying why it ended); run one cell; one file operation. */
HXS_API int hxs_session_wait_ready(hxs_session *s, hxs_error *err);
HXS_API int hxs_session_run(hxs_session *s, const hxs_request *cell, hxs_output_fn output, void *userdata,
                            hxs_cell_result *ret, hxs_error *err);
HXS_API int hxs_session_put_file_sync(hxs_session *s, const char *path, const void *data, size_t len,
                                      hxs_session_file_result *ret, hxs_error *err);
HXS_API int hxs_session_get_file_sync(hxs_session *s, const char *path, hxs_session_file_result *ret,
                                      hxs_error *err);
HXS_API int hxs_session_list_files_sync(hxs_session *s, const char *path, hxs_session_file_result *ret,
                                        hxs_error *err);

/* JSON text (the caller frees it; NULL on ENOMEM): the session object of the HTTP API
 * ({"id", "language", "state", "created_at", "expires_at", "idle_expires_at",
 * "memory_mb", "cells", "ended_reason", "ended_message"}) and a cell's result object
 * (with "session" when s is not NULL). */
HXS_API char *hxs_session_to_text(const hxs_session *s, const char *id, size_t *ret_len);
HXS_API char *hxs_cell_result_to_text(const hxs_cell_result *res, const hxs_session *s, const char *id,
                                      size_t *ret_len);

/* ---- JSON: the API's request and result objects ------------------------------- */

/* Parses a request body and validates it against cfg (hxs_request_validate).
 *
 * Strict: the top level must be an object; duplicate keys, unknown fields, trailing
 * garbage and invalid UTF-8 are rejected; "code" and "stdin" may contain U+0000,
 * nothing else may. Optional fields may be null (= not given).
 *
 * Returns 0 and a new request in *ret (the caller frees it with hxs_request_free), or
 * a negative errno with err filled: kind HXS_ERR_INVALID (400) and a message that
 * names the field, e.g. "timeout: must be an integer number of seconds". *ret is
 * written only on success. */
HXS_API int hxs_request_from_json(const char *body, size_t len, const hxs_config *cfg,
                                  hxs_request **ret, hxs_error *err);

/* The result object the API returns, as compact JSON text: stdout, stderr, exit_code,
 * execution_time_ms, memory_used_mb, timed_out, oom_killed, signal (null when 0),
 * stdout_truncated, stderr_truncated, stdout_omitted_bytes, stderr_omitted_bytes,
 * error (null when the program ended by itself, else {"type", "message"}), id (left
 * out when id is NULL). Output is bytes:
 * invalid UTF-8 is replaced with U+FFFD so the JSON is always valid. Sets *ret_len;
 * NULL on allocation failure; the caller frees it. */
HXS_API char *hxs_result_to_text(const hxs_result *res, const char *id, size_t *ret_len);

/* ---- host probe (doctor) ------------------------------------------------------ */

typedef enum hxs_probe_status {
        HXS_PROBE_OK = 0,
        HXS_PROBE_MISSING,    /* absent; a backend that needs it cannot run */
        HXS_PROBE_DEGRADED,   /* absent but optional */
        HXS_PROBE_STATUS_MAX,
} hxs_probe_status;

typedef struct hxs_probe_item {
        char name[48];
        hxs_probe_status status;
        char detail[400];     /* as long as an hxs_error's message, which it may quote */
} hxs_probe_item;

/* Checks the host features the backends need, and PACKAGES_WHEELHOUSE when it is set
 * (as the installer's users would find it: the engine refuses to start otherwise).
 * Fills up to max items, returns the count. *ret_backend is the backend
 * SANDBOX_BACKEND would pick, and *ret_runnable whether it can run sandboxes. */
HXS_API size_t hxs_probe_host(const hxs_config *cfg, hxs_probe_item *items, size_t max,
                              hxs_backend_kind *ret_backend, bool *ret_runnable);

/* ---- container check (serve, doctor) ----------------------------------------- */

/* A container runtime gives a process less than a host does (capabilities, a read-only
 * cgroup mount, a /proc with masked paths), and without it every execution would fail
 * while /health says ok: `serve` refuses to start, `doctor` says what is missing. The
 * list can run to a couple of kilobytes, more than a probe item's detail holds. */
typedef struct hxs_container_report {
        char why[80];         /* what shows this is a container; "" when it is none */
        size_t missing;       /* how many things sandboxes need are missing; 0 outside one */
        char lacks[2048];     /* those, "; "-separated, each naming the capability, mount or
                               * setting and how to provide it (docs/deploy.md) */
} hxs_container_report;

/* Fills *ret and returns true when this process is in a container that lacks something
 * sandboxes need. Inside a container it forks short-lived children to try the
 * namespaces and the /proc mount a sandbox makes; outside one it checks nothing. */
HXS_API bool hxs_container_check(const hxs_config *cfg, hxs_container_report *ret);

HXS_API const char *hxs_version(void);

#ifdef __cplusplus
}
#endif
#endif
