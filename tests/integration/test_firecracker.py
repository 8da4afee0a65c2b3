"""The firecracker backend end to end: `hexr-sandbox exec` and `serve` (with its warm
pool) driving tests/fake-firecracker through the real driver and its jail, and, where
Firecracker itself is installed, a real microVM.

The backend refuses to start without KVM (vm_host_init), so these tests need a usable
/dev/kvm and root (the jail does what Firecracker's jailer does); without them they skip
and say why. tests/unit/test-firecracker-jail.c covers the driver without KVM.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Dict

import pytest

from conftest import BIN, post_exec
from hxstest.host import leftover_cgroups, processes_with, wait_until

FAKE = os.environ.get("HXS_FAKE_FIRECRACKER_BIN") or str(Path(BIN).resolve().parent / "tests" / "fake-firecracker")


def need_jail_and_kvm() -> None:
    """Skips unless we are root and the engine accepts the firecracker backend here
    (it refuses without a KVM that can boot an ordinary guest: it says why)."""
    if os.geteuid() != 0:
        pytest.skip("the firecracker backend's jail needs root")
    global _REFUSAL
    if _REFUSAL is None:
        with tempfile.TemporaryDirectory() as tmp:
            images = Path(tmp)
            for name in ("vmlinux", "initramfs.img", "rootfs.ext4"):
                (images / name).write_text("")
            env = dict(os.environ, SANDBOX_BACKEND="firecracker", FIRECRACKER_BIN="/bin/true",
                       SANDBOX_VM_IMAGE_DIR=str(images), STATE_DIR=str(images / "state"))
            proc = subprocess.run([BIN, "exec", "-c", "print(1)"], env=env, capture_output=True, stdin=subprocess.DEVNULL,
                                  timeout=60)
            text = (proc.stdout + proc.stderr).decode(errors="replace")
            m = re.search(r"firecracker needs KVM[^\n]*", text)
            _REFUSAL = m.group(0) if m else ""
    if _REFUSAL:
        pytest.skip(f"the engine refuses the firecracker backend on this host: {_REFUSAL} "
                    "(tests/unit/test-firecracker-jail.c covers the driver without KVM)")


_REFUSAL = None


@pytest.fixture
def fake_images(tmp_path: Path) -> Path:
    """An image directory for the fake: the first line of vmlinux is its mode."""
    if not os.access(FAKE, os.X_OK):
        pytest.skip(f"tests/fake-firecracker was not built ({FAKE})")
    images = tmp_path / "image"
    images.mkdir()
    for name, text in (("vmlinux", "ok\n"), ("initramfs.img", "initrd"), ("rootfs.ext4", "rootfs")):
        (images / name).write_text(text)
        os.chmod(images / name, 0o644)
    return images


def fc_env(images: Path, state: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({"SANDBOX_BACKEND": "firecracker", "FIRECRACKER_BIN": FAKE,
                "SANDBOX_VM_IMAGE_DIR": str(images), "STATE_DIR": str(state)})
    return env


def jails_left(state: Path) -> list:
    fc = state / "fc"
    return sorted(os.listdir(fc)) if fc.is_dir() else []


def check_fake_report(stdout: str, code: str) -> None:
    # what the fake saw from inside the jail (see tests/fake-firecracker)
    # pdeathsig=9: it dies with the service (set after its uid change, which clears it)
    for want in ("pid=1 ", "groups=0 ", "nnp=1 ", "caps=0,0,0 ", "bounding=0 ", "pdeathsig=9 ",
                 "root=dev,initramfs.img,rootfs.ext4,run,vmlinux ", "dev=kvm,urandom ",
                 "ifaces=lo ", "rootwrite=EROFS ", "vcpus=1 ", f"code={code}\n"):
        assert want in stdout, f"{want!r} missing in {stdout!r}"


def test_exec_runs_through_the_driver_and_leaves_nothing(fake_images: Path, tmp_path: Path) -> None:
    need_jail_and_kvm()
    state = tmp_path / "state"
    proc = subprocess.Popen([BIN, "exec", "--json", "-m", "64", "-c", "print(42)"], env=fc_env(fake_images, state),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")
    result = json.loads(out)
    assert result["exit_code"] == 0
    check_fake_report(result["stdout"], "print(42)")
    # guest RAM: memory_mb + the VM overhead (128 MiB)
    assert "mem=192 " in result["stdout"]
    assert jails_left(state) == []
    assert leftover_cgroups({proc.pid}) == []


@pytest.mark.parametrize("mode,message", [
    ("reject-machine-config", 'firecracker: PUT /machine-config answered 400: fake: machine config rejected "on purpose"'),
    ("exit-after-start", "it exited before the guest agent listened: fake-firecracker: exiting on purpose"),
])
def test_exec_says_what_firecracker_refused(fake_images: Path, tmp_path: Path, mode: str, message: str) -> None:
    need_jail_and_kvm()
    (fake_images / "vmlinux").write_text(mode + "\n")
    state = tmp_path / "state"
    proc = subprocess.run([BIN, "exec", "-c", "print(1)"], env=fc_env(fake_images, state), capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stderr.decode(errors="replace")
    assert jails_left(state) == []


def test_service_pool_hands_out_jailed_vms(fake_images: Path, tmp_path: Path, start_service) -> None:
    need_jail_and_kvm()
    state = tmp_path / "unused"  # the service gets its own STATE_DIR from the fixture
    env = fc_env(fake_images, state)
    env.pop("STATE_DIR")
    env["VM_POOL_SIZE"] = "1"
    svc = start_service(env={k: env[k] for k in ("SANDBOX_BACKEND", "FIRECRACKER_BIN", "SANDBOX_VM_IMAGE_DIR",
                                                 "VM_POOL_SIZE")})
    for i in range(3):
        status, _, body = post_exec(svc.url, {"code": f"print({i})"}, timeout=60)
        assert status == 200, body
        assert body["exit_code"] == 0
        check_fake_report(body["stdout"], f"print({i})")
    # one jail per VM: the executions' are gone, the pool's next VM may be there
    service_state = Path(svc.workdir) / "state"
    assert wait_until(lambda: len(jails_left(service_state)) <= 1, timeout=10)
    svc.stop()
    assert svc.returncode == 0, "\n".join(svc.log[-20:])
    assert leftover_cgroups({svc.proc.pid}) == []
    assert processes_with(f"hexr-s{svc.proc.pid}-") == []  # its Firecrackers' --id


def test_real_firecracker_runs_python() -> None:
    bin_ = os.environ.get("FIRECRACKER_BIN", "/usr/bin/firecracker")
    if not os.access(bin_, os.X_OK):
        pytest.skip(f"firecracker is not installed (FIRECRACKER_BIN={bin_})")
    need_jail_and_kvm()
    images = os.environ.get("SANDBOX_VM_IMAGE_DIR", "/var/cache/hexr-sandbox/image")
    if not all(os.path.exists(os.path.join(images, f)) for f in ("vmlinux", "initramfs.img", "rootfs.ext4")):
        pytest.skip(f"no guest image in {images} (hexr-sandbox image build)")
    env = dict(os.environ, SANDBOX_BACKEND="firecracker", FIRECRACKER_BIN=bin_, SANDBOX_VM_IMAGE_DIR=images)
    proc = subprocess.run([BIN, "exec", "--json", "-c", "import sys; print('hello from', sys.platform)"], env=env,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = json.loads(proc.stdout)
    assert result["stdout"] == "hello from linux\n"
