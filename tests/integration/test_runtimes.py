"""The runtime for data work: every package of the runtime manifest (scripts/runtimes.txt)
imports in the sandbox, cold and warm; matplotlib and seaborn draw to a file with no
display; GET /api/v1/runtimes and /health report the versions the host's dpkg and
interpreters report for the root the sandbox uses (the host's); a root that lacks a
listed distribution is unhealthy until it has it; doctor lists them all.

Run: /usr/bin/python3 -m pytest tests/integration/test_runtimes.py -q
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Dict, Iterator, List, Optional

import pytest

from conftest import BIN, ROOT, http_request, post_exec, wait_for

MANIFEST = ROOT / "scripts" / "runtimes.txt"
HANG = 180.0  # only detects hangs: importing everything is slow on a busy 2-core VM


def manifest() -> List[List[Optional[str]]]:
    """[language, Debian package, distribution or None, import or None] per line."""
    rows = []
    for line in MANIFEST.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            assert len(words) in (2, 4), line
            rows.append(words + [None] * (4 - len(words)))
    return rows


def distributions() -> List[List[str]]:
    return [r for r in manifest() if r[2]]


def run(url: str, code: str, env_vars: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    body: Dict[str, Any] = {"code": code, "language": "python", "timeout": 30, "memory_mb": 512}
    if env_vars:
        body["env_vars"] = env_vars
    status, _, res = post_exec(url, body, timeout=HANG)
    assert status == 200, res
    return res


def wait_warm(url: str) -> None:
    def ready() -> bool:
        warm = http_request(url, "GET", "/health", timeout=30)[2].get("warm", {})
        return warm.get("enabled") and warm["templates_ready"] == warm["templates_total"] > 0
    wait_for(ready, 90, "the warm templates to be ready", interval=0.5)


# cold: a variable only interpreter start-up reads sends an execution cold (template.h)
COLD = {"PYTHONHASHSEED": "0"}

IMPORT_ALL = r'''
import importlib, importlib.metadata, json, sys
mods = %s
versions = {}
for dist, mod in mods:
    importlib.import_module(mod)
    versions[dist] = importlib.metadata.version(dist)
print(json.dumps({"warm": "_hxs_zygote" in sys.modules, "versions": versions}))
'''


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_every_listed_package_imports(service_url: str, warm: bool) -> None:
    mods = [(r[2], r[3]) for r in distributions()]
    assert {"matplotlib", "seaborn", "scikit-learn", "statsmodels", "sympy", "networkx", "Pillow",
            "openpyxl", "lxml", "beautifulsoup4", "tabulate", "numpy", "pandas", "scipy"} <= {d for d, _ in mods}
    if warm:
        wait_warm(service_url)
    res = run(service_url, IMPORT_ALL % repr(mods), None if warm else COLD)
    assert res["exit_code"] == 0, res["stderr"]
    assert res["stderr"] == "", res["stderr"]  # no warning, no fontconfig complaint
    out = json.loads(res["stdout"])
    assert out["warm"] is warm, out
    _, _, rt = http_request(service_url, "GET", "/api/v1/runtimes", timeout=30)
    served = {p["name"]: p["version"] for p in rt["runtimes"][0]["packages"]}
    assert out["versions"] == served  # what the sandbox imports is what the API says


# As a model writes it: nothing about backends, displays or config directories.
AS_WRITTEN = r'''
import matplotlib.pyplot as plt
plt.plot([1, 2])
plt.savefig('x.png')
'''

CHART = AS_WRITTEN + r'''
import os, struct, sys
import matplotlib
import pandas as pd
import seaborn as sns
df = pd.DataFrame({"x": range(20), "y": [i * i for i in range(20)], "g": ["a", "b"] * 10})
ax = sns.lineplot(data=df, x="x", y="y", hue="g")
ax.set_title("Quadrat – ½ µ")  # non-ASCII through the default font
ax.figure.savefig("chart.png", dpi=80)
for name in ("x.png", "chart.png"):
    data = open(name, "rb").read()
    w, h = struct.unpack(">II", data[16:24])
    print(name, len(data), data[:8].hex(), data[12:16].decode(), w, h)
print("backend", matplotlib.get_backend(), "rc", matplotlib.matplotlib_fname())
'''


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_matplotlib_and_seaborn_save_a_png_without_a_display(service_url: str, warm: bool) -> None:
    if warm:
        wait_warm(service_url)
    res = run(service_url, CHART, None if warm else COLD)
    assert res["exit_code"] == 0, res["stderr"]
    assert res["stderr"] == "", res["stderr"]  # no missing-glyph or font-cache warning
    lines = res["stdout"].splitlines()
    pngs = [l.split() for l in lines if l.endswith(tuple("0123456789"))]
    assert [p[0] for p in pngs] == ["x.png", "chart.png"], res["stdout"]
    for name, size, magic, chunk, w, h in pngs:
        assert magic == "89504e470d0a1a0a" and chunk == "IHDR", (name, magic, chunk)
        assert int(size) > 1000 and int(w) > 100 and int(h) > 100, (name, size, w, h)
    assert "backend agg rc /etc/matplotlibrc" in lines, res["stdout"]


def dpkg_version(package: str) -> str:
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def upstream(debian: str) -> str:
    return re.sub(r"^\d+:", "", debian).rsplit("-", 1)[0]


def interpreter_versions() -> Dict[str, str]:
    """What the host's interpreters (the sandbox's root is the host's) say of themselves."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    out = lambda cmd: subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, timeout=60).stdout
    return {"python": out(["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"]).strip(),
            "javascript": out(["/usr/bin/node", "--version"]).strip().lstrip("v"),
            "bash": re.search(r"version (\d+\.\d+\.\d+)", out(["/usr/bin/bash", "--version"])).group(1)}


def test_runtimes_endpoint_reports_the_roots_versions(service_url: str, openapi) -> None:
    status, hdrs, rt = http_request(service_url, "GET", "/api/v1/runtimes", timeout=30)
    openapi.check("GET", "/api/v1/runtimes", status, hdrs, rt)
    assert status == 200 and rt["backend"] == "namespaces", rt
    assert [r["language"] for r in rt["runtimes"]] == ["python", "javascript", "bash"]
    rows = manifest()
    interps = interpreter_versions()
    for r in rt["runtimes"]:
        lang = r["language"]
        mine = [row for row in rows if row[0] == lang]
        assert [d["name"] for d in r["debian_packages"]] == [row[1] for row in mine]
        for d in r["debian_packages"]:
            assert d["version"] == dpkg_version(d["name"]), d
        assert r["debian_package"] == mine[0][1] and r["debian_version"] == dpkg_version(mine[0][1])
        assert r["version"] == upstream(r["debian_version"]) == interps[lang], (r, interps)
        assert [(p["name"], p["import"], p["debian_package"]) for p in r["packages"]] == \
            [(row[2], row[3], row[1]) for row in mine if row[2]]
        for p in r["packages"]:
            assert p["debian_version"] == dpkg_version(p["debian_package"]), p
            # Debian's upstream version carries the distribution's (pandas 1.5.3+dfsg: 1.5.3)
            assert p["version"] and upstream(p["debian_version"]).startswith(p["version"].split("+")[0]), p
    status, hdrs, h = http_request(service_url, "GET", "/health", timeout=30)
    openapi.check("GET", "/health", status, hdrs, h)
    assert h["runtimes"] == {r["language"]: r["version"] for r in rt["runtimes"]}
    status, hdrs, res = http_request(service_url, "POST", "/api/v1/runtimes", timeout=30)
    assert status == 405 and "GET" in hdrs.get("allow", ""), (status, hdrs)


@pytest.fixture
def partial_root() -> Iterator[str]:
    """A root that passes the interpreter check (empty files) and whose dist-packages
    holds every listed distribution but matplotlib, with a dpkg database of its own.
    Nothing runs in it: only /health and /api/v1/runtimes read it."""
    top = tempfile.mkdtemp(prefix="hxs-it-partial-root-")
    os.chmod(top, 0o755)
    for exe in ("python3", "node", "bash"):
        os.makedirs(os.path.join(top, "usr/bin"), exist_ok=True)
        open(os.path.join(top, "usr/bin", exe), "w").close()
    site = os.path.join(top, "usr/lib/python3/dist-packages")
    os.makedirs(site)
    for _, _, dist, _ in distributions():
        if dist != "matplotlib":
            os.makedirs(os.path.join(site, "%s-7.0.1.dist-info" % dist.replace("-", "_")))
    os.makedirs(os.path.join(top, "var/lib/dpkg"))
    with open(os.path.join(top, "var/lib/dpkg/status"), "w") as f:
        f.write("Package: python3\nStatus: install ok installed\nVersion: 3.99.1-2\n\n"
                "Package: nodejs\nStatus: deinstall ok config-files\nVersion: 99.0.0-1\n\n"
                "Package: python3-numpy\nStatus: install ok installed\nArchitecture: amd64\n"
                "Description: x\n more\nVersion: 1:7.0.1-3\n")
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_a_root_lacking_a_listed_distribution_is_unhealthy_until_it_has_it(start_service, openapi,
                                                                          partial_root: str) -> None:
    svc = start_service(env={"SANDBOX_ROOTFS": partial_root, "SANDBOX_WARM": "off"})
    status, hdrs, h = http_request(svc.url, "GET", "/health", timeout=30)
    openapi.check("GET", "/health", status, hdrs, h)
    assert status == 503 and h["status"] == "unhealthy", h
    assert "matplotlib (python3-matplotlib)" in h["message"] and "seaborn" not in h["message"], h
    assert h["runtimes"] == {"python": "3.99.1", "javascript": None, "bash": None}, h

    status, hdrs, rt = http_request(svc.url, "GET", "/api/v1/runtimes", timeout=30)
    openapi.check("GET", "/api/v1/runtimes", status, hdrs, rt)
    assert partial_root in rt["source"], rt
    py = rt["runtimes"][0]
    versions = {p["name"]: p["version"] for p in py["packages"]}
    assert versions.pop("matplotlib") is None and set(versions.values()) == {"7.0.1"}, versions
    debs = {d["name"]: d["version"] for d in py["debian_packages"]}
    assert debs["python3"] == "3.99.1-2" and debs["python3-numpy"] == "1:7.0.1-3", debs
    assert debs["python3-pandas"] is None  # not in that root's dpkg database
    assert rt["runtimes"][1]["debian_version"] is None  # config-files only: not installed

    os.makedirs(os.path.join(partial_root, "usr/lib/python3/dist-packages/matplotlib-7.0.1.egg-info"))
    wait_for(lambda: http_request(svc.url, "GET", "/health", timeout=30)[0] == 200, 30, "/health to recover")
    _, _, rt = http_request(svc.url, "GET", "/api/v1/runtimes", timeout=30)
    assert {p["name"]: p["version"] for p in rt["runtimes"][0]["packages"]}["matplotlib"] == "7.0.1"


def test_doctor_lists_every_runtime_package() -> None:
    env = dict(os.environ, SANDBOX_BACKEND="namespaces")
    r = subprocess.run([BIN, "doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=HANG)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for _, deb, dist, mod in distributions():
        want = re.compile(r"^ok +python: %s +\S+ \(import %s; Debian %s %s\)$"
                          % (re.escape(dist), re.escape(mod), re.escape(deb), re.escape(dpkg_version(deb))))
        assert any(want.match(l) for l in lines), (dist, r.stdout)
    for lang, exe in (("python", "python3"), ("javascript", "node"), ("bash", "bash")):
        assert any(re.match(r"^ok +%s +\d+\.\d+\.\d+ /usr/bin/%s \(Debian " % (lang, exe), l) for l in lines), r.stdout
