"""packages=: installing what the image lacks from a wheelhouse, in a sandbox, cached.

Every wheel used here is built by this file (pure Python, with Python's zipfile) into
a temporary wheelhouse; each service started here gets its own package cache in a
temporary directory. Nothing leaves loopback: the network test listens on 127.0.0.1
itself and checks that nothing reached it.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import pytest

from conftest import Service, _launch, _stop_checked, get_metrics, http_request, post_exec, safe_rmtree, wait_for

UID_BASE = 1000000        # SANDBOX_UID_BASE's default
SANDBOX_USER = UID_BASE + 1000


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
    """Stops s (failing the test if it did not exit 0) and removes its cache either way."""
    try:
        _stop_checked(s)
    finally:
        safe_rmtree(str(cache.parent))


def run(s: Service, body: Dict[str, Any], expect: int = 200) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    status, headers, reply = post_exec(s.url, body)
    assert status == expect, (status, reply)
    return reply, s.exec_log(headers["x-request-id"])


def sets(cache: Path) -> List[str]:
    return sorted(p.name for p in (cache / "sets").iterdir())


def staged(cache: Path) -> List[str]:
    return sorted(p.name for p in (cache / "tmp").iterdir())


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
    assert not list(cache.rglob("hxs_escaped.py"))


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


def test_service_killed_during_install_next_start_sweeps(wheelhouse: Path) -> None:
    s, cache = start(wheelhouse)
    s2 = None
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = _install_in_background(s, cache, pool)
            s.proc.kill()  # SIGKILL, mid-install
            s.proc.wait(timeout=30)
            with pytest.raises(Exception):
                fut.result()
        assert staged(cache)  # left behind by the dead service...
        s2, _ = start(wheelhouse, cache)
        assert staged(cache) == []  # ...and removed by the next one at its start
        reply, _ = run(s2, {"code": "import hxs_alpha; print(hxs_alpha.VALUE)", "packages": ["hxs-alpha"]})
        assert reply["stdout"] == "alpha-1.2\n"
    finally:
        s.stop(timeout=5)
        if s2:
            stop_and_clean(s2, cache)
        else:
            safe_rmtree(str(cache.parent))


# ---- from a package index (PACKAGES_INDEX_URL) ----------------------------------------------


@pytest.fixture(scope="module")
def index(wheelhouse: Path) -> Iterator[Tuple[str, Path]]:
    """A PEP 503 index of a few wheels, served on 127.0.0.1 by a process this test starts."""
    root = Path(tempfile.mkdtemp(prefix="hxs-index-"))
    files = root / "files"
    files.mkdir()
    build_wheel(files, "hxs-idx-lib", "1.0", {"hxs_idx_lib/__init__.py": "V = 'lib'\n"})
    build_wheel(files, "hxs-idx-app", "3.1", {"hxs_idx_app/__init__.py": "import hxs_idx_lib\nV = 'app+' + hxs_idx_lib.V\n"},
                requires=["hxs-idx-lib>=1"])
    for whl in files.iterdir():
        project = root / "simple" / whl.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        with open(project / "index.html", "a") as f:
            f.write(f'<a href="../../files/{whl.name}">{whl.name}</a>\n')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(root / "http.log", "wb")
    proc = subprocess.Popen(["/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", str(port),
                             "--directory", str(root)], stdout=log, stderr=log, start_new_session=True)
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
