"""The qemu backend's host side through the real service and CLI, with tests/fake-qemu
as QEMU_BIN: the fake runs in QEMU's real jail and plays the guest agent on the channel
the driver gives it, so nothing is booted and every test here takes seconds.

- A hostile guest that floods the channel with empty frames does not stall the service:
  /health answers and another execution completes while it floods, and its own time
  limit still ends it.
- Files: the request's files go in (JSON and multipart), the guest's come back, and a
  guest that sends files out past the budgets or the rules ends only its own execution.
- A pooled VM that never boots is logged by the service, one line each time the count of
  failed boots has risen, with the hypervisor's last words (the library prints nothing).
- QEMU's jail, seen from inside: its own uid (not the package downloader's), no
  capabilities, a root that holds only QEMU's own files, and no host unix socket in
  reach (sockets the test creates under /tmp and /run).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from hxstest.client import http_request, post_exec
from hxstest.waits import wait_for

BIN = os.environ.get("HEXR_SANDBOX_BIN", "")
FAKE = os.environ.get("HXS_FAKE_QEMU_BIN") or str(Path(BIN).resolve().parent / "tests" / "fake-qemu")
UID_BASE = int(os.environ.get("SANDBOX_UID_BASE") or 1000000)
HANG = 120  # only detects a hang


@pytest.fixture
def fake_images(tmp_path: Path) -> Path:
    assert os.access(FAKE, os.X_OK), f"tests/fake-qemu was not built ({FAKE})"
    images = tmp_path / "image"
    images.mkdir()
    for name in ("vmlinux", "initramfs.img", "rootfs.ext4"):
        (images / name).write_text(f"fake {name}\n")
    return images


def fake_env(images: Path, **extra: str) -> Dict[str, str]:
    env = {"SANDBOX_BACKEND": "qemu", "QEMU_BIN": FAKE, "SANDBOX_VM_IMAGE_DIR": str(images),
           "SANDBOX_VM_ACCEL": "tcg", "VM_POOL_SIZE": "0"}
    env.update(extra)
    return env


def fakes_of(parent: int) -> List[int]:
    """The fake QEMUs a process started (argv[0] is QEMU_BIN)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and argv0 == FAKE.encode():
            pids.append(int(entry))
    return pids


def bytes_written(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/io") as f:
            return int(dict(line.split(": ") for line in f.read().splitlines())["wchar"])
    except (OSError, KeyError, ValueError):
        return -1


def test_a_flooding_guest_does_not_stall_the_service(fake_images, start_service):
    """The fake answers the code "flood" with empty STDOUT and READY frames, as fast as
    the service takes them, until its VM is destroyed."""
    svc = start_service(env=fake_env(fake_images, VM_POOL_SIZE="1", MAX_CONCURRENT="4"))
    wait_for(lambda: http_request(svc.url, "GET", "/health")[2]["vm"]["pool_ready"] == 1, 60, "a pooled VM")
    flood: Dict[str, object] = {}

    def run_flood() -> None:
        flood["result"] = post_exec(svc.url, {"code": "flood", "language": "python", "timeout": 1}, timeout=HANG)

    t = threading.Thread(target=run_flood, daemon=True)
    t.start()
    # the pooled VM floods: it has written megabytes of frames and goes on (the pool
    # boots its next VM meanwhile, which writes nothing but READY)
    flooders: List[int] = wait_for(lambda: [p for p in fakes_of(svc.proc.pid) if bytes_written(p) > (16 << 20)],
                                   60, "a fake QEMU that wrote 16 MiB of empty frames")
    flooder = flooders[0]
    before = bytes_written(flooder)

    status, _, health = http_request(svc.url, "GET", "/health", timeout=30)
    assert status == 200 and health["status"] in ("ok", "degraded"), health
    assert t.is_alive(), "the flooding execution ended before /health answered"
    # it floods before and after: it never stops by itself (on 2 shared cores it may not
    # be scheduled during the millisecond /health takes)
    wait_for(lambda: bytes_written(flooder) > before, 30, "the guest to go on flooding")

    status, _, other = post_exec(svc.url, {"code": "print('other caller')", "language": "python"}, timeout=30)
    assert status == 200, other
    assert other["exit_code"] == 0 and "code=print('other caller')\n" in other["stdout"], other

    t.join(HANG)
    assert not t.is_alive(), "the flooding execution never ended"
    status, _, res = flood["result"]
    assert status == 200, res
    # its own timer ended it (timeout + the agent's grace to report), not the guest
    assert res["timed_out"] is True and res["exit_code"] == 124, res
    assert res["stdout"] == "" and res["execution_time_ms"] >= 1000, res
    assert wait_for(lambda: flooder not in fakes_of(svc.proc.pid), 30, "the flooding VM to be destroyed")


def multipart(request: Dict[str, object], files: List[Tuple[str, bytes]]) -> Tuple[bytes, str]:
    boundary = "hxsvmtestboundary"
    parts = [f"--{boundary}\r\nContent-Disposition: form-data; name=\"request\"\r\n"
             f"Content-Type: application/json\r\n\r\n".encode() + json.dumps(request).encode() + b"\r\n"]
    for path, data in files:
        parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{path}\"\r\n"
                     f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_files_go_in_and_come_back_through_the_channel(fake_images, start_service):
    """The request's files reach the guest before START (JSON and a multipart upload, whose
    staged file is read from its fd), RUN carries the return budgets and globs, and the
    guest's files out come back in the result (the fake sends each file in back as
    output/PATH)."""
    svc = start_service(env=fake_env(fake_images, MAX_RETURN_FILES="7", MAX_RETURN_BYTES="5000"))
    body = {"code": "files", "language": "python", "return_files": ["*.csv", "**/*.txt"],
            "files": [{"path": "data/a.csv", "content": "a,b\n1,2\n"},
                      {"path": "empty.txt", "content": ""},
                      {"path": "bin.dat", "content": "AAEC/w==", "encoding": "base64"}]}
    status, _, res = post_exec(svc.url, body, timeout=HANG)
    assert status == 200, res
    out = res["stdout"]
    assert "return_files=7 return_bytes=5000 globs=*.csv,**/*.txt\n" in out, out
    assert "in data/a.csv 8 a,b\n1,2\n" in out and "in empty.txt 0 \n" in out, out
    files = {f["path"]: f for f in res["files"]}
    assert sorted(files) == ["output/bin.dat", "output/data/a.csv", "output/empty.txt"], res["files"]
    assert files["output/data/a.csv"]["content"] == "a,b\n1,2\n" and files["output/data/a.csv"]["size"] == 8
    assert files["output/data/a.csv"]["mime"] == "text/csv"
    assert files["output/bin.dat"]["encoding"] == "base64" and files["output/bin.dat"]["content"] == "AAEC/w=="
    assert files["output/empty.txt"]["size"] == 0 and not files["output/empty.txt"]["truncated"]

    # multipart: the file part is staged and sent from its fd, frame by frame
    data = bytes(range(256)) * 12  # 3 KiB, not UTF-8
    payload, ctype = multipart({"code": "files", "language": "python"}, [("up/x.bin", data)])
    status, _, res = post_exec(svc.url, payload, headers={"Content-Type": ctype}, timeout=HANG)
    assert status == 200, res
    assert "in up/x.bin 3072 " in res["stdout"], res["stdout"][:300]
    assert [f["path"] for f in res["files"]] == ["output/up/x.bin"], res["files"]
    assert res["files"][0]["size"] == 3072


HOSTILE = ("too-many", "too-big", "past-budget", "dotdot", "absolute", "unwanted", "overrun",
           "unordered", "duplicate", "orphan-data", "bad-tlv")


def test_hostile_files_out_are_refused_and_the_service_goes_on(fake_images, start_service):
    """A guest that sends files out past a budget, outside the rules or out of order
    ends its own execution with an error; nothing of it is returned and the service goes
    on serving."""
    svc = start_service(env=fake_env(fake_images, MAX_RETURN_FILES="5", MAX_RETURN_BYTES="1000"))
    for case in HOSTILE:
        status, _, res = post_exec(svc.url, {"code": f"hostile-files {case}", "language": "python"}, timeout=HANG)
        assert status == 500, (case, status, res)
        assert "files out of bounds" in res["error"]["message"], (case, res)
        assert "files" not in res, (case, res)
    status, _, health = http_request(svc.url, "GET", "/health", timeout=30)
    assert status == 200, health
    status, _, reply = post_exec(svc.url, {"code": "print('ran')", "language": "python"}, timeout=30)
    assert status == 200 and "code=print('ran')\n" in reply["stdout"], reply


def test_failed_pool_boots_are_logged_with_their_reason(fake_images, start_service):
    (fake_images / "vmlinux").write_text("crash at boot\n")
    svc = start_service(env=fake_env(fake_images, VM_POOL_SIZE="1"))
    wait_for(lambda: http_request(svc.url, "GET", "/health")[2]["vm"]["boot_failures"] >= 2, 60,
             "two failed pool boots")
    lines = wait_for(lambda: [r for r in svc.json_log() if r.get("event") == "vm_pool"], 10,
                     "a vm_pool log line")
    assert "booting a microVM failed" in lines[0]["message"], lines
    assert "fake-qemu: the kernel crashed at boot" in lines[0]["message"], lines
    vm = http_request(svc.url, "GET", "/health")[2]["vm"]
    assert len(lines) <= vm["boot_failures"], (lines, vm)  # never more lines than failures
    assert "the kernel crashed at boot" in vm["last_boot_error"], vm


def test_qemu_jail_from_inside(fake_images, host_sockets, tmp_path):
    """`exec` starts the fake as QEMU: what it sees of the host is its own binary."""
    code = "\n".join(f"connect {p}" for p in host_sockets)
    # the sockets answer on the host
    for p in host_sockets:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(p)
        c.close()
    env = dict(os.environ, STATE_DIR=str(tmp_path / "state"), **fake_env(fake_images))
    p = subprocess.run([BIN, "exec", "--json", "-c", code], env=env, capture_output=True, text=True, timeout=HANG,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)["stdout"]
    lines = out.splitlines()
    ids = lines[0]
    uid = UID_BASE + 3001
    # pdeathsig=9: it dies with the service (set after its uid change, which clears it)
    assert f"uid={uid},{uid},{uid} gid={uid},{uid},{uid} groups=0 nnp=1 caps=0,0,0 bounding=0 pdeathsig=9 " in ids, ids
    assert f"uid={UID_BASE + 3000}," not in ids  # the package downloader's
    assert "kernel=fake vmlinux" in ids, ids  # the image, as a descriptor through its own /proc
    # no host socket answers from the jail: the paths do not exist there
    for sock in host_sockets:
        assert f"connect {sock} ENOENT" in lines, out[:2000]
    # its whole tree (but /proc): dev with four nodes, and the binary with the
    # directories above it
    tree = sorted(line.split(" ", 2)[1:] for line in lines if line.startswith("tree "))
    real = os.path.realpath(FAKE)
    above = set()
    d = os.path.dirname(real)
    while d != "/":
        above.add(d)
        d = os.path.dirname(d)
    want = sorted([["d", "/dev"]] + [["c", f"/dev/{n}"] for n in ("null", "random", "urandom", "zero")] +
                  [["d", a] for a in above] + [["f", real]])
    assert tree == want, out[:4000]
