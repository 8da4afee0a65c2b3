"""The microVM backend through the service: the same API and results as namespaces.

Every VM here runs under TCG (SANDBOX_VM_ACCEL=tcg), which any x86-64 host has, so CI
without KVM runs the same code path; one test uses KVM and skips, saying why, where it
is not usable. VM boots are slow under TCG and this machine is noisy: nothing here
asserts a time. The guest image comes from the ctest fixture that runs
`hexr-sandbox image build` (HXS_VM_IMAGE_DIR).

Network checks never leave loopback: the guest's interfaces are read from inside,
and a listener this test opens on the host's 127.0.0.1 must be unreachable.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import stat
import subprocess
import time
from typing import Any, Dict, List

import pytest

from hxstest import seed_examples as seeds
from hxstest.client import get_metrics, http_request, post_exec
from hxstest.service import free_port
from hxstest.waits import wait_for

IMAGE_DIR = os.environ.get("HXS_VM_IMAGE_DIR", "")
BIN = os.environ.get("HEXR_SANDBOX_BIN", "")
HANG = 600  # HTTP timeout for one request: a TCG boot on a loaded 2-core machine


def _image_ready() -> None:
    missing = [f for f in ("vmlinux", "initramfs.img", "rootfs.ext4")
               if not os.path.isfile(os.path.join(IMAGE_DIR, f))]
    assert IMAGE_DIR and not missing, \
        "no guest image in HXS_VM_IMAGE_DIR=%r (missing %s): the vm_image ctest fixture builds it" % (
            IMAGE_DIR, missing)


def vm_env(**extra: str) -> Dict[str, str]:
    env = {"SANDBOX_BACKEND": "qemu", "SANDBOX_VM_IMAGE_DIR": IMAGE_DIR, "SANDBOX_VM_ACCEL": "tcg",
           "VM_POOL_SIZE": "2", "MAX_CONCURRENT": "2", "MAX_EXECUTION_TIME": "300s",
           "DEFAULT_TIMEOUT": "300s"}
    env.update(extra)
    return env


def qemu_pids(engine_pid: int = 0) -> List[int]:
    """QEMU processes of this project (their argv names our port); with engine_pid,
    only those the service or CLI of that pid started: they live in its cgroups
    (hexr-sandbox/s<pid>.<start>-<n>) until they are gone. Other instances on the
    machine may run VMs at the same time."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/cgroup" % entry) as f:
                cgroups = f.read()
        except OSError:
            continue
        if not (argv and argv[0].endswith(b"qemu-system-x86_64") and any(b"org.hexr.agent" in a for a in argv)):
            continue
        if engine_pid and "/s%d." % engine_pid not in cgroups:
            continue
        pids.append(int(entry))
    return pids


def run(url: str, body: Dict[str, Any]) -> Dict[str, Any]:
    status, _, res = post_exec(url, body, timeout=HANG)
    assert status == 200, res
    return res


@pytest.fixture
def vm_service(start_service):
    _image_ready()
    svc = start_service(env=vm_env())
    yield svc
    svc.stop()
    assert wait_for(lambda: not qemu_pids(svc.proc.pid), 60, "its QEMU processes to go")


def test_seed_examples_and_limits(vm_service, openapi):
    """The seed examples, exit codes, the time limit and the memory limit, in microVMs."""
    url = vm_service.url
    status, headers, health = http_request(url, "GET", "/health")
    openapi.check("GET", "/health", status, headers, health)
    assert health["backend"] == "qemu"
    assert health["vm"]["accel"] == "tcg"
    assert health["vm"]["pool_target"] == 2

    # the runtimes are the guest image's, as its builder recorded them (no boot needed)
    status, headers, rt = http_request(url, "GET", "/api/v1/runtimes")
    openapi.check("GET", "/api/v1/runtimes", status, headers, rt)
    with open(os.path.join(IMAGE_DIR, "manifest.json")) as f:
        image = json.load(f)
    assert rt["backend"] == "qemu" and "manifest.json" in rt["source"], rt
    for lang in rt["runtimes"]:
        for d in lang["debian_packages"]:
            assert d["version"] == image["packages"][d["name"]], d
        for p in lang["packages"]:
            assert p["version"] == image["python_distributions"][re.sub(r"[-_.]+", "-", p["name"]).lower()], p
    assert health["runtimes"] == {lang["language"]: lang["version"] for lang in rt["runtimes"]}
    assert rt["runtimes"][0]["version"].startswith("3.")

    # seed 000 quick start (pandas, asked for as a package the image has): byte-identical
    # to the host's own run
    status, headers, res = post_exec(url, {"code": seeds.SEED000_QUICK_START, "language": "python",
                                           "packages": ["pandas"], "timeout": 300}, timeout=HANG)
    openapi.check("POST", "/api/v1/exec", status, headers, res)
    host = seeds.host_run(seeds.SEED000_QUICK_START)
    assert res["exit_code"] == 0, res
    assert res["stdout"] == host.stdout

    res = run(url, {"code": "console.log('Hello from Node.js', [1,2,3].map(x => x * 2))",
                    "language": "javascript", "timeout": 300})
    assert (res["exit_code"], res["stdout"]) == (0, "Hello from Node.js [ 2, 4, 6 ]\n"), res

    # bash: the user, a read-only root, a writable /tmp, stdin, and an exit code. The
    # root's own mount flag and EROFS, not just a refusal: uid 1000 gets EACCES from a
    # root-owned directory even where the mount is writable.
    script = r"""
id -un; id -u
while read -r _ _ _ _ point opts _; do [ "$point" = / ] && rootopts=$opts; done < /proc/self/mountinfo
case ",$rootopts," in *,ro,*) flag=ro ;; *) flag=rw ;; esac
msg="$(touch /hexr-probe 2>&1) $(touch /usr/hexr-probe 2>&1)"
case "$flag:$msg" in
  "ro:"*"Read-only file system"*"Read-only file system"*) echo "root read-only" ;;
  *) echo "root writable? $flag $msg" ;;
esac
echo data > /tmp/t && cat /tmp/t
cat
echo err >&2
exit 3
"""
    res = run(url, {"code": script, "language": "bash", "timeout": 300, "stdin": "from stdin\n"})
    assert res["exit_code"] == 3, res
    assert res["stdout"].splitlines() == ["sandbox", "1000", "root read-only", "data", "from stdin"], res
    assert res["stderr"] == "err\n"

    # time limit: exit 124 and timed_out, from inside the guest
    res = run(url, {"code": "while True: pass", "language": "python", "timeout": 3})
    assert res["exit_code"] == 124 and res["timed_out"] is True, res

    # memory limit: the guest's cgroup kills the program, not the VM
    res = run(url, {"code": "x = bytearray(200 * 1024 * 1024)\nprint('survived')", "language": "python",
                    "memory_mb": 64, "timeout": 300})
    assert res["exit_code"] == 137 and res["oom_killed"] is True and "survived" not in res["stdout"], res

    metrics = get_metrics(url)
    assert metrics["hexr_sandbox_vm_pool_target"] == 2
    assert metrics["hexr_sandbox_vm_pool_boots_total"] >= 1


CHART_JOB = ("import pandas as pd, matplotlib.pyplot as plt\n"
             "df = pd.read_csv('data/sales.csv')\nprint(df['amount'].sum())\n"
             "df.plot(x='month', y='amount')\nplt.show()\n")
OUTPUT_LIMITED = ("import os, sys\nos.makedirs('output')\nopen('output/partial.txt','w').write('kept')\n"
                  "while True: sys.stdout.write('x' * 65536)\n")


def test_files_and_a_chart_through_the_service(start_service):
    """A CSV in, a pandas sum and a plt.show() chart back as a valid PNG, as the namespace
    backend does; and at the output limit the files are still returned."""
    _image_ready()
    svc = start_service(env=vm_env(VM_POOL_SIZE="0", MAX_OUTPUT_BYTES="4096", MAX_STREAM_BYTES="1M"))
    body = {"code": CHART_JOB, "language": "python", "timeout": 300,
            "files": [{"path": "data/sales.csv", "content": "month,amount\n1,10\n2,20\n3,12\n"}]}
    status, _, res = post_exec(svc.url, body, timeout=HANG)
    assert status == 200, res
    assert res["exit_code"] == 0 and res["stdout"] == "42\n", res
    assert [f["path"] for f in res["files"]] == ["output/figure-1.png"], res["files"]
    png = base64.b64decode(res["files"][0]["content"])
    assert res["files"][0]["mime"] == "image/png" and res["files"][0]["encoding"] == "base64"
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) == res["files"][0]["size"] > 1000

    status, _, res = post_exec(svc.url, {"code": OUTPUT_LIMITED, "language": "python", "timeout": 120},
                               timeout=HANG)
    assert status == 200, res
    assert res["error"]["type"] == "output_limit", res["error"]
    # the head and the tail of what it printed, as on the namespace backend
    assert res["stdout_truncated"] and res["stdout_omitted_bytes"] > 0, res
    assert [(f["path"], f["content"]) for f in res["files"]] == [("output/partial.txt", "kept")], res["files"]


def test_a_session_on_a_microvm(start_service):
    """A session's driver gets its commands through the agent (STDIN frames after START):
    Python keeps its state across cells, Bash its variables; DELETE ends it. (Cells that
    import pandas under TCG can take longer than a cell's default time limit: none here.)"""
    _image_ready()
    svc = start_service(env=vm_env(VM_POOL_SIZE="0"))
    status, _, s = http_request(svc.url, "POST", "/api/v1/sessions", {"language": "python"}, timeout=HANG)
    assert status == 201, s
    for code, value in (("x = 41", None), ("x + 1", "42")):
        status, _, res = http_request(svc.url, "POST", f"/api/v1/sessions/{s['id']}/exec", {"code": code},
                                      timeout=HANG)
        assert status == 200 and res["status"] == "ok" and res["value"] == value, res
    assert http_request(svc.url, "DELETE", f"/api/v1/sessions/{s['id']}", timeout=60)[0] == 204
    status, _, s = http_request(svc.url, "POST", "/api/v1/sessions", {"language": "bash"}, timeout=HANG)
    assert status == 201, s
    for code, out in (("V=kept; cd /tmp", ""), ("echo $V $PWD", "kept /tmp\n")):
        status, _, res = http_request(svc.url, "POST", f"/api/v1/sessions/{s['id']}/exec", {"code": code},
                                      timeout=HANG)
        assert status == 200 and res["status"] == "ok" and res["stdout"] == out, res
    assert http_request(svc.url, "DELETE", f"/api/v1/sessions/{s['id']}", timeout=60)[0] == 204


def test_no_network_to_host_loopback(vm_service):
    """A listener on the host's 127.0.0.1 is not reachable: the guest's loopback is its own."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    code = """
import socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", %d))
    print("connected")
except OSError as e:
    print("refused", type(e).__name__)
print(sorted(n for _, n in socket.if_nameindex()))
""" % port
    try:
        res = run(vm_service.url, {"code": code, "language": "python", "timeout": 300})
        accepted = []
        try:
            while True:
                accepted.append(srv.accept()[0])
        except OSError:
            pass
        for c in accepted:
            c.close()
    finally:
        srv.close()
    assert res["exit_code"] == 0, res
    assert res["stdout"].startswith("refused"), res
    assert res["stdout"].splitlines()[1] == "['lo']", res
    assert not accepted, "the guest reached the host's loopback listener"


def test_kvm_when_usable(start_service):
    """The same backend under KVM (skips where /dev/kvm is not usable; TCG above runs the
    same driver code)."""
    _image_ready()
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
        os.close(fd)
    except OSError as e:
        pytest.skip("KVM is not usable here (/dev/kvm: %s); the TCG tests cover this path" % e.strerror)
    with open("/proc/cpuinfo") as f:
        flags = " ".join(line for line in f if line.startswith("flags"))
    if " vmx" not in flags and " svm" not in flags:
        pytest.skip("/dev/kvm is there but the CPU has no vmx/svm (a paravirtual KVM that cannot boot "
                    "the guest kernel); the TCG tests cover this path")
    svc = start_service(env=vm_env(SANDBOX_VM_ACCEL="kvm", VM_POOL_SIZE="1"))
    _, _, health = http_request(svc.url, "GET", "/health")
    assert health["vm"]["accel"] == "kvm"
    res = run(svc.url, {"code": "import platform; print(platform.system())", "language": "python"})
    assert (res["exit_code"], res["stdout"]) == (0, "Linux\n"), res


def test_missing_image_is_a_clear_start_error(tmp_path):
    env = dict(os.environ, SANDBOX_BACKEND="qemu", SANDBOX_VM_IMAGE_DIR=str(tmp_path / "none"),
               STATE_DIR=str(tmp_path / "state"))
    p = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:%d" % free_port()], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode != 0
    assert "SANDBOX_VM_IMAGE_DIR" in p.stderr and "image build" in p.stderr, p.stderr


def test_exec_cli_cold_vm(tmp_path):
    """`exec` boots one VM (no pool) and leaves nothing behind."""
    _image_ready()
    env = dict(os.environ, SANDBOX_BACKEND="qemu", SANDBOX_VM_IMAGE_DIR=IMAGE_DIR, SANDBOX_VM_ACCEL="tcg",
               STATE_DIR=str(tmp_path / "state"))
    p = subprocess.Popen([BIN, "exec", "-l", "python", "-c", "import sys; print('hi'); sys.exit(7)"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    out, err = p.communicate(timeout=HANG)
    assert (p.returncode, out) == (7, "hi\n"), err
    assert qemu_pids(p.pid) == []


def _status(pid: int) -> Dict[str, str]:
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _memory_limit(pid: int) -> int:
    """The memory limit of pid's cgroup (v1 memory controller or v2), in bytes."""
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "memory" in ctrls.split(","):
                with open("/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % path) as g:
                    return int(g.read())
            if ctrls == "" and os.path.exists("/sys/fs/cgroup%s/memory.max" % path):
                with open("/sys/fs/cgroup%s/memory.max" % path) as g:
                    return int(g.read())
    raise AssertionError("pid %d has no memory cgroup" % pid)


def _jail_tree(pid: int) -> Dict[str, str]:
    """Every path in the root QEMU sees (but /proc), with its type: d, f, c, s, ..."""
    root = "/proc/%d/root" % pid
    kinds = {}
    for top, dirs, files in os.walk(root):
        rel_top = top[len(root):] or "/"
        if rel_top == "/":
            dirs[:] = [d for d in dirs if d != "proc"]
        for name in dirs + files:
            st = os.lstat(os.path.join(top, name))
            kind = ("d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else
                    "l" if stat.S_ISLNK(st.st_mode) else "c" if stat.S_ISCHR(st.st_mode) else
                    "s" if stat.S_ISSOCK(st.st_mode) else "?")
            kinds[os.path.join(rel_top, name)] = kind
    return kinds


def test_qemu_is_jailed(vm_service, host_sockets):
    """Every pooled QEMU: an unprivileged uid of its own, no capabilities, no_new_privs,
    seccomp, its own pid/mount/net namespaces, a read-only root that holds only QEMU's
    own files (no host socket in reach), and a memory cgroup."""
    url = vm_service.url
    wait_for(lambda: http_request(url, "GET", "/health")[2]["vm"]["pool_ready"] == 2, 600, "a full pool")
    qemus = qemu_pids(vm_service.proc.pid)
    assert len(qemus) == 2, qemus
    uid_base = int(os.environ.get("SANDBOX_UID_BASE") or 1000000)
    for pid in qemus:
        st = _status(pid)
        # QEMU's own uid: not the package downloader's (+3000), not Firecracker's (+3002)
        assert st["Uid"].split() == [str(uid_base + 3001)] * 4, st["Uid"]
        assert st["Gid"].split() == [str(uid_base + 3001)] * 4, st["Gid"]
        assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0 and int(st["CapBnd"], 16) == 0, st
        assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
        for ns in ("pid", "mnt", "net", "ipc", "uts"):
            assert os.readlink("/proc/%d/ns/%s" % (pid, ns)) != os.readlink("/proc/self/ns/%s" % ns), ns
        # guest RAM is MAX_MEMORY_MB (512) + 128; QEMU's own share on top
        assert _memory_limit(pid) == (512 + 128 + 256) << 20
        # its root: a tmpfs of its own, read-only; every other mount a read-only bind of
        # one of QEMU's files, but its own /proc
        with open("/proc/%d/mountinfo" % pid) as f:
            mounts = [line.split() for line in f]
        points = {m[4]: (m[5].split(","), m[m.index("-") + 1]) for m in mounts}
        assert points["/"][1] == "tmpfs" and "ro" in points["/"][0], points["/"]
        assert points["/proc"][1] == "proc" and "ro" in points["/proc"][0], points["/proc"]
        for point, (opts, fstype) in points.items():
            assert "ro" in opts and "nosuid" in opts, (point, opts)
            if point not in ("/", "/proc"):
                assert point == "/etc/ld.so.cache" or point.startswith(("/usr/", "/lib/", "/lib64/")), point
        # nothing of the host but those files: no socket, no home, no /tmp, /run, /var,
        # /etc but the loader's cache, and dev/ with four nodes
        tree = _jail_tree(pid)
        assert [p for p, k in tree.items() if k not in "dfcl"] == [], tree  # links resolve in the jail
        assert sorted(p for p, k in tree.items() if k == "c") == ["/dev/null", "/dev/random", "/dev/urandom",
                                                                  "/dev/zero"]
        tops = {p.split("/")[1] for p in tree}
        assert tops <= {"dev", "usr", "lib", "lib64", "etc"}, tops
        assert [p for p in tree if p.startswith("/etc/")] == ["/etc/ld.so.cache"], tree
        # the unix sockets the test listens on: reachable on the host, not in the jail
        for path in host_sockets:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(path)
            c.close()
            jailed = "/proc/%d/root%s" % (pid, path)
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with pytest.raises(FileNotFoundError):
                c.connect(jailed)
            c.close()


def test_packages_beyond_the_image_are_a_clear_422(start_service, tmp_path):
    """The install step of packages= serves the namespace backend; a microVM runs what its
    image has, and says so (no VM is booted for it)."""
    _image_ready()
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(wheelhouse, 0o755)
    svc = start_service(env=vm_env(VM_POOL_SIZE="0", PACKAGES_WHEELHOUSE=str(wheelhouse),
                                   PACKAGES_CACHE_DIR=str(tmp_path / "pkgcache")))
    status, _, res = post_exec(svc.url, {"code": "import hexr_nothing", "language": "python",
                                         "packages": ["hexr-nothing-such"]}, timeout=HANG)
    assert status == 422, res
    msg = res["error"]["message"]
    assert "hexr-nothing-such" in msg and "microVM image" in msg and "namespace backend" in msg, msg
