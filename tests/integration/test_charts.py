"""Charts without changing the code (issue 14): matplotlib's show() and the figures
left open at exit come back as output/figure-N.png, cold (the CLI) and warm (the
service's templates); a pandas df.plot() + plt.show() program works as written, and a
program that never imports pyplot pays nothing for it."""

from __future__ import annotations

import base64

import pytest

from conftest import post_exec
from hxstest.canary import run_exec
from hxstest.output import wait_warm_ready

PNG = b"\x89PNG\r\n\x1a\n"

DF_PLOT = """
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"month": [1, 2, 3, 4], "sales": [10, 14, 9, 20]})
print(df.describe().loc["mean", "sales"])
df.plot(x="month", y="sales")
plt.show()
"""

OPEN_AT_EXIT = """
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.show()
fig = plt.figure()
plt.bar(["a", "b"], [3, 5])
plt.figure()
plt.scatter([1, 2], [2, 1])
print("done")
"""


def pngs(files):
    out = {}
    for f in files:
        assert f["encoding"] == "base64" and f["mime"] == "image/png", f
        data = base64.b64decode(f["content"])
        assert data.startswith(PNG) and len(data) == f["size"], f["path"]
        out[f["path"]] = data
    return out


def test_df_plot_and_show_return_a_png() -> None:
    res = run_exec(DF_PLOT, "python", timeout=30)
    assert res.exit_code == 0 and res.stdout == "13.25\n", res.describe()
    assert "non-interactive" not in res.stderr, res.describe()
    assert list(pngs(res["files"])) == ["output/figure-1.png"], res.describe()


def test_show_then_figures_open_at_exit() -> None:
    res = run_exec(OPEN_AT_EXIT, "python", timeout=30)
    assert res.exit_code == 0 and res.stdout == "done\n", res.describe()
    assert list(pngs(res["files"])) == ["output/figure-1.png", "output/figure-2.png",
                                         "output/figure-3.png"], res.describe()


def test_a_program_saving_its_own_figure_keeps_its_name() -> None:
    code = ("import os, matplotlib.pyplot as plt\nos.makedirs('output', exist_ok=True)\n"
            "plt.plot([1]); plt.savefig('output/mine.png'); plt.close()\n")
    res = run_exec(code, "python", timeout=30)
    assert list(pngs(res["files"])) == ["output/mine.png"], res.describe()


def test_no_pyplot_no_files() -> None:
    res = run_exec("import sys; print('matplotlib' in sys.modules)", "python")
    assert res.stdout == "False\n" and res["files"] == [], res.describe()


# The hooks come compiled at build time for this Python (no .pyc can be written in the
# read-only root, so their source would be compiled at every cold start), and the
# sitecustomize that loads them leaves nothing behind in its module.
HOOKS_PRECOMPILED = r"""
import importlib.util, sys, sitecustomize
d = "/etc/python%d.%d/" % sys.version_info[:2]
print(open(d + "hxs_charts.pyc", "rb").read(4) == importlib.util.MAGIC_NUMBER)
print(sorted(k for k in vars(sitecustomize) if not k.startswith("__")))
print(sys.meta_path[0].__qualname__)
"""


def test_hooks_are_precompiled_for_this_python() -> None:
    res = run_exec(HOOKS_PRECOMPILED, "python")
    assert res.stdout.splitlines() == ["True", "['sys']", "_hxs_charts_install.<locals>._HxsPyplotHook"], \
        res.describe()


# ... and so is the sitecustomize that loads them: Python looks for its bytecode in
# /usr's __pycache__, where the sandbox shows ours (read-only, taken without reading the
# source), so a cold start compiles nothing of ours. Needs the host's file there to
# show ours over.
SITE_CACHE = "/usr/lib/python3.11/__pycache__/sitecustomize.cpython-311.pyc"


def test_sitecustomize_is_loaded_from_its_bytecode() -> None:
    import os
    import sys
    if sys.version_info[:2] != (3, 11) or not os.path.isfile(SITE_CACHE):
        pytest.skip("this host has no %s for the sandbox to show its own over" % SITE_CACHE)
    res = run_exec("import sitecustomize; print(sitecustomize.__cached__)", "python",
                   env_vars={"PYTHONVERBOSE": "1"})
    assert res.exit_code == 0 and res.stdout == SITE_CACHE + "\n", res.describe()
    assert "# code object from '%s'" % SITE_CACHE in res.stderr, res.describe()
    assert "# code object from /usr/lib/python3.11/sitecustomize.py" not in res.stderr, res.describe()
    # ours, not the host's, and the sandbox cannot change it
    res = run_exec("import sitecustomize, importlib.util as u\n"
                   "b = open(sitecustomize.__cached__, 'rb').read()\n"
                   "src = open(sitecustomize.__file__, 'rb').read()\n"
                   "print(b[4:8] == (1).to_bytes(4, 'little'), b[8:16] == u.source_hash(src))\n"
                   "try:\n    open(sitecustomize.__cached__, 'ab')\nexcept OSError as e:\n    print(e.errno)\n",
                   "python")
    assert res.stdout == "True True\n30\n", res.describe()


def test_charts_warm(service_url) -> None:
    wait_warm_ready(service_url)
    for _ in range(3):  # warm templates serve some of these once ready
        status, _, res = post_exec(service_url, {"code": DF_PLOT, "timeout": 30})
        assert status == 200 and res["exit_code"] == 0, res
        assert res["stdout"] == "13.25\n", res
        assert list(pngs(res["files"])) == ["output/figure-1.png"], res
