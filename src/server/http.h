/* SPDX-License-Identifier: Apache-2.0 */
/* The MHD access handler (http.c): routes, methods, bodies, responses. */
#pragma once

#include <microhttpd.h>
#include <stddef.h>

enum MHD_Result http_handler(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **req_cls);
void http_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                    enum MHD_RequestTerminationCode toe);
