"""packages=: installing what the image lacks from a wheelhouse, in a sandbox, cached.

Every wheel used here is built by this file (pure Python, with Python's zipfile) into
a temporary wheelhouse; each service started here gets its own package cache in a
temporary directory. Nothing leaves loopback: the network test listens on 127.0.0.1
itself and checks that nothing reached it.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import pytest

from conftest import (BIN, Service, _launch, _stop_checked, free_port, get_metrics, http_request, post_exec,
                      safe_rmtree, wait_for)

UID_BASE = 1000000        # SANDBOX_UID_BASE's default
SANDBOX_USER = UID_BASE + 1000
FETCH_USER = UID_BASE + 3000
DEEP_LEVELS = 200


def build_wheel(house: Path, name: str, version: str, files: Dict[str, str],
                requires: Iterable[str] = (), extra_members: Optional[Dict[str, str]] = None) -> Path:
    """A minimal pure-Python wheel: the files, NAME-VER.dist-info/{METADATA,WHEEL,RECORD}."""
    dist = name.replace("-", "_")
    path = house / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires) + "\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, text in {**files, **(extra_members or {})}.items():
            z.writestr(member, text)
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hexr-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    os.chmod(path, 0o644)
    return path


@pytest.fixture(scope="module")
def wheelhouse() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="hxs-wheels-"))
    os.chmod(d, 0o755)  # the installer runs as an unprivileged user
    build_wheel(d, "hxs-alpha", "1.0", {"hxs_alpha/__init__.py": "VALUE = 'alpha-1.0'\n"})
    build_wheel(d, "hxs-alpha", "1.2", {"hxs_alpha/__init__.py": "VALUE = 'alpha-1.2'\n"})
    build_wheel(d, "hxs-beta", "2.0", {"hxs_beta/__init__.py": "import hxs_alpha\nVALUE = 'beta+' + hxs_alpha.VALUE\n"},
                requires=["hxs-alpha>=1.0,<1.1", "hxs-never-needed; extra == 'docs'",
                          "numpy>=1.0"])  # numpy: the image's own copy serves
    build_wheel(d, "hxs-gamma", "1.0", {"hxs_gamma/__init__.py": ""}, requires=["hxs-absent>=1"])
    # fails to install: a member that would land outside the install directory
    build_wheel(d, "hxs-evil", "1.0", {"hxs_evil/__init__.py": ""}, extra_members={"../hxs_escaped.py": "x = 1\n"})
    # more that must not install: a symbolic link, files outside site-packages, a
    # file written twice, a 20 MB file (compressed to almost nothing) for a 16 MB limit
    link = zipfile.ZipInfo("hxs_link/passwd")
    link.external_attr = (0o120777 << 16)
    build_wheel(d, "hxs-link", "1.0", {"hxs_link/__init__.py": ""})
    with zipfile.ZipFile(d / "hxs_link-1.0-py3-none-any.whl", "a") as z:
        z.writestr(link, "/etc/passwd")
    build_wheel(d, "hxs-headers", "1.0", {"hxs_headers/__init__.py": "",
                                          "hxs_headers-1.0.data/headers/x.h": "int x;\n"})
    build_wheel(d, "hxs-twice-a", "1.0", {"hxs_twice/__init__.py": "A = 1\n"})
    build_wheel(d, "hxs-twice-b", "1.0", {"hxs_twice/__init__.py": "B = 1\n"}, requires=["hxs-twice-a"])
    build_wheel(d, "hxs-bomb", "1.0", {"hxs_bomb/__init__.py": "", "hxs_bomb/zeros": "\0" * (20 << 20)})
    build_wheel(d, "hxs-bigfile", "1.0", {"hxs_bigfile/__init__.py": "", "hxs_bigfile/zeros": "\0" * (2 << 20)})
    # sets that shadow what a warm template has already imported
    build_wheel(d, "hxs-shadow-stdlib", "1.0", {"datetime.py": "SHADOW = 'stdlib'\n"})
    build_wheel(d, "hxs-shadow-dist", "1.0", {"pytz/__init__.py": "SHADOW = 'dist'\n"})
    # a distribution whose import tries the network
    build_wheel(d, "hxs-net", "1.0", {"hxs_net/__init__.py": (
        "import os, socket\n"
        "def probe(port):\n"
        "    s = socket.socket(); s.settimeout(2)\n"
        "    try:\n"
        "        s.connect(('127.0.0.1', port)); return 'connected'\n"
        "    except OSError as e:\n"
        "        return 'blocked'\n"
        "    finally:\n"
        "        s.close()\n"
        "IFACES = sorted(n for _, n in socket.if_nameindex())\n")})
    # slow to install: many modules to unpack and byte-compile
    build_wheel(d, "hxs-heavy", "1.0", {**{"hxs_heavy/__init__.py": "N = 1000\n"},
                                        **{f"hxs_heavy/m{i}.py": f"X = {i}\n" + "Y = [1, 2, 3]\n" * 300
                                           for i in range(1000)}})
    for name in ("hxs-conc", "hxs-other"):
        build_wheel(d, name, "1.0", {f"{name.replace('-', '_')}/__init__.py": f"NAME = {name!r}\n"})
    # 10 MB each once installed, for the cache's size limit
    for name in ("hxs-big-a", "hxs-big-b"):
        mod = name.replace("-", "_")
        build_wheel(d, name, "1.0", {f"{mod}/__init__.py": "import os\nHERE = os.path.dirname(__file__)\n",
                                     f"{mod}/blob.txt": os.urandom(5 << 20).hex()})
    # a module 200 directories down (deeper than any fixed limit of a recursive walk)
    deep = "/".join(["d"] * DEEP_LEVELS)
    build_wheel(d, "hxs-deep", "1.0", {"hxs_deep/__init__.py": "X = 1\n", f"hxs_deep/{deep}/leaf.txt": "leaf\n"})
    # the same, then slow to install: killed mid-install once the deep part is written
    build_wheel(d, "hxs-deep-heavy", "1.0", {f"hxs_deep_heavy/{deep}/leaf.txt": "leaf\n",
                                             **{f"hxs_deep_heavy/m{i}.py": "Y = [1, 2, 3]\n" * 300
                                                for i in range(1000)}})
    # many empty files: nothing in bytes, everything in inodes
    for name, n in (("hxs-tiny-a", 1200), ("hxs-tiny-b", 1200), ("hxs-tiny-c", 2500)):
        mod = name.replace("-", "_")
        build_wheel(d, name, "1.0", {f"{mod}/__init__.py": "", **{f"{mod}/f{i:05d}": "" for i in range(n)}})
    yield d
    safe_rmtree(str(d))


def start(wheelhouse: Path, cache: Optional[Path] = None, **env: str) -> Tuple[Service, Path]:
    if cache is None:
        root = Path(tempfile.mkdtemp(prefix="hxs-pkgcache-"))
        os.chmod(root, 0o755)  # the sandbox's root must reach the sets it binds
        cache = root / "cache"
    full = {"PACKAGES_WHEELHOUSE": str(wheelhouse) if str(wheelhouse) != "." else "",
            "PACKAGES_CACHE_DIR": str(cache), **env}
    return _launch(full, None), cache


@pytest.fixture(scope="module")
def svc(wheelhouse: Path) -> Iterator[Tuple[Service, Path]]:
    s, cache = start(wheelhouse)
    yield s, cache
    stop_and_clean(s, cache)


def stop_and_clean(s: Service, cache: Path) -> None:
    """Stops s (failing the test if it did not exit 0) and removes its cache either way.
    A service that stopped cleanly leaves nothing in the cache's tmp/."""
    try:
        _stop_checked(s)
        left = sorted(p.name for p in (cache / "tmp").iterdir()) if (cache / "tmp").exists() else []
        assert left == [], f"left in {cache}/tmp after a clean stop: {left}"
    finally:
        safe_rmtree(str(cache.parent))


def run(s: Service, body: Dict[str, Any], expect: int = 200) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    status, headers, reply = post_exec(s.url, body)
    assert status == expect, (status, reply)
    return reply, s.exec_log(headers["x-request-id"])


def sets(cache: Path) -> List[str]:
    return sorted(p.name for p in (cache / "sets").iterdir())


def staged(cache: Path) -> List[str]:
    """Install and download directories in the cache: tmp/<engine>/<n>, each engine's
    (a live or a dead one's) except its trash, which its workers are emptying."""
    found = []
    for d in (cache / "tmp").iterdir():
        if not d.is_dir() or d.is_symlink():
            found.append(d.name)
            continue
        found += [f"{d.name}/{e.name}" for e in d.iterdir() if e.name != "trash"]
    return sorted(found)


def anything_left(cache: Path) -> List[str]:
    """Everything below each engine's tmp/<engine>/, its trash included."""
    found = []
    for d in (cache / "tmp").iterdir():
        if not d.is_dir() or d.is_symlink():
            found.append(d.name)
            continue
        for e in d.iterdir():
            found += [f"{d.name}/trash/{t.name}" for t in e.iterdir()] if e.name == "trash" else [f"{d.name}/{e.name}"]
    return sorted(found)


def test_in_image_costs_nothing(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    before = sets(cache)
    reply, log = run(s, {"code": "import numpy; print('ok')", "packages": ["numpy", "pandas>=1.0"]})
    assert reply["stdout"] == "ok\n" and reply["exit_code"] == 0
    assert log["packages"] == "image"
    assert sets(cache) == before


def test_install_then_import(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    reply, log = run(s, {"code": "import hxs_alpha, importlib.metadata as m\n"
                                 "print(hxs_alpha.VALUE, m.version('hxs-alpha'))",
                         "packages": ["hxs-alpha"]})
    assert reply["stdout"] == "alpha-1.2 1.2\n", reply  # the newest that fits
    assert reply["stderr"] == ""  # the installer's output is not the program's
    assert log["packages"] in ("installed", "cached")
    assert staged(cache) == []
    # written inside the installer's sandbox, as its unprivileged user, not by the host
    files = [p for p in (cache / "sets").rglob("hxs_alpha/__init__.py")]
    assert files and all(p.stat().st_uid == SANDBOX_USER for p in files)


def test_dependencies_are_resolved(svc: Tuple[Service, Path]) -> None:
    s, _ = svc
    reply, _ = run(s, {"code": "import hxs_beta; print(hxs_beta.VALUE)", "packages": ["HXS_Beta==2.0"]})
    assert reply["stdout"] == "beta+alpha-1.0\n", reply  # hxs-alpha<1.1 from beta's metadata


def test_second_request_is_a_cache_hit(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    body = {"code": "import hxs_other; print(hxs_other.NAME)", "packages": ["hxs-other"]}
    first, log1 = run(s, body)
    n = len(sets(cache))
    second, log2 = run(s, body)
    assert first["stdout"] == second["stdout"] == "hxs-other\n"
    assert log1["packages"] == "installed"
    assert log2["packages"] == "cached"  # no install step the second time
    assert len(sets(cache)) == n
    # same requirement, other spelling and order: the same cached set
    third, log3 = run(s, {**body, "packages": ["HXS.Other"]})
    assert third["stdout"] == "hxs-other\n" and log3["packages"] == "cached"


def test_metrics_count_where_packages_came_from(svc: Tuple[Service, Path]) -> None:
    s, _ = svc
    before = get_metrics(s.url)
    body = {"code": "import hxs_alpha", "packages": ["hxs-alpha>=1.1"]}
    run(s, body)  # installed (a new request key; its set may exist, the install step runs)
    run(s, body)
    run(s, {"code": "import numpy", "packages": ["numpy"]})
    after = get_metrics(s.url)
    for source in ("installed", "cached", "image"):
        key = f'hexr_sandbox_packages_total{{source="{source}"}}'
        assert after[key] - before[key] == 1, (source, before, after)


@pytest.mark.parametrize("req", [
    "hxs-alpha @ file:///etc/passwd",
    "hxs-alpha @ https://127.0.0.1:1/x.whl",
    "--index-url=http://127.0.0.1:1/simple",
    "-i http://127.0.0.1:1/simple",
    "--extra-index-url",
    "-e .",
    "./hxs_alpha-1.2-py3-none-any.whl",
    "/tmp/x.whl",
    "../hxs-alpha",
    "hxs-alpha; python_version > '3'",
    "hxs-alpha==1.0 --hash=sha256:00",
    "hxs alpha",
    "hxs-alpha=<1",
    "hxs-alpha~1",
    "hxs-alpha==",
    "",
    "x" * 300,
])
def test_invalid_requirements_are_400(svc: Tuple[Service, Path], req: str) -> None:
    s, cache = svc
    before = staged(cache)
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": [req]})
    assert status == 400, (req, status, reply)
    assert reply["error"]["message"].startswith("packages:"), reply
    assert staged(cache) == before


def test_missing_package_is_422_naming_it(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-nowhere"]})
    assert status == 422, reply
    assert "hxs-nowhere" in reply["error"]["message"]
    # a missing dependency names the dependency
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-gamma"]})
    assert status == 422, reply
    assert "hxs-absent" in reply["error"]["message"]
    # no version that satisfies
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-alpha>=9"]})
    assert status == 422 and "hxs-alpha" in reply["error"]["message"], reply
    assert staged(cache) == []


def test_wheel_that_cannot_install_is_refused(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-evil"]})
    assert status == 422, reply
    assert "hxs_evil" in reply["error"]["message"] and "escapes" in reply["error"]["message"]
    assert staged(cache) == []
    # os.walk, not rglob: the refused install's staging folder is still being
    # removed in the background and a folder may vanish while it is walked
    assert not [d for d, _, names in os.walk(cache) if "hxs_escaped.py" in names]


@pytest.mark.parametrize("pkg,why", [
    ("hxs-link", "symbolic link"),
    ("hxs-headers", "outside site-packages"),
    ("hxs-twice-b", "also installed by another wheel"),
])
def test_hostile_wheels_are_refused(svc: Tuple[Service, Path], pkg: str, why: str) -> None:
    s, cache = svc
    before = sets(cache)
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": [pkg]})
    assert status == 422 and why in reply["error"]["message"], reply
    assert staged(cache) == [] and sets(cache) == before


def test_install_size_is_capped(wheelhouse: Path) -> None:
    # the cache's limit caps one install; the sandbox's file size limit, one file
    s, cache = start(wheelhouse, PACKAGES_CACHE_MB="16", SANDBOX_TMPFS_MB="1")
    try:
        status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-bomb"]})
        assert status == 422 and "larger than the install allows" in reply["error"]["message"], reply
        status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-bigfile"]})
        assert status == 422 and "File too large" in reply["error"]["message"], reply
        assert staged(cache) == [] and sets(cache) == []
    finally:
        stop_and_clean(s, cache)


def test_javascript_packages_are_refused(svc: Tuple[Service, Path]) -> None:
    s, _ = svc
    status, _, reply = post_exec(s.url, {"code": "1", "language": "javascript", "packages": ["left-pad"]})
    assert status == 400 and "only python" in reply["error"]["message"], reply


def test_install_time_counts_against_the_timeout(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    body = {"code": "import hxs_heavy; print(hxs_heavy.N)", "packages": ["hxs-heavy"]}
    # a timeout shorter than the install: the request times out while installing
    reply, log = run(s, {**body, "timeout": 1})
    assert reply["timed_out"] and reply["exit_code"] == 124, reply
    assert "installing packages" in reply["stderr"] and reply["stdout"] == ""
    assert staged(cache) == [] and log["packages"] == "installed"
    # with room for it, the same request installs, then runs
    reply, log = run(s, {**body, "timeout": 30})
    assert reply["stdout"] == "1000\n" and log["packages"] == "installed"
    # cached now: the short timeout suffices
    reply, log = run(s, {**body, "timeout": 1})
    assert reply["stdout"] == "1000\n" and not reply["timed_out"] and log["packages"] == "cached"


def _templates_ready(s: Service) -> bool:
    status, _, health = http_request(s.url, "GET", "/health")
    warm = health.get("warm", {}) if status == 200 else {}
    return warm.get("templates_ready") == warm.get("templates_total") and warm.get("templates_total", 0) > 0


def test_cached_sets_run_warm_unless_they_shadow_a_template_module(svc: Tuple[Service, Path]) -> None:
    s, _ = svc
    wait_for(lambda: _templates_ready(s), 60, "the warm templates")
    body = {"code": "import hxs_alpha, sys; print(hxs_alpha.VALUE, sys.path[1])", "packages": ["hxs-alpha"]}
    run(s, body)
    reply, log = run(s, body)
    assert log["packages"] == "cached" and log["start"] == "warm", log
    assert reply["stdout"] == "alpha-1.2 /opt/packages\n", reply  # as PYTHONPATH puts it, cold
    # a standard-library name (the templates imported datetime): cold, where the set wins
    body = {"code": "import datetime; print(datetime.SHADOW)", "packages": ["hxs-shadow-stdlib"]}
    for _ in range(2):
        reply, log = run(s, body)
        assert reply["stdout"] == "stdlib\n" and log["start"] == "cold", (reply, log)
    # a dist-packages name (pandas, in the scientific template, imported pytz): the plain template
    body = {"code": "import pytz; print(pytz.SHADOW)", "packages": ["hxs-shadow-dist"]}
    run(s, body)
    reply, log = run(s, body)
    assert reply["stdout"] == "dist\n" and log["start"] == "warm", (reply, log)


@pytest.mark.parametrize("pkg,start", [("hxs-alpha", "warm"), ("hxs-shadow-stdlib", "cold")])
def test_sandbox_with_a_set_keeps_every_restriction(svc: Tuple[Service, Path], pkg: str, start: str) -> None:
    s, _ = svc
    wait_for(lambda: _templates_ready(s), 60, "the warm templates")
    code = ("import os, socket\n"
            "st = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
            "print([st[k].strip() for k in ('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs', 'Seccomp')],\n"
            "      os.getuid(), sorted(n for _, n in socket.if_nameindex()))")
    body = {"code": code, "packages": [pkg]}
    run(s, body)
    reply, log = run(s, body)
    assert log["packages"] == "cached" and log["start"] == start, log
    zero = "0000000000000000"
    assert reply["stdout"] == f"{[zero, zero, zero, '1', '2']} 1000 ['lo']\n", reply


def test_no_network_during_or_after_the_install(svc: Tuple[Service, Path]) -> None:
    s, _ = svc
    with socket.socket() as lsn:
        lsn.bind(("127.0.0.1", 0))
        lsn.listen(8)
        lsn.setblocking(False)
        port = lsn.getsockname()[1]
        for _ in range(2):  # installed, then cached
            reply, _ = run(s, {"code": f"import hxs_net; print(hxs_net.IFACES, hxs_net.probe({port}))",
                               "packages": ["hxs-net"]})
            assert reply["stdout"] == "['lo'] blocked\n", reply
        with pytest.raises(BlockingIOError):
            lsn.accept()  # nothing reached the host's loopback


def test_installed_set_is_read_only(svc: Tuple[Service, Path]) -> None:
    s, _ = svc
    reply, _ = run(s, {"code": "import hxs_alpha, os\n"
                               "try:\n    open(os.path.join(os.path.dirname(hxs_alpha.__file__), 'x'), 'w')\n"
                               "except OSError as e:\n    print(e.errno)\n",
                       "packages": ["hxs-alpha"]})
    assert reply["stdout"] == "30\n", reply  # EROFS


def test_concurrent_requests_for_one_set(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    before = set(sets(cache))
    body = {"code": "import hxs_conc; print(hxs_conc.NAME)", "packages": ["hxs-conc"]}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda _: post_exec(s.url, body), range(4)))
    for status, _, reply in replies:
        assert status == 200 and reply["stdout"] == "hxs-conc\n", reply
    assert len(set(sets(cache)) - before) == 1  # one set, however many installed it
    assert staged(cache) == []


def test_cache_size_limit_evicts_least_recently_used_but_not_in_use(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse, PACKAGES_CACHE_MB="16", MAX_CONCURRENT="4")
    try:
        code = "import {m}, os; print(os.path.getsize(os.path.join({m}.HERE, 'blob.txt')))"
        a = {"code": code.format(m="hxs_big_a"), "packages": ["hxs-big-a"]}
        b = {"code": code.format(m="hxs_big_b"), "packages": ["hxs-big-b"]}
        size = str(10 << 20) + "\n"
        reply, log = run(s, a)
        assert reply["stdout"] == size and log["packages"] == "installed"
        (set_a,) = sets(cache)
        reply, log = run(s, b)  # 20 MB > 16: a, least recently used, goes
        assert reply["stdout"] == size and log["packages"] == "installed"
        assert set_a not in sets(cache) and len(sets(cache)) == 1
        reply, log = run(s, a)  # installed again
        assert log["packages"] == "installed"
        assert len(sets(cache)) == 1
        # a set in use is never evicted: a holds its set while b is installed
        slow = {**b, "code": "import time, hxs_big_b, os; time.sleep(4); "
                             "print(os.path.getsize(os.path.join(hxs_big_b.HERE, 'blob.txt')))"}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(post_exec, s.url, slow)
            # b's set committed (a, unused, is evicted for it): b's program now holds it
            wait_for(lambda: sets(cache) and set_a not in sets(cache), 60, "b's set")
            (set_b,) = sets(cache)
            reply, log = run(s, a)  # a's install would evict b, but b is in use
            assert reply["stdout"] == size and log["packages"] == "installed"
            assert set_b in sets(cache)
            status, _, slow_reply = fut.result()
        assert status == 200 and slow_reply["stdout"] == size, slow_reply
    finally:
        stop_and_clean(s, cache)


def _install_in_background(s: Service, cache: Path, pool: concurrent.futures.Executor) -> concurrent.futures.Future:
    """Starts a slow install and waits until its stage exists in the cache."""
    fut = pool.submit(post_exec, s.url, {"code": "import hxs_heavy", "packages": ["hxs-heavy"]}, None, 30.0)
    wait_for(lambda: staged(cache), 30, "the install's stage")
    return fut


def test_client_gone_during_install_leaves_nothing(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse)
    try:
        host, port = s.address.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as conn:
            body = b'{"code":"import hxs_heavy","packages":["hxs-heavy"]}'
            conn.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            wait_for(lambda: staged(cache), 30, "the install's stage")
        # the client has left while the installer runs
        wait_for(lambda: not staged(cache), 30, "the stage to be removed")
        assert sets(cache) == []
        # the service still installs and runs
        reply, log = run(s, {"code": "import hxs_alpha; print(hxs_alpha.VALUE)", "packages": ["hxs-alpha==1.0"]})
        assert reply["stdout"] == "alpha-1.0\n" and log["packages"] == "installed"
    finally:
        stop_and_clean(s, cache)


def _installer_pids() -> List[int]:
    """Processes of the sandbox user running /code/main.py (the installer, while only it runs)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if d.stat().st_uid != SANDBOX_USER:
                continue
            if b"/code/main.py" in (d / "cmdline").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def test_the_installer_runs_in_a_sandbox_without_network(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse, SANDBOX_WARM="off")
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = _install_in_background(s, cache, pool)
            pids = wait_for(_installer_pids, 30, "the installer's process")
            host_net = os.readlink("/proc/self/ns/net")
            for pid in pids:
                assert os.readlink(f"/proc/{pid}/ns/net") != host_net
                with open(f"/proc/{pid}/net/dev") as f:
                    ifaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
                assert ifaces == ["lo"], ifaces
                with open(f"/proc/{pid}/status") as f:
                    st = dict(line.split(":", 1) for line in f)
                assert st["CapEff"].strip() == "0000000000000000" and st["Seccomp"].strip() == "2"
            status, _, reply = fut.result()
            assert status == 200 and reply["exit_code"] == 0, reply
    finally:
        stop_and_clean(s, cache)


def _deep_leaf_staged(cache: Path) -> bool:
    leaf = os.path.join("hxs_deep_heavy", *["d"] * DEEP_LEVELS, "leaf.txt")
    tmp = cache / "tmp"
    stages = [p for d in tmp.iterdir() if d.is_dir() for p in [d, *d.iterdir()] if p.is_dir()]
    return any(os.path.exists(os.path.join(st, leaf)) for st in stages)


def test_service_killed_during_install_next_start_sweeps(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse)
    s2 = None
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            # a stage deeper than a recursive walk with a depth limit removes
            fut = pool.submit(post_exec, s.url, {"code": "import hxs_deep_heavy", "packages": ["hxs-deep-heavy"]},
                              None, 30.0)
            wait_for(lambda: _deep_leaf_staged(cache), 30, "the deep part of the install")
            s.proc.kill()  # SIGKILL, mid-install
            s.proc.wait(timeout=30)
            with pytest.raises(Exception):
                fut.result()
        assert staged(cache)  # left behind by the dead service...
        s2, _ = start(wheelhouse, cache)
        assert staged(cache) == []  # ...and removed by the next one at its start
        wait_for(lambda: not anything_left(cache), 30, "the dead service's stage to be removed")
        reply, _ = run(s2, {"code": "import hxs_alpha; print(hxs_alpha.VALUE)", "packages": ["hxs-alpha"]})
        assert reply["stdout"] == "alpha-1.2\n"
    finally:
        s.stop(timeout=5)
        if s2:
            stop_and_clean(s2, cache)
        else:
            safe_rmtree(str(cache.parent))


# ---- one meaning, one install ------------------------------------------------------------------


def test_requirements_that_mean_the_same_cost_one_install(svc: Tuple[Service, Path]) -> None:
    s, cache = svc
    code = "import hxs_alpha, hxs_other; print(hxs_alpha.VALUE, hxs_other.NAME)"
    variants = [
        ["hxs-alpha>=1.0,<1.1", "hxs-other"],
        ["HXS_Alpha <1.1 , >=1.0", "hxs.other"],                          # case, separators, spaces, order
        ["hxs-other", " hxs__alpha>= 1.0,<1.1 ", "HXS-Other"],            # list order, duplicates
        ["hxs-alpha<1.1,>=1.0,>=1.0", "hxs_other", "hxs-alpha >=1.0, <1.1"],
    ]
    sources = []
    for pkgs in variants:
        reply, log = run(s, {"code": code, "packages": pkgs})
        assert reply["stdout"] == "alpha-1.0 hxs-other\n", (pkgs, reply)
        sources.append(log["packages"])
    assert sources == ["installed"] + ["cached"] * (len(variants) - 1), sources
    # extras are names too
    first, log1 = run(s, {"code": "import hxs_alpha", "packages": ["hxs-alpha[Extra_One,two]==1.2"]})
    second, log2 = run(s, {"code": "import hxs_alpha", "packages": ["hxs_alpha [ two , extra-one ] == 1.2"]})
    assert (log1["packages"], log2["packages"]) == ("installed", "cached")


@pytest.mark.parametrize("req,rule", [
    ("./hxs-alpha", "looks like a path"),
    ("/hxs-alpha", "looks like a path"),
    ("~/hxs-alpha", "looks like a path"),
    ("hxs-alpha.tar.gz", "looks like an archive file"),
    ("hxs-alpha.zip", "looks like an archive file"),
    ("hxs-alpha.whl", "looks like an archive file"),
    ("HXS-ALPHA.TGZ", "looks like an archive file"),
    ("etc.tar", "looks like an archive file"),
    ("file:///etc/passwd", "looks like a URL"),
    ("git+https://127.0.0.1:1/x.git", "looks like a URL"),
    ("hxs-alpha @ https://127.0.0.1:1/x.whl", "looks like a URL"),
    ("--index-url=http://127.0.0.1:1/simple", "is an option"),
    ("hxs-alpha; python_version > '3'", "environment markers"),
])
def test_names_like_paths_urls_or_archives_are_400_naming_the_rule(svc: Tuple[Service, Path], req: str,
                                                                    rule: str) -> None:
    s, cache = svc
    before = staged(cache)
    status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": [req]})
    assert status == 400, (req, status, reply)
    assert reply["error"]["message"].startswith("packages: ") and rule in reply["error"]["message"], reply
    assert staged(cache) == before


# ---- the cache's walks and limits --------------------------------------------------------------


def _recorded(cache: Path, key: str) -> List[int]:
    return [int(v) for v in (cache / "meta" / key).read_text().split()]


def _measured(path: Path) -> List[int]:
    """Allocated bytes and inodes of a tree, counted here (os.walk has no depth limit)."""
    total, inodes = os.lstat(path).st_blocks * 512, 1
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            total += os.lstat(os.path.join(root, n)).st_blocks * 512
            inodes += 1
    return [total, inodes]


def test_a_deep_set_is_measured_whole_and_leaves_no_stage(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse)
    try:
        code = "import hxs_deep, os; print(open(os.path.join(os.path.dirname(hxs_deep.__file__), %r)).read())" % (
            os.path.join(*["d"] * DEEP_LEVELS, "leaf.txt"))
        # different requirements, one set: every install after the first is thrown away
        for spec in ["hxs-deep", "hxs-deep>=0", "hxs-deep>=0.1", "hxs-deep!=9"]:
            reply, log = run(s, {"code": code, "packages": [spec]})
            assert reply["stdout"] == "leaf\n\n" and log["packages"] == "installed", reply
            wait_for(lambda: not anything_left(cache), 30, "the discarded stage of %s to be removed" % spec)
        (key,) = sets(cache)
        assert _recorded(cache, key) == _measured(cache / "sets" / key)
    finally:
        stop_and_clean(s, cache)


def test_many_tiny_files_count_against_the_inode_limit(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse, PACKAGES_CACHE_INODES="2000")
    try:
        code = "import os, {m}; print(len(os.listdir(os.path.dirname({m}.__file__))) > 1000)"
        reply, log = run(s, {"code": code.format(m="hxs_tiny_a"), "packages": ["hxs-tiny-a"]})
        assert reply["stdout"] == "True\n" and log["packages"] == "installed", reply
        (set_a,) = sets(cache)
        bytes_a, inodes_a = _recorded(cache, set_a)
        assert inodes_a == _measured(cache / "sets" / set_a)[1] > 1200
        reply, log = run(s, {"code": code.format(m="hxs_tiny_b"), "packages": ["hxs-tiny-b"]})
        assert reply["stdout"] == "True\n", reply
        assert set_a not in sets(cache) and len(sets(cache)) == 1  # a+b > 2000 inodes: a went
        # one set above the limit by itself is refused, and nothing of it stays
        status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-tiny-c"]})
        assert status == 422 and "files" in reply["error"]["message"], reply
        wait_for(lambda: not anything_left(cache), 30, "the refused install to be removed")
    finally:
        stop_and_clean(s, cache)


# ---- a big wheel: hashed off the event loop ------------------------------------------------------


class _SparseFile:
    """A file whose runs of zeros become holes: a 1 GiB wheel costs no disk."""

    def __init__(self, f: Any, zero: bytes):
        self._f, self._zero = f, zero

    def write(self, b: bytes) -> int:
        if len(b) == len(self._zero) and b == self._zero:
            self._f.seek(len(b), os.SEEK_CUR)
            return len(b)
        return self._f.write(b)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


@pytest.fixture(scope="module")
def bighouse() -> Iterator[Path]:
    """A wheelhouse with one 1 GiB wheel, almost all of it a .data/scripts member (which
    the installer skips: the install itself is quick), written sparse."""
    d = Path(tempfile.mkdtemp(prefix="hxs-bigwheel-"))
    os.chmod(d, 0o755)
    path = d / "hxs_bigwheel-1.0-py3-none-any.whl"
    zero = bytes(1 << 20)
    info = "hxs_bigwheel-1.0.dist-info"
    with open(path, "wb") as raw:
        with zipfile.ZipFile(_SparseFile(raw, zero), "w", zipfile.ZIP_STORED) as z:
            z.writestr("hxs_bigwheel/__init__.py", "V = 1\n")
            with z.open("hxs_bigwheel-1.0.data/scripts/blob", "w") as f:
                for _ in range(1024):
                    f.write(zero)
            z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: hxs-bigwheel\nVersion: 1.0\n\n")
            z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            z.writestr(f"{info}/RECORD", "")
    os.chmod(path, 0o644)
    assert path.stat().st_size > 1 << 30 and path.stat().st_blocks * 512 < 1 << 20
    yield d
    safe_rmtree(str(d))


def _holds_open(pid: int, path: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                return True
        except OSError:
            pass
    return False


def test_a_big_wheel_is_hashed_while_the_service_answers(bighouse: Path) -> None:
    s, cache = start(bighouse)
    try:
        wheel = str(bighouse / "hxs_bigwheel-1.0-py3-none-any.whl")
        host, port = s.address.rsplit(":", 1)
        body = b'{"code":"import hxs_bigwheel","packages":["hxs-bigwheel"]}'
        with socket.create_connection((host, int(port))) as conn:
            conn.sendall(b"POST /api/v1/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            # the installer has finished; the service reads the wheel for its digest
            wait_for(lambda: _holds_open(s.proc.pid, wheel), 60, "the service to hash the wheel")
            status, _, health = http_request(s.url, "GET", "/health")
            assert status == 200 and health["status"] == "ok", health
            status, _, reply = post_exec(s.url, {"code": "print(1)"})
            assert status == 200 and reply["stdout"] == "1\n", reply
            assert _holds_open(s.proc.pid, wheel), "/health and the other execution waited for the hash"
        # the caller has left: the hash stops, and its stage goes
        wait_for(lambda: not _holds_open(s.proc.pid, wheel), 60, "the hash to stop")
        wait_for(lambda: not anything_left(cache), 30, "the stage to be removed")
        assert sets(cache) == []
    finally:
        stop_and_clean(s, cache)


# ---- the directories the service trusts -------------------------------------------------------


def _start_fails(env: Dict[str, str]) -> str:
    """Runs serve with env and returns what it printed; it must refuse to start."""
    full = dict(os.environ)
    full.pop("LISTEN_ADDRESS", None)
    full.update(env)
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{free_port()}"], env=full,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)

        def text() -> str:
            out.seek(0)
            return out.read().decode(errors="replace")
        try:
            wait_for(lambda: p.poll() is not None or "listening on" in text(), 60, "serve to refuse or start")
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=45)
        err = text()
    assert p.returncode != 0 and "listening on" not in err, err
    return err


@pytest.fixture
def scratch() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="hxs-dirs-"))
    os.chmod(d, 0o755)
    yield d
    safe_rmtree(str(d))


def test_state_dir_someone_else_could_change_is_refused(scratch: Path) -> None:
    theirs = scratch / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    err = _start_fails({"STATE_DIR": str(theirs)})
    assert "STATE_DIR" in err and str(theirs) in err and "uid 65534" in err and "chown root" in err, err
    # writable by others, above it: the directory can be swapped
    open_parent = scratch / "open"
    open_parent.mkdir()
    os.chmod(open_parent, 0o777)
    (open_parent / "state").mkdir()
    err = _start_fails({"STATE_DIR": str(open_parent / "state")})
    assert "STATE_DIR" in err and str(open_parent) in err and "chmod go-w" in err, err
    assert not (open_parent / "state" / "templates").exists()  # refused before anything was written


def test_packages_cache_dir_under_someone_elses_directory_is_refused(wheelhouse: Path, scratch: Path) -> None:
    theirs = scratch / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    err = _start_fails({"PACKAGES_WHEELHOUSE": str(wheelhouse), "PACKAGES_CACHE_DIR": str(theirs / "cache")})
    assert "PACKAGES_CACHE_DIR" in err and str(theirs) in err and "uid 65534" in err, err


def test_the_template_module_is_never_written_through_a_link(scratch: Path) -> None:
    state = scratch / "state"
    (state / "templates").mkdir(parents=True)
    victim = scratch / "victim"
    victim.write_bytes(b"precious\n")
    # the service's pid is the shell's ($$, kept by exec): a link at its temporary name
    wrapper = ('ln -s "$VICTIM" "$STATE_DIR/templates/_hxs_zygote.so.$$" && exec "$BIN" serve --listen "$ADDR"')
    port = free_port()
    env = dict(os.environ, STATE_DIR=str(state), VICTIM=str(victim), BIN=BIN,
               ADDR=f"127.0.0.1:{port}")
    env.pop("LISTEN_ADDRESS", None)
    log = scratch / "serve.log"
    with open(log, "wb") as lf:
        proc = subprocess.Popen(["/bin/sh", "-c", wrapper], env=env, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                start_new_session=True)
    svc = Service(proc, str(log), str(scratch / "unused"), f"127.0.0.1:{port}")
    try:
        svc.wait_started()
        wait_for(lambda: _templates_ready(svc), 60, "the warm templates")
        assert victim.read_bytes() == b"precious\n"
        module = state / "templates" / "_hxs_zygote.so"
        assert module.is_file() and not module.is_symlink()
    finally:
        _stop_checked(svc)


def test_a_wheelhouse_the_installer_cannot_read_is_refused_at_start(scratch: Path, wheelhouse: Path) -> None:
    private = Path(tempfile.mkdtemp(prefix="hxs-private-wheels-"))  # 0700, as root makes it
    try:
        build_wheel(private, "hxs-alpha", "1.0", {"hxs_alpha/__init__.py": ""})
        env = {"PACKAGES_WHEELHOUSE": str(private), "PACKAGES_CACHE_DIR": str(scratch / "cache")}
        err = _start_fails(env)
        assert "PACKAGES_WHEELHOUSE" in err and str(private) in err and "chmod o+rx" in err, err
        doctor = subprocess.run([BIN, "doctor"], env=dict(os.environ, **env),
                                capture_output=True, timeout=120, text=True)
        line = [ln for ln in doctor.stdout.splitlines() if " wheelhouse " in ln]
        assert line and line[0].startswith("MISSING") and "chmod o+rx" in line[0], doctor.stdout
        assert doctor.returncode == 1, doctor.stdout
        # a readable directory, one wheel that is not: named
        os.chmod(private, 0o755)
        os.chmod(private / "hxs_alpha-1.0-py3-none-any.whl", 0o600)
        err = _start_fails(env)
        assert "hxs_alpha-1.0-py3-none-any.whl" in err and "chmod o+r" in err, err
    finally:
        safe_rmtree(str(private))


# ---- from a package index (PACKAGES_INDEX_URL) ----------------------------------------------


INDEX_SERVER = r"""
import functools, http.server, sys, time
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/simple/hxs-idx-slow"):
            time.sleep(2)  # keeps the downloader alive long enough to be looked at
        return super().do_GET()
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])),
                                functools.partial(Handler, directory=sys.argv[2])).serve_forever()
"""


@pytest.fixture(scope="module")
def index(wheelhouse: Path) -> Iterator[Tuple[str, Path]]:
    """A PEP 503 index of a few wheels, served on 127.0.0.1 by a process this test starts."""
    root = Path(tempfile.mkdtemp(prefix="hxs-index-"))
    files = root / "files"
    files.mkdir()
    build_wheel(files, "hxs-idx-lib", "1.0", {"hxs_idx_lib/__init__.py": "V = 'lib'\n"})
    build_wheel(files, "hxs-idx-app", "3.1", {"hxs_idx_app/__init__.py": "import hxs_idx_lib\nV = 'app+' + hxs_idx_lib.V\n"},
                requires=["hxs-idx-lib>=1"])
    build_wheel(files, "hxs-idx-slow", "1.0", {"hxs_idx_slow/__init__.py": "V = 'slow'\n"})  # its page: 2 s
    for whl in files.iterdir():
        project = root / "simple" / whl.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        with open(project / "index.html", "a") as f:
            f.write(f'<a href="../../files/{whl.name}">{whl.name}</a>\n')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(root / "http.log", "wb")
    proc = subprocess.Popen(["/usr/bin/python3", "-c", INDEX_SERVER, str(port), str(root)], stdout=log, stderr=log,
                            start_new_session=True)
    try:
        wait_for(lambda: _port_open(port), 30, "the index server")
        yield f"http://127.0.0.1:{port}/simple/", root / "http.log"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        safe_rmtree(str(root))


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_install_from_a_package_index(index: Tuple[str, Path], wheelhouse: Path) -> None:
    url, http_log = index
    s, cache = start(Path(""), PACKAGES_INDEX_URL=url)  # the index only, no wheelhouse
    try:
        body = {"code": "import hxs_idx_app; print(hxs_idx_app.V)", "packages": ["hxs-idx-app>=3"]}
        reply, log = run(s, body)
        assert reply["stdout"] == "app+lib\n" and log["packages"] == "installed", reply
        fetched = http_log.read_text()
        assert "hxs_idx_app-3.1" in fetched and "hxs_idx_lib-1.0" in fetched  # the dependency too
        reply, log = run(s, body)
        assert reply["stdout"] == "app+lib\n" and log["packages"] == "cached"
        assert http_log.read_text() == fetched  # a cache hit asks the index nothing
        status, _, reply = post_exec(s.url, {"code": "print(1)", "packages": ["hxs-idx-missing"]})
        assert status == 422 and "hxs-idx-missing" in reply["error"]["message"], reply
        assert staged(cache) == []  # neither downloads nor stages are left
        reply, _ = run(s, {"code": "import hxs_idx_lib, socket; print(sorted(n for _, n in socket.if_nameindex()))",
                           "packages": ["hxs-idx-lib"]})
        assert reply["stdout"] == "['lo']\n"  # the service downloads; the sandbox still has no network
    finally:
        stop_and_clean(s, cache)


def _cgroups(pid: int) -> Dict[str, str]:
    """controller ("" for the v2 line) -> cgroup path of pid."""
    out: Dict[str, str] = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def _memory_limit(path: str) -> int:
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):  # pure v2
        return int(Path(f"/sys/fs/cgroup{path}/memory.max").read_text())
    return int(Path(f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes").read_text())


def _status(pid: int) -> Dict[str, str]:
    """/proc/<pid>/status as name -> value."""
    with open(f"/proc/{pid}/status") as f:
        return dict((k, v.strip()) for k, _, v in (line.partition(":") for line in f))


def _downloaders(cache: Path) -> List[int]:
    """pip processes of the downloader's uid working for this cache (not another test's)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and d.stat().st_uid == FETCH_USER and str(cache).encode() in (d / "cmdline").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def test_the_downloader_runs_in_a_cgroup_of_its_own(index: Tuple[str, Path]) -> None:
    url, _ = index
    s, cache = start(Path(""), PACKAGES_INDEX_URL=url)
    try:
        mem = "memory" if not os.path.exists("/sys/fs/cgroup/cgroup.controllers") else ""
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(post_exec, s.url, {"code": "import hxs_idx_slow; print(hxs_idx_slow.V)",
                                                 "packages": ["hxs-idx-slow"], "memory_mb": 64}, None, 60.0)
            (pid,) = wait_for(lambda: _downloaders(cache), 30, "the downloader")
            theirs, ours = _cgroups(pid)[mem], _cgroups(s.proc.pid)[mem]
            assert theirs != ours and theirs.startswith(ours.rstrip("/") + "/hexr-sandbox/"), (theirs, ours)
            assert _memory_limit(theirs) == (64 + 512) << 20  # memory_mb + 512 MiB, as its RLIMIT_AS
            # its jail (src/core/jail.h): its own uid, no capabilities, no_new_privs; an
            # empty bounding set where the service may drop it (CAP_SETPCAP)
            st, svc = _status(pid), _status(s.proc.pid)
            assert st["Uid"].split() == [str(FETCH_USER)] * 4 and st["Gid"].split() == [str(FETCH_USER)] * 4, st
            assert int(st["CapEff"], 16) == int(st["CapPrm"], 16) == int(st["CapAmb"], 16) == 0, st
            assert st["NoNewPrivs"] == "1" and st["Groups"] == "", st
            if int(svc["CapEff"], 16) & (1 << 8):
                assert int(st["CapBnd"], 16) == 0, st
            status, _, reply = fut.result()
        assert status == 200 and reply["stdout"] == "slow\n", reply
        cg_dir = ("/sys/fs/cgroup" if not mem else "/sys/fs/cgroup/memory") + theirs
        wait_for(lambda: not os.path.exists(cg_dir), 30, "the downloader's cgroup to be removed")
    finally:
        stop_and_clean(s, cache)
