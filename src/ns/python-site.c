/* SPDX-License-Identifier: Apache-2.0 */
/* The sitecustomize a sandbox's Python gets (ns.h): the files generated at build time
 * from src/ns/charts.py and src/ns/sitecustomize.py (CMakeLists.txt). */
#include "ns/ns.h"

extern const char embed_charts_py[];
extern const unsigned char embed_charts_pyc[];
extern const size_t embed_charts_pyc_len;
extern const char embed_sitecustomize_py[];
extern const unsigned char embed_sitecustomize_pyc[];
extern const size_t embed_sitecustomize_pyc_len;
extern const char embed_sitecustomize_pyc_cache[];

ns_python_site ns_python_site_builtin(void)
{
        return (ns_python_site){
                .loader = embed_sitecustomize_py,
                .hooks = embed_charts_py,
                .hooks_pyc = embed_charts_pyc,
                .hooks_pyc_len = embed_charts_pyc_len,
                .loader_pyc = embed_sitecustomize_pyc,
                .loader_pyc_len = embed_sitecustomize_pyc_len,
                .loader_cache = embed_sitecustomize_pyc_cache,
        };
}
