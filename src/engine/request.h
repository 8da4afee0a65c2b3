/* SPDX-License-Identifier: Apache-2.0 */
/* The request model shared by the engine and its backends. */
#pragma once

#include "hexr-sandbox/sandbox.h"

typedef struct env_var {
        char *name;
        char *value;
} env_var;

/* A file to write into the working directory before the program starts: its bytes in
 * memory, or (fd >= 0) `size` bytes of an fd of ours, read from offset 0. */
typedef struct request_file {
        char *path;             /* as given; normalised by hxs_request_validate */
        unsigned char *data;
        size_t len;
        int fd;
        uint64_t size;
} request_file;

struct hxs_request {
        hxs_language language;
        char *code;
        size_t code_len;
        char *stdin_data;
        size_t stdin_len;
        uint32_t timeout_s;
        uint32_t memory_mb;
        env_var *env;
        size_t n_env, cap_env;
        char **packages;
        size_t n_packages, cap_packages;
        request_file *files;        /* files in (request-files.c) */
        size_t n_files, cap_files;
        char **return_globs;            /* files out, besides output/ */
        size_t n_globs, cap_globs;
        /* Library-internal (sessions), never from JSON: stdin is a queue fed while the
         * program runs (exec_stdin_write), its timeout is bounded by the caller (not
         * MAX_TIMEOUT), MAX_STREAM_BYTES does not end it, and it always starts cold. */
        bool interactive;
        char **argv;                    /* NULL-terminated, argv[0] absolute: exec'd instead
                                         * of the language's interpreter (NULL: that one) */
};

/* request-files.c: the files in and the return globs of a request. */
#define REQUEST_PATH_MAX 255    /* bytes of a file's path, normalised */
#define REQUEST_GLOBS_MAX 64

/* The path rule: relative, normalised ("a//b/./c" -> "a/b/c") into out (at least
 * REQUEST_PATH_MAX + 1 bytes); -EINVAL with *why when absolute, empty, naming no file,
 * with "..", a control character, or longer than REQUEST_PATH_MAX. */
int request_path_normalize(const char *in, char *out, size_t out_size, const char **why);
/* The files' paths normalised in place, collisions, counts and sizes against cfg. */
int request_files_validate(hxs_request *req, const hxs_config *cfg, hxs_error *err);
int request_files_dup(const hxs_request *src, hxs_request *dst);
void request_files_free(hxs_request *req);
/* The bytes the files hold in all. */
uint64_t request_files_bytes(const hxs_request *req);

/* Makes req interactive, running argv (copied; NULL: the language's interpreter). */
int request_set_interactive(hxs_request *req, const char *const *argv);

/* Deep copy (for an execution to own its request). */
int request_dup(const hxs_request *src, hxs_request **ret);
