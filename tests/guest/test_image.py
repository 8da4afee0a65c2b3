# SPDX-License-Identifier: Apache-2.0
"""`hexr-sandbox image build|info` against the image of the ctest fixture vm_image
(HXS_VM_IMAGE): what is in it, that an unchanged build is reused, and that a second
build from the same inputs is byte-identical."""

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402

BIN = os.environ.get("HEXR_SANDBOX_BIN", "")
IMAGE = os.environ.get("HXS_VM_IMAGE", "")
OUTPUTS = ("vmlinux", "vmlinuz", "initramfs.img", "rootfs.ext4")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def image():
    assert BIN and os.access(BIN, os.X_OK), "HEXR_SANDBOX_BIN must name the built binary"
    assert IMAGE and os.path.isfile(os.path.join(IMAGE, "manifest.json")), \
        "HXS_VM_IMAGE must name a built image (ctest runs the vm_image fixture first)"
    return IMAGE


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cli(*args):
    return subprocess.run([BIN, "image", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=1800)


def test_manifest_describes_the_outputs(image):
    m = json.load(open(os.path.join(image, "manifest.json")))
    assert m["kernel"]["package"].startswith("linux-image-") and m["kernel"]["package"].endswith("-cloud-amd64")
    rows = manifest.rows()
    assert {"python3-matplotlib", "python3-seaborn", "python3-sklearn", "fonts-dejavu-core"} <= {r[1] for r in rows}
    for lang, p, dist, _ in rows:
        # every language's package is in the image (certificates and time zones when the host has them)
        assert p in m["packages"] or lang == "any", p
        # ... and each Python distribution in its dist-packages, as GET /api/v1/runtimes reports it
        assert not dist or m["python_distributions"].get(normalize(dist)), dist
    # pythran's compilers are not followed (scripts/image-build.py, NOT_FOLLOWED)
    assert not {"gcc", "gcc-12", "g++", "g++-12", "cpp-12"} & set(m["packages"])
    assert not any(p.startswith("libboost") for p in m["packages"])
    for o in OUTPUTS:
        assert m["files"][o]["sha256"] == sha(os.path.join(image, o)), o
    assert "virtio_blk" in m["modules"]["base"] and "virtio_console" in m["modules"]["serial"]
    assert "vmw_vsock_virtio_transport" in m["modules"]["vsock"]


def test_vmlinux_is_an_elf_with_the_pvh_note(image):
    data = open(os.path.join(image, "vmlinux"), "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2           # ELF64
    # the Xen PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY = 18) Firecracker and QEMU use
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    found = False
    for i in range(phnum):
        ptype, = struct.unpack_from("<I", data, phoff + i * phentsize)
        if ptype != 4:  # PT_NOTE
            continue
        off, = struct.unpack_from("<Q", data, phoff + i * phentsize + 8)
        size, = struct.unpack_from("<Q", data, phoff + i * phentsize + 32)
        at = off
        while at + 12 <= off + size:
            namesz, descsz, ntype = struct.unpack_from("<III", data, at)
            name = data[at + 12:at + 12 + namesz].rstrip(b"\0")
            found |= name == b"Xen" and ntype == 18
            at += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    assert found


def test_initramfs_holds_the_agent_as_init(image):
    data = open(os.path.join(image, "initramfs.img"), "rb").read()
    names, off = [], 0
    while True:
        assert data[off:off + 6] == b"070701"
        fields = [int(data[off + 6 + 8 * i:off + 14 + 8 * i], 16) for i in range(13)]
        namesize, filesize = fields[11], fields[6]
        name = data[off + 110:off + 110 + namesize - 1].decode()
        off = (off + 110 + namesize + 3) // 4 * 4
        body = data[off:off + filesize]
        off = (off + filesize + 3) // 4 * 4
        if name == "TRAILER!!!":
            break
        names.append(name)
        if name == "init":
            assert body[:4] == b"\x7fELF" and fields[1] & 0o111
    assert names == sorted(names)
    assert "init" in names and "dev/console" in names
    assert any(n.startswith("modules/base/") and n.endswith("-virtio_blk.ko") for n in names)


DRIVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "session", "drivers")


@pytest.mark.skipif(not shutil.which("debugfs"), reason="debugfs (e2fsprogs) reads the ext4 root")
def test_root_holds_the_session_drivers(image):
    # a session's sandbox runs them from /opt/hexr-session (src/engine/drivers.h)
    names = sorted(n for n in os.listdir(DRIVERS) if n.endswith((".py", ".js")))
    m = json.load(open(os.path.join(image, "manifest.json")))
    assert m["session_drivers"] == {"/opt/hexr-session/" + n: sha(os.path.join(DRIVERS, n)) for n in names}
    rootfs = os.path.join(image, "rootfs.ext4")
    for n in names:
        r = subprocess.run([shutil.which("debugfs"), "-R", "cat /opt/hexr-session/" + n, rootfs],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
        assert r.stdout == open(os.path.join(DRIVERS, n), "rb").read(), n
    r = subprocess.run([shutil.which("debugfs"), "-R", "stat /opt/hexr-session/driver.py", rootfs],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=120)
    assert re.search(r"Mode:\s+0644", r.stdout) and re.search(r"User:\s+0\s", r.stdout), r.stdout


def test_info(image, tmp_path):
    r = cli("info", image)
    assert r.returncode == 0, r.stderr
    assert "rootfs.ext4" in r.stdout and "python3-pandas" in r.stdout and "python3-matplotlib" in r.stdout
    r = cli("info", str(tmp_path))
    assert r.returncode == 1 and "no image" in r.stderr
    r = cli("frobnicate")
    assert r.returncode == 1 and "unknown verb" in r.stderr
    r = cli("build", "--from", "nowhere", "--output", str(tmp_path / "x"))
    assert r.returncode == 1 and "--from" in r.stderr
    assert not os.path.exists(tmp_path / "x")


def test_unchanged_inputs_reuse_the_image(image):
    before = {o: os.stat(os.path.join(image, o)).st_ino for o in OUTPUTS}
    r = cli("build", "--output", image)
    assert r.returncode == 0, r.stderr
    assert "reused" in r.stdout
    assert before == {o: os.stat(os.path.join(image, o)).st_ino for o in OUTPUTS}


def test_a_second_build_is_byte_identical(image):
    copy = image + "-again"
    shutil.rmtree(copy, ignore_errors=True)
    try:
        # the kernel .deb comes from the first build's cache: no second download
        os.makedirs(copy + ".cache", exist_ok=True)
        for f in os.listdir(image + ".cache"):
            shutil.copy(os.path.join(image + ".cache", f), copy + ".cache")
        r = cli("build", "--output", copy, "--force")
        assert r.returncode == 0, r.stderr
        for o in OUTPUTS + ("manifest.json",):
            assert sha(os.path.join(copy, o)) == sha(os.path.join(image, o)), o
        assert not [n for n in os.listdir(os.path.dirname(copy)) if ".tmp-" in n]
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.rmtree(copy + ".cache", ignore_errors=True)
