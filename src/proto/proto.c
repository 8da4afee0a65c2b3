/* SPDX-License-Identifier: Apache-2.0 */
#include "proto/proto.h"

#include <errno.h>
#include <string.h>

static bool header_valid(const uint8_t *h) {
        uint32_t len = hxp_load_u32(h + 4);

        return h[0] == HXP_MAGIC && h[1] == HXP_VERSION && h[2] >= HXP_HELLO &&
               h[2] < HXP_TYPE_MAX && h[3] == 0 && len <= HXP_PAYLOAD_MAX;
}

long hxp_parse(const uint8_t *buf, size_t len, hxp_frame *ret) {
        /* Check what is there before waiting for more: a bad first byte must not
         * make the reader wait for a header that will never be valid. */
        if (len >= 1 && buf[0] != HXP_MAGIC)
                return -EBADMSG;
        if (len >= 2 && buf[1] != HXP_VERSION)
                return -EBADMSG;
        if (len >= 3 && (buf[2] < HXP_HELLO || buf[2] >= HXP_TYPE_MAX))
                return -EBADMSG;
        if (len >= 4 && buf[3] != 0)
                return -EBADMSG;
        if (len < HXP_HEADER_SIZE)
                return 0;
        if (!header_valid(buf))
                return -EBADMSG;
        uint32_t plen = hxp_load_u32(buf + 4);
        if (len - HXP_HEADER_SIZE < plen)
                return 0;
        ret->type = buf[2];
        ret->len = plen;
        ret->payload = buf + HXP_HEADER_SIZE;
        return (long)(HXP_HEADER_SIZE + plen);
}

size_t hxp_resync(const uint8_t *buf, size_t len) {
        if (len == 0)
                return 0;
        const uint8_t *m = memchr(buf + 1, HXP_MAGIC, len - 1);
        return m ? (size_t)(m - buf) : len;
}

int hxp_header(uint8_t out[HXP_HEADER_SIZE], hxp_type type, size_t payload_len) {
        if (type < HXP_HELLO || type >= HXP_TYPE_MAX || payload_len > HXP_PAYLOAD_MAX)
                return -EINVAL;
        out[0] = HXP_MAGIC;
        out[1] = HXP_VERSION;
        out[2] = (uint8_t)type;
        out[3] = 0;
        hxp_store_u32(out + 4, (uint32_t)payload_len);
        return 0;
}

void hxp_builder_init(hxp_builder *b, uint8_t *buf, size_t size) {
        *b = (hxp_builder){ .buf = buf, .size = size };
}

void hxp_put_bytes(hxp_builder *b, uint16_t tag, const void *value, size_t len) {
        if (b->overflow || len > UINT32_MAX || b->size - b->len < HXP_TLV_HEADER ||
            b->size - b->len - HXP_TLV_HEADER < len) {
                b->overflow = true;
                return;
        }
        uint8_t *p = b->buf + b->len;
        p[0] = (uint8_t)tag;
        p[1] = (uint8_t)(tag >> 8);
        hxp_store_u32(p + 2, (uint32_t)len);
        if (len > 0)
                memcpy(p + HXP_TLV_HEADER, value, len);
        b->len += HXP_TLV_HEADER + len;
}

void hxp_put_u32(hxp_builder *b, uint16_t tag, uint32_t value) {
        uint8_t v[4];

        hxp_store_u32(v, value);
        hxp_put_bytes(b, tag, v, sizeof(v));
}

void hxp_tlv_begin(hxp_tlv_iter *it, const uint8_t *payload, size_t len) {
        *it = (hxp_tlv_iter){ .p = payload, .left = len };
}

int hxp_tlv_next(hxp_tlv_iter *it, uint16_t *ret_tag, const uint8_t **ret_value,
                 uint32_t *ret_len) {
        if (it->left == 0)
                return 0;
        if (it->left < HXP_TLV_HEADER)
                return -EBADMSG;
        uint32_t vlen = hxp_load_u32(it->p + 2);
        if (it->left - HXP_TLV_HEADER < vlen)
                return -EBADMSG;
        *ret_tag = (uint16_t)(it->p[0] | it->p[1] << 8);
        *ret_value = it->p + HXP_TLV_HEADER;
        *ret_len = vlen;
        it->p += HXP_TLV_HEADER + vlen;
        it->left -= HXP_TLV_HEADER + vlen;
        return 1;
}

int hxp_tlv_u32(const uint8_t *value, uint32_t len, uint32_t *ret) {
        if (len != 4)
                return -EBADMSG;
        *ret = hxp_load_u32(value);
        return 0;
}

int hxp_tlv_u64(const uint8_t *value, uint32_t len, uint64_t *ret)
{
        if (len != 8)
                return -EBADMSG;
        *ret = hxp_load_u32(value) | (uint64_t)hxp_load_u32(value + 4) << 32;
        return 0;
}

void hxp_put_u64(hxp_builder *b, uint16_t tag, uint64_t value)
{
        uint8_t v[8];

        hxp_store_u32(v, (uint32_t)value);
        hxp_store_u32(v + 4, (uint32_t)(value >> 32));
        hxp_put_bytes(b, tag, v, sizeof(v));
}

/* A path or a glob: 1..HXP_PATH_MAX bytes, no NUL (the reader makes a C string). */
static bool name_valid(const uint8_t *v, uint32_t len)
{
        return len > 0 && len <= HXP_PATH_MAX && !memchr(v, '\0', len);
}

static bool env_valid(const uint8_t *v, uint32_t len) {
        const uint8_t *eq = memchr(v, '=', len);

        /* NAME=value: a non-empty name, no NUL anywhere (execve would cut there) */
        return eq && eq != v && !memchr(v, '\0', len);
}

int hxp_run_decode(const uint8_t *payload, size_t len, hxp_run *ret) {
        uint32_t *fields[HXP_RUN_TAG_MAX] = {
                [HXP_RUN_LANGUAGE] = &ret->language,   [HXP_RUN_TIMEOUT_MS] = &ret->timeout_ms,
                [HXP_RUN_MEMORY_MB] = &ret->memory_mb, [HXP_RUN_PIDS_MAX] = &ret->pids_max,
                [HXP_RUN_NOFILE] = &ret->nofile,       [HXP_RUN_TMPFS_MB] = &ret->tmpfs_mb,
                [HXP_RUN_OUTPUT_MAX] = &ret->output_max, [HXP_RUN_CODE_LEN] = &ret->code_len,
                [HXP_RUN_STDIN_LEN] = &ret->stdin_len,
        };
        bool seen[HXP_RUN_TAG_MAX] = { false };
        bool seen_opt[HXP_RUN_TAG_MAX - HXP_RUN_FILES] = { false };
        hxp_tlv_iter it;
        uint16_t tag;
        const uint8_t *v;
        uint32_t vlen;
        int r;

        ret->n_env = ret->n_globs = ret->n_argv = 0;
        ret->interactive = 0;
        ret->files = ret->return_files = 0;
        ret->files_bytes = ret->return_bytes = 0;
        hxp_tlv_begin(&it, payload, len);
        while ((r = hxp_tlv_next(&it, &tag, &v, &vlen)) > 0) {
                if (tag == HXP_RUN_ENV) {
                        if (ret->n_env >= HXP_ENV_MAX || !env_valid(v, vlen))
                                return -EBADMSG;
                        ret->env[ret->n_env] = v;
                        ret->env_len[ret->n_env++] = vlen;
                        continue;
                }
                if (tag == HXP_RUN_RETURN_GLOB) {
                        if (ret->n_globs >= HXP_GLOBS_MAX || !name_valid(v, vlen))
                                return -EBADMSG;
                        ret->glob[ret->n_globs] = v;
                        ret->glob_len[ret->n_globs++] = vlen;
                        continue;
                }
                if (tag == HXP_RUN_ARGV) {
                        if (ret->n_argv >= HXP_ARGV_MAX || vlen > HXP_ARG_MAX || memchr(v, '\0', vlen) ||
                            (ret->n_argv == 0 && (vlen == 0 || v[0] != '/')))
                                return -EBADMSG;
                        ret->argv[ret->n_argv] = v;
                        ret->argv_len[ret->n_argv++] = vlen;
                        continue;
                }
                if (tag == HXP_RUN_FILES || tag == HXP_RUN_RETURN_FILES || tag == HXP_RUN_INTERACTIVE) {
                        uint32_t *f = tag == HXP_RUN_FILES ? &ret->files
                                      : tag == HXP_RUN_INTERACTIVE ? &ret->interactive : &ret->return_files;
                        if (seen_opt[tag - HXP_RUN_FILES] || hxp_tlv_u32(v, vlen, f) < 0)
                                return -EBADMSG;
                        seen_opt[tag - HXP_RUN_FILES] = true;
                        continue;
                }
                if (tag == HXP_RUN_FILES_BYTES || tag == HXP_RUN_RETURN_BYTES) {
                        uint64_t *f = tag == HXP_RUN_FILES_BYTES ? &ret->files_bytes : &ret->return_bytes;
                        if (seen_opt[tag - HXP_RUN_FILES] || hxp_tlv_u64(v, vlen, f) < 0)
                                return -EBADMSG;
                        seen_opt[tag - HXP_RUN_FILES] = true;
                        continue;
                }
                if (tag == 0 || tag >= HXP_RUN_TAG_MAX || !fields[tag])
                        continue; /* a newer host's field */
                if (seen[tag] || hxp_tlv_u32(v, vlen, fields[tag]) < 0)
                        return -EBADMSG;
                seen[tag] = true;
        }
        if (r < 0)
                return r;
        for (int t = 1; t < HXP_RUN_TAG_MAX; t++)
                if (fields[t] && !seen[t])
                        return -EBADMSG;
        return ret->interactive <= 1 ? 0 : -EBADMSG;
}

int hxp_exit_decode(const uint8_t *payload, size_t len, hxp_exit *ret) {
        uint32_t *fields[HXP_EXIT_TAG_MAX] = {
                [HXP_EXIT_WAIT_STATUS] = &ret->wait_status, [HXP_EXIT_TIMED_OUT] = &ret->timed_out,
                [HXP_EXIT_OOM_KILLED] = &ret->oom_killed,   [HXP_EXIT_TIME_MS] = &ret->time_ms,
                [HXP_EXIT_MEMORY_KB] = &ret->memory_kb,
        };
        bool seen[HXP_EXIT_TAG_MAX] = { false };
        hxp_tlv_iter it;
        uint16_t tag;
        const uint8_t *v;
        uint32_t vlen;
        int r;

        *ret = (hxp_exit){ 0 };
        hxp_tlv_begin(&it, payload, len);
        while ((r = hxp_tlv_next(&it, &tag, &v, &vlen)) > 0) {
                if (tag == 0 || tag >= HXP_EXIT_TAG_MAX)
                        continue;
                if (seen[tag] || hxp_tlv_u32(v, vlen, fields[tag]) < 0)
                        return -EBADMSG;
                seen[tag] = true;
        }
        if (r < 0)
                return r;
        return seen[HXP_EXIT_WAIT_STATUS] ? 0 : -EBADMSG;
}

int hxp_file_decode(const uint8_t *payload, size_t len, hxp_file *ret)
{
        bool seen[HXP_FILE_TAG_MAX] = { false };
        hxp_tlv_iter it;
        uint16_t tag;
        const uint8_t *v;
        uint32_t vlen;
        int r;

        *ret = (hxp_file){ 0 };
        hxp_tlv_begin(&it, payload, len);
        while ((r = hxp_tlv_next(&it, &tag, &v, &vlen)) > 0) {
                if (tag == 0 || tag >= HXP_FILE_TAG_MAX)
                        continue;
                if (seen[tag])
                        return -EBADMSG;
                seen[tag] = true;
                switch ((hxp_file_tag)tag) {
                case HXP_FILE_PATH:
                        if (!name_valid(v, vlen))
                                return -EBADMSG;
                        ret->path = v;
                        ret->path_len = vlen;
                        break;
                case HXP_FILE_SIZE:
                        r = hxp_tlv_u64(v, vlen, &ret->size);
                        break;
                case HXP_FILE_TRUNCATED:
                        r = hxp_tlv_u32(v, vlen, &ret->truncated);
                        if (r == 0 && ret->truncated > 1)
                                r = -EBADMSG;
                        break;
                case HXP_FILE_LEN:
                        r = hxp_tlv_u64(v, vlen, &ret->len);
                        break;
                case HXP_FILE_TAG_MAX:
                        break;
                }
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        if (!seen[HXP_FILE_PATH] || !seen[HXP_FILE_SIZE])
                return -EBADMSG;
        if (!seen[HXP_FILE_LEN])
                ret->len = ret->truncated ? 0 : ret->size;
        if (ret->len > ret->size || (ret->truncated && ret->len > 0))
                return -EBADMSG;
        return 0;
}
