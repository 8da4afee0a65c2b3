#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the microVM guest image of hexr-sandbox (run by `hexr-sandbox image build`).

Writes, into the output directory:

  vmlinux         the kernel as an ELF with the PVH note (Firecracker, fast QEMU boot),
                  cut out of the bzImage's LZ4 payload
  vmlinuz         the kernel as Debian ships it (bzImage)
  initramfs.img   newc cpio: the agent as /init, the virtio (and vsock) modules
  rootfs.ext4     the read-only root: the runtimes of scripts/runtimes.txt (Python 3.11
                  with numpy, pandas, scipy, matplotlib, ...; Node.js; Bash)
  manifest.json   what went in (packages and versions, the Python distributions of the
                  root, the session drivers, checksums of every output)

The root also holds the session drivers (src/session/drivers/, or --drivers DIR) in
/opt/hexr-session, where a session's sandbox runs them (src/engine/drivers.h).

Where things come from:
  - the kernel: Debian's cloud kernel, resolved from the linux-image-cloud-amd64
    metapackage, fetched with `apt-get download` (the .deb is cached) and unpacked
    with `dpkg-deb -x`;
  - the root filesystem: the files of the Debian packages *installed on the build
    host* (dpkg's file lists), for the runtimes and the closure of their Depends, plus
    the Essential set a minimal Debian has (coreutils, grep, sed, ...): the same
    packages, at the same versions, that the namespace backend runs on this host.

With --from debootstrap, the root is instead `debootstrap --variant=minbase` of Debian
bookworm with the runtimes (the same packages from the archive, independent of what
the host has; Debian's Node.js there is 18, where this project's hosts run 20; slower
and online; not byte-reproducible: maintainer scripts write files of their own).

Reproducible: with the same inputs (the kernel .deb, the installed packages, the
agent) a second build gives byte-identical files: fixed timestamps (SOURCE_DATE_EPOCH,
by default the kernel's own date), a fixed ext4 UUID and hash seed, a sorted cpio.
When the inputs have not changed since the last build, it says so and does nothing.
The output directory is built next to its final place and renamed into it.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

FORMAT = 1
KERNEL_META = "linux-image-cloud-amd64"
# The runtimes: one manifest for the set-up script, this builder and the engine.
RUNTIMES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtimes.txt")
LANGUAGES = ("python", "javascript", "bash", "any")
# The session drivers: in the source tree, or installed next to this script.
DRIVERS_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "session", "drivers")
DRIVERS_INSTALLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "session-drivers")
DRIVERS_GUEST_DIR = "opt/hexr-session"  # DRIVERS_DIR of src/engine/drivers.h, in the root


def read_runtimes(path=RUNTIMES_FILE):
    """[(language, Debian package, distribution or None, import or None)], in file order."""
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BuildError(f"the runtime manifest {path}: {e.strerror}")
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] not in LANGUAGES or len(words) not in (2, 4):
            raise BuildError(f"{path}:{n}: expected LANGUAGE PACKAGE [DISTRIBUTION IMPORT]")
        rows.append((words[0], words[1], *(words[2:] or [None, None])))
    if not rows:
        raise BuildError(f"{path}: no packages")
    return rows


# Modules the agent loads, by group (the agent loads "base", then "serial" or
# "vsock"), each followed by what it depends on. Built-in ones are left out.
MODULE_GROUPS = [
    ("base", ["virtio", "virtio_ring", "virtio_mmio", "virtio_blk"]),
    ("serial", ["virtio_console"]),
    ("vsock", ["vsock", "vmw_vsock_virtio_transport_common", "vmw_vsock_virtio_transport"]),
]
# Not needed to run programs, and large.
EXCLUDE_PREFIXES = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/info/",
                    "/usr/share/lintian/", "/usr/share/locale/", "/usr/share/bug/",
                    "/usr/share/doc-base/", "/usr/share/bash-completion/")
ROOT_UUID = "6865787a-7273-4162-8f78-000000000001"
ROOT_HASH_SEED = "6865787a-7273-4162-8f78-000000000002"
LZ4_LEGACY_MAGIC = b"\x02\x21\x4c\x18"
# Declared Depends that only build code: Debian's scipy depends on pythran, a
# compiler whose own Depends pull in g++, Boost and Python's headers (600 MB) that
# nothing imports at run time. The closure does not follow these.
NOT_FOLLOWED = {"g++", "c++-compiler", "libboost-dev", "python3-all-dev", "libxsimd-dev",
                "libblas-dev", "libopenblas-dev", "libatlas-base-dev", "libblas.so"}


class BuildError(Exception):
    pass


def normalize(name):
    """PEP 503: lower case, runs of -, _ and . as one - (as the engine's index does)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def python_distributions(root):
    """{normalized name: version} of the .dist-info and .egg-info under root's site dirs."""
    found = {}
    for d in ("usr/lib/python3/dist-packages", "usr/local/lib/python3.11/dist-packages",
              "usr/lib/python3.11/site-packages"):
        try:
            names = sorted(os.listdir(os.path.join(root, d)))
        except OSError:
            continue
        for n in names:
            m = re.fullmatch(r"([^-]+)-([^-]+)(-py[0-9.]+)?\.(dist-info|egg-info)", n)
            if m:
                found.setdefault(normalize(m.group(1)), m.group(2))
    return dict(sorted(found.items()))


class Progress:
    """One line per step; a running percentage on a terminal."""

    def __init__(self, steps):
        self.steps = steps
        self.n = 0
        self.tty = sys.stdout.isatty()

    def step(self, text):
        self.n += 1
        print(f"[{self.n}/{self.steps}] {text}", flush=True)

    def percent(self, done, total, text=""):
        if self.tty and total:
            print(f"\r      {100 * done // total:3d}% {text}", end="", flush=True)

    def end_percent(self):
        if self.tty:
            print("\r\033[K", end="", flush=True)


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def run(cmd, **kw):
    try:
        return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, **kw).stdout
    except FileNotFoundError:
        raise BuildError(f"{cmd[0]} is not installed (scripts/setup.sh installs it)")
    except subprocess.CalledProcessError as e:
        raise BuildError(f"{' '.join(cmd)} failed: {e.stderr.strip()[-400:]}")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---- installed packages ---------------------------------------------------------

def installed_packages(admindir=None):
    """name -> {version, arch, depends: [[alternatives]], provides: [names]}"""
    fmt = "${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\t${Essential}\t" \
          "${Pre-Depends}\t${Depends}\t${Provides}\t${Priority}\n"
    out = run(["dpkg-query"] + ([f"--admindir={admindir}"] if admindir else []) + ["-W", "-f", fmt])
    pkgs = {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 8 or not f[3].startswith("ii"):
            continue
        deps = []
        for field in (f[5], f[6]):
            for group in filter(None, (g.strip() for g in field.split(","))):
                deps.append([dep_name(a) for a in group.split("|")])
        provides = [dep_name(p) for p in f[7].split(",") if p.strip()]
        # several architectures of one package (libc6:amd64, libc6:i386): keep the
        # native one
        if f[0] in pkgs and f[2] not in ("amd64", "all"):
            continue
        pkgs[f[0]] = {"version": f[1], "arch": f[2], "essential": f[4] == "yes",
                      "required": len(f) > 8 and f[8] == "required",
                      "depends": deps, "provides": provides}
    return pkgs


def dep_name(text):
    name = text.strip().split()[0] if text.strip() else ""
    return name.split(":")[0]


def closure(pkgs, roots):
    providers = {}
    for name, p in pkgs.items():
        for v in p["provides"]:
            providers.setdefault(v, []).append(name)
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in pkgs:
            raise BuildError(f"package {name} is not installed (scripts/setup.sh installs the runtimes)")
        seen.add(name)
        for alternatives in pkgs[name]["depends"]:
            if any(a in NOT_FOLLOWED for a in alternatives):
                continue
            choice = next((a for a in alternatives if a in pkgs), None)
            if choice is None:
                choice = next((sorted(providers[a])[0] for a in alternatives if a in providers), None)
            if choice is not None:
                todo.append(choice)
    return sorted(seen)


def package_files(name, arch):
    for candidate in (f"/var/lib/dpkg/info/{name}:{arch}.list", f"/var/lib/dpkg/info/{name}.list"):
        if os.path.exists(candidate):
            with open(candidate, encoding="utf-8", errors="surrogateescape") as f:
                return [line.rstrip("\n") for line in f if line.strip()]
    return []


def canonical(path):
    """The path with its directories resolved (merged /usr: /bin/bash is /usr/bin/bash)."""
    d, base = os.path.split(path)
    return os.path.join(os.path.realpath(d), base)


def root_files(pkgs, names):
    files = set()
    for name in names:
        for p in package_files(name, pkgs[name]["arch"]):
            c = canonical(p)
            if not (c.startswith("/usr/") or c.startswith("/etc/")):
                continue
            if c.startswith(EXCLUDE_PREFIXES):
                continue
            try:
                st = os.lstat(c)
            except OSError:
                continue  # a conffile the admin removed, a diversion
            if stat.S_ISDIR(st.st_mode):
                continue
            files.add(c)
            # Debian compiles Python modules at install time; without the .pyc a
            # read-only root would compile every import, every run.
            if c.endswith(".py"):
                d, base = os.path.split(c)
                pyc = os.path.join(d, "__pycache__", base[:-3] + ".cpython-311.pyc")
                if os.path.isfile(pyc):
                    files.add(pyc)
    return sorted(files)


# ---- the kernel -------------------------------------------------------------------

def resolve_kernel():
    out = run(["apt-cache", "depends", KERNEL_META])
    m = re.search(r"Depends: (linux-image-\S+-cloud-amd64)", out)
    if not m:
        raise BuildError(f"apt-cache cannot resolve {KERNEL_META} (apt-get update?)")
    pkg = m.group(1)
    show = run(["apt-cache", "show", "--no-all-versions", pkg])
    v = re.search(r"^Version: (\S+)", show, re.M)
    if not v:
        raise BuildError(f"apt-cache knows no version of {pkg}")
    return pkg, v.group(1)


def fetch_kernel(cache, pkg, version):
    os.makedirs(cache, exist_ok=True)
    want = f"{pkg}_{version.replace(':', '%3a')}_amd64.deb"
    path = os.path.join(cache, want)
    if not os.path.exists(path):
        run(["apt-get", "download", "-q", f"{pkg}={version}"], cwd=cache)
        if not os.path.exists(path):
            raise BuildError(f"apt-get download did not produce {want}")
    return path


def extract_vmlinux(bzimage, out):
    data = open(bzimage, "rb").read()
    at = data.find(LZ4_LEGACY_MAGIC)
    if at < 0:
        raise BuildError("no LZ4 payload in the kernel image")
    p = subprocess.run(["lz4", "-dc"], input=data[at:], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    # lz4 complains about the bytes after the payload; what matters is the ELF
    elf = p.stdout
    if len(elf) < 64 or elf[:4] != b"\x7fELF":
        raise BuildError(f"the kernel's LZ4 payload did not decompress to an ELF: {p.stderr.decode()[-200:]}")
    with open(out, "wb") as f:
        f.write(elf)


def modinfo_depends(path):
    """The depends= of a module, from its .modinfo ELF section."""
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        base = shoff + i * shentsize
        name, = struct.unpack_from("<I", data, base)
        off, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, off, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == b".modinfo":
            for entry in data[off:off + size].split(b"\0"):
                if entry.startswith(b"depends="):
                    return [d for d in entry[8:].decode().split(",") if d]
            return []
    return []


def pick_modules(moddir):
    builtin = set()
    with open(os.path.join(moddir, "modules.builtin")) as f:
        for line in f:
            builtin.add(os.path.basename(line.strip())[:-3].replace("-", "_"))
    index = {}
    for dirpath, _, names in os.walk(os.path.join(moddir, "kernel")):
        for n in names:
            if n.endswith(".ko"):
                index[n[:-3].replace("-", "_")] = os.path.join(dirpath, n)
    placed, groups = set(), []
    for group, wanted in MODULE_GROUPS:
        order = []

        def visit(name, chain=()):
            name = name.replace("-", "_")
            if name in builtin or name in placed or name in order:
                return
            if name not in index:
                raise BuildError(f"the kernel has no module {name}")
            if name in chain:
                raise BuildError(f"module dependency loop at {name}")
            for d in modinfo_depends(index[name]):
                visit(d, chain + (name,))
            order.append(name)

        for w in wanted:
            visit(w)
        placed.update(order)
        groups.append((group, [(n, index[n]) for n in order]))
    return groups


# ---- initramfs ---------------------------------------------------------------------

def cpio_newc(entries, out, mtime):
    """entries: (path, mode, data or None, rdev) sorted by path; owner root."""
    with open(out, "wb") as f:
        ino = 1
        for path, mode, data, rdev in entries + [("TRAILER!!!", 0, None, (0, 0))]:
            body = data or b""
            name = path.encode() + b"\0"
            nlink = 2 if stat.S_ISDIR(mode) else 1
            fields = [ino, mode, 0, 0, nlink, mtime if path != "TRAILER!!!" else 0, len(body),
                      0, 0, rdev[0], rdev[1], len(name), 0]
            if path == "TRAILER!!!":
                fields = [0] * 13
                fields[4] = 1
                fields[11] = len(name)
            hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
            f.write(hdr + name)
            f.write(b"\0" * ((4 - (len(hdr) + len(name)) % 4) % 4))
            f.write(body)
            f.write(b"\0" * ((4 - len(body) % 4) % 4))
            ino += 1
        # the kernel reads the archive in 512-byte blocks, as cpio writes them
        pad = (512 - f.tell() % 512) % 512
        f.write(b"\0" * pad)


def build_initramfs(out, agent, groups, mtime):
    d = stat.S_IFDIR | 0o755
    entries = [("dev", d, None, (0, 0)), ("dev/console", stat.S_IFCHR | 0o600, None, (5, 1)),
               ("init", stat.S_IFREG | 0o755, open(agent, "rb").read(), (0, 0)),
               ("modules", d, None, (0, 0)), ("newroot", d, None, (0, 0)),
               ("proc", d, None, (0, 0)), ("sys", d, None, (0, 0))]
    for group, mods in groups:
        if not mods:
            continue
        entries.append((f"modules/{group}", d, None, (0, 0)))
        for i, (name, path) in enumerate(mods):
            entries.append((f"modules/{group}/{i:02d}-{name}.ko", stat.S_IFREG | 0o644,
                            open(path, "rb").read(), (0, 0)))
    entries.sort(key=lambda e: e[0])
    cpio_newc(entries, out, mtime)


# ---- the root filesystem ------------------------------------------------------------

def copy_tree(files, staging, progress):
    total = 0
    for i, src in enumerate(files):
        dst = staging + src
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(src, dst, follow_symlinks=False)
            # no set-id bits in the image (the mounts are nosuid anyway)
            os.chmod(dst, stat.S_IMODE(st.st_mode) & 0o1777)
            total += st.st_size
        else:
            continue
        os.utime(dst, ns=(st.st_mtime_ns, st.st_mtime_ns), follow_symlinks=False)
        if i % 500 == 0:
            progress.percent(i, len(files), f"{human(total)}")
    progress.end_percent()
    return total


def add_alternatives(staging):
    """update-alternatives links (libblas.so.3 for numpy, ...) whose choice is in the image."""
    altdir = "/var/lib/dpkg/alternatives"
    if not os.path.isdir(altdir):
        return
    for name in sorted(os.listdir(altdir)):
        with open(os.path.join(altdir, name), errors="replace") as f:
            lines = f.read().split("\n")
        if len(lines) < 2:
            continue
        links = [(name, lines[1])]
        i = 2
        while i + 1 < len(lines) and lines[i]:
            links.append((lines[i], lines[i + 1]))
            i += 2
        for alt, link in links:
            etc = f"/etc/alternatives/{alt}"
            try:
                target = os.readlink(etc)
            except OSError:
                continue
            if not os.path.lexists(staging + canonical(target)):
                continue
            link = canonical(link)
            if not os.path.isdir(os.path.dirname(staging + link)):
                continue
            os.makedirs(staging + "/etc/alternatives", exist_ok=True)
            if not os.path.lexists(staging + etc):
                os.symlink(target, staging + etc)
            if not os.path.lexists(staging + link):
                os.symlink(etc, staging + link)


def finish_root(staging, epoch, host_alternatives=True):
    for d in ("dev", "proc", "sys", "run", "tmp", "etc"):
        os.makedirs(os.path.join(staging, d), exist_ok=True)
    for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"),
                         ("lib64", "usr/lib64")):
        if os.path.isdir(os.path.join(staging, target)) and not os.path.lexists(os.path.join(staging, link)):
            os.symlink(target, os.path.join(staging, link))
    if host_alternatives:
        add_alternatives(staging)
    # the dynamic linker's cache, for this tree
    if os.geteuid() == 0 and os.path.exists(os.path.join(staging, "etc/ld.so.conf")):
        run(["ldconfig", "-X", "-r", staging])
    elif os.path.exists("/etc/ld.so.cache"):
        shutil.copyfile("/etc/ld.so.cache", os.path.join(staging, "etc/ld.so.cache"))
    with open(os.path.join(staging, "etc/hexr-image"), "w") as f:
        f.write("hexr-sandbox microVM root: files of Debian packages installed on the build host\n")
    # everything the build created gets the fixed time; copied files keep theirs
    # (Python's .pyc files name their source's mtime)
    for dirpath, dirnames, filenames in os.walk(staging):
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode) or st.st_mtime_ns > epoch * 10**9:
                os.utime(p, (epoch, epoch), follow_symlinks=False)
        os.utime(dirpath, (epoch, epoch))
    for p in ("etc/ld.so.cache", "etc/hexr-image"):
        if os.path.exists(os.path.join(staging, p)):
            os.utime(os.path.join(staging, p), (epoch, epoch))


# ---- the root filesystem, from the archive (--from debootstrap) ----------------------

SUITE = "bookworm"


def debian_mirror():
    """The host's Debian mirror for the suite (deb822 or one-line sources)."""
    try:
        with open("/etc/apt/sources.list.d/debian.sources") as f:
            for stanza in f.read().split("\n\n"):
                fields = dict(l.split(":", 1) for l in stanza.splitlines()
                              if ":" in l and not l.startswith("#"))
                suites = fields.get("Suites", "").split()
                if SUITE in suites:
                    return fields["URIs"].split()[0]
    except OSError:
        pass
    try:
        with open("/etc/apt/sources.list") as f:
            for line in f:
                w = line.split()
                if len(w) >= 3 and w[0] == "deb" and w[2] == SUITE:
                    return w[1]
    except OSError:
        pass
    return "http://deb.debian.org/debian"


def archive_versions(names):
    """What the archive offers now, as the host's apt lists know it: for the cache key."""
    out = run(["apt-cache", "policy"] + names)
    versions, name = {}, None
    for line in out.splitlines():
        if not line.startswith(" "):
            name = line.rstrip(":")
        elif line.strip().startswith("Candidate:") and name:
            versions[name] = line.split(":", 1)[1].strip()
    return versions


def debootstrap_root(staging, cache, packages):
    if os.geteuid() != 0:
        raise BuildError("--from debootstrap needs root")
    os.makedirs(os.path.join(cache, "debootstrap"), exist_ok=True)
    mirror = debian_mirror()
    run(["debootstrap", "--variant=minbase", "--include=" + ",".join(packages),
         f"--cache-dir={os.path.join(cache, 'debootstrap')}", SUITE, staging, mirror])
    # what the runtimes and the Essential set need, as on the host; the rest goes
    # (pythran's compilers and headers), dependencies or not
    pkgs = installed_packages(os.path.join(staging, "var/lib/dpkg"))
    keep = set(closure(pkgs, packages + sorted(n for n, p in pkgs.items() if p["essential"])))
    purge = sorted(n for n, p in pkgs.items() if n not in keep and not p["required"])
    if purge:
        run(["chroot", staging, "dpkg", "--purge", "--force-depends"] + purge)
    for d in ("var/cache/apt", "var/lib/apt/lists", "var/log", "usr/share/doc", "usr/share/man",
              "usr/share/info", "usr/share/locale", "usr/share/lintian"):
        p = os.path.join(staging, d)
        if os.path.isdir(p):
            for n in os.listdir(p):
                q = os.path.join(p, n)
                shutil.rmtree(q) if os.path.isdir(q) and not os.path.islink(q) else os.unlink(q)
    pkgs = installed_packages(os.path.join(staging, "var/lib/dpkg"))
    return mirror, {n: p["version"] for n, p in sorted(pkgs.items())}


def tree_size(staging):
    size, inodes = 0, 0
    for dirpath, dirnames, filenames in os.walk(staging):
        inodes += 1 + len(filenames)
        for n in filenames:
            st = os.lstat(os.path.join(dirpath, n))
            size += (st.st_size + 4095) // 4096 * 4096
    return size, inodes


def make_ext4(staging, out, epoch):
    size, inodes = tree_size(staging)
    mb = (size * 115 // 100) // (1 << 20) + 64
    env = dict(os.environ, E2FSPROGS_FAKE_TIME=str(epoch), SOURCE_DATE_EPOCH=str(epoch),
               MKE2FS_CONFIG="/dev/null")
    # features named in full: the host's mke2fs.conf must not change the image
    # (metadata_csum off: fix_inode_times patches inodes without checksums to update)
    run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-N", str(inodes + inodes // 10 + 1024),
         "-O", "extent,flex_bg,huge_file,dir_nlink,extra_isize,sparse_super,large_file,filetype,"
               "dir_index,^has_journal,^resize_inode,^metadata_csum,^64bit",
         "-L", "hexr-root", "-U", ROOT_UUID,
         "-E", f"hash_seed={ROOT_HASH_SEED},root_owner=0:0,lazy_itable_init=0,nodiscard",
         "-I", "256", "-d", staging, out, f"{mb}M"], env=env)
    fix_inode_times(out, epoch)
    return mb


def fix_inode_times(image, epoch):
    """mkfs.ext4 -d copies each file's atime and ctime (the ctime is when this build
    copied it, and cannot be set) and stamps a creation time: all become `epoch`,
    written straight into the inode tables. mtimes stay (a .pyc names its source's)."""
    with open(image, "r+b") as f:
        f.seek(1024)
        sb = f.read(1024)
        inodes_count, = struct.unpack_from("<I", sb, 0)
        first_data_block, log_bs = struct.unpack_from("<II", sb, 20)
        inodes_per_group, = struct.unpack_from("<I", sb, 40)
        inode_size, = struct.unpack_from("<H", sb, 88)
        incompat, ro_compat = struct.unpack_from("<II", sb, 96)
        if incompat & 0x80 or ro_compat & 0x400:
            raise BuildError("ext4 image with 64bit or metadata_csum: cannot fix inode times")
        bs = 1024 << log_bs
        groups = (inodes_count + inodes_per_group - 1) // inodes_per_group
        f.seek((first_data_block + 1) * bs)
        gdt = f.read(groups * 32)
        stamp = struct.pack("<I", epoch)
        for g in range(groups):
            itable, = struct.unpack_from("<I", gdt, g * 32 + 8)
            flags, = struct.unpack_from("<H", gdt, g * 32 + 0x12)
            if flags & 0x1:  # INODE_UNINIT
                continue
            f.seek(itable * bs)
            table = bytearray(f.read(inodes_per_group * inode_size))
            for i in range(inodes_per_group):
                o = i * inode_size
                if struct.unpack_from("<H", table, o + 0x1A)[0] == 0:
                    continue  # not in use
                table[o + 0x08:o + 0x0C] = stamp          # atime
                table[o + 0x0C:o + 0x10] = stamp          # ctime
                if inode_size > 128 and struct.unpack_from("<H", table, o + 0x80)[0] >= 0x18:
                    table[o + 0x84:o + 0x88] = bytes(4)   # ctime_extra
                    table[o + 0x8C:o + 0x90] = bytes(4)   # atime_extra
                    table[o + 0x90:o + 0x94] = stamp      # crtime
                    table[o + 0x94:o + 0x98] = bytes(4)   # crtime_extra
            f.seek(itable * bs)
            f.write(table)


# ---- manifest and cache ------------------------------------------------------------

def session_drivers(given):
    """{name: path} of the session drivers (driver.py and its .py/.js siblings)."""
    d = given or (DRIVERS_SOURCE if os.path.isdir(DRIVERS_SOURCE) else DRIVERS_INSTALLED)
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith((".py", ".js")))
    except OSError as e:
        raise BuildError(f"no session drivers in {d}: {e.strerror} (give --drivers DIR)")
    if "driver.py" not in names:
        raise BuildError(f"no driver.py in {d} (give --drivers DIR)")
    return {n: os.path.join(d, n) for n in names}


def add_drivers(staging, drivers):
    """The drivers into the root, read-only for everyone but root (as the namespace
    backend puts them)."""
    dest = os.path.join(staging, DRIVERS_GUEST_DIR)
    os.makedirs(dest, mode=0o755, exist_ok=True)
    os.chmod(dest, 0o755)
    for name, path in drivers.items():
        shutil.copyfile(path, os.path.join(dest, name))
        os.chmod(os.path.join(dest, name), 0o644)


def inputs_key(kernel_pkg, kernel_version, packages, agent_sha, source, drivers=None):
    h = hashlib.sha256()
    h.update(json.dumps({"format": FORMAT, "source": source, "kernel": [kernel_pkg, kernel_version],
                         "packages": packages, "agent": agent_sha, "drivers": drivers or {},
                         "builder": sha256_file(os.path.abspath(__file__))},
                        sort_keys=True).encode())
    return h.hexdigest()


OUTPUTS = ("vmlinux", "vmlinuz", "initramfs.img", "rootfs.ext4")


def cache_valid(outdir, key):
    try:
        with open(os.path.join(outdir, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    return m.get("inputs_sha256") == key and all(
        os.path.isfile(os.path.join(outdir, o)) and
        os.path.getsize(os.path.join(outdir, o)) == m["files"][o]["size"] for o in OUTPUTS)


def build(args):
    outdir = os.path.abspath(args.output)
    parent = os.path.dirname(outdir)
    cache = os.path.abspath(args.cache or outdir + ".cache")
    progress = Progress(7)

    progress.step("resolving inputs: kernel, packages, agent")
    if not os.path.isfile(args.agent):
        raise BuildError(f"no agent at {args.agent} (build the hexr-agent target)")
    agent_sha = sha256_file(args.agent)
    drivers = session_drivers(args.drivers)
    drivers_sha = {n: sha256_file(p) for n, p in drivers.items()}
    kernel_pkg, kernel_version = resolve_kernel()
    runtimes = read_runtimes()
    packages = [r[1] for r in runtimes]
    # a language's packages must be there; those for "any" (certificates, time zones)
    # are taken when installed
    required = {r[1] for r in runtimes if r[0] != "any"}
    if args.source == "host":
        pkgs = installed_packages()
        roots = packages + sorted(n for n, p in pkgs.items() if p["essential"])
        names = closure(pkgs, [r for r in roots if r in pkgs or r in required])
        versions = {n: pkgs[n]["version"] for n in names}
    else:
        if not shutil.which("debootstrap"):
            raise BuildError("--from debootstrap needs debootstrap (apt-get install debootstrap)")
        names = packages
        versions = archive_versions(packages)
    key = inputs_key(kernel_pkg, kernel_version, versions, agent_sha, args.source, drivers_sha)
    print(f"      kernel {kernel_pkg} {kernel_version}; {len(names)} packages ({args.source}); "
          f"agent {agent_sha[:12]}")
    if not args.force and cache_valid(outdir, key):
        print(f"unchanged inputs: the image in {outdir} is reused")
        return 0

    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(outdir) + ".tmp-", dir=parent)
    try:
        progress.step(f"kernel: {kernel_pkg} {kernel_version}")
        deb = fetch_kernel(cache, kernel_pkg, kernel_version)
        kdir = os.path.join(tmp, "kernel")
        run(["dpkg-deb", "-x", deb, kdir])
        bz = [f for f in os.listdir(os.path.join(kdir, "boot")) if f.startswith("vmlinuz-")]
        if len(bz) != 1:
            raise BuildError("the kernel package has no single vmlinuz")
        kver = bz[0][len("vmlinuz-"):]
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or
                    os.lstat(os.path.join(kdir, "boot", bz[0])).st_mtime)
        shutil.copyfile(os.path.join(kdir, "boot", bz[0]), os.path.join(tmp, "vmlinuz"))
        extract_vmlinux(os.path.join(tmp, "vmlinuz"), os.path.join(tmp, "vmlinux"))
        print(f"      vmlinuz {human(os.path.getsize(os.path.join(tmp, 'vmlinuz')))}, "
              f"vmlinux {human(os.path.getsize(os.path.join(tmp, 'vmlinux')))}")

        progress.step("initramfs: agent and modules")
        groups = pick_modules(os.path.join(kdir, "lib/modules", kver))
        agent_copy = os.path.join(tmp, "init")
        subprocess.run(["strip", "--strip-all", "-o", agent_copy, args.agent], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not os.path.isfile(agent_copy):
            shutil.copyfile(args.agent, agent_copy)
        build_initramfs(os.path.join(tmp, "initramfs.img"), agent_copy, groups, epoch)
        os.unlink(agent_copy)
        modules = {g: [n for n, _ in mods] for g, mods in groups}
        print("      " + "; ".join(f"{g}: {', '.join(m) or '(built in)'}" for g, m in modules.items()) +
              f"; {human(os.path.getsize(os.path.join(tmp, 'initramfs.img')))}")

        staging = os.path.join(tmp, "root")
        os.makedirs(staging)
        if args.source == "host":
            progress.step(f"root files: {len(names)} packages installed on this host")
            files = root_files(pkgs, names)
            total = copy_tree(files, staging, progress)
            print(f"      {len(files)} files, {human(total)}")
            source = ("files of the Debian packages installed on the build host (dpkg file "
                      "lists), runtimes plus Essential plus their Depends closure")
        else:
            progress.step(f"root: debootstrap --variant=minbase {SUITE} with the runtimes (minutes)")
            mirror, versions = debootstrap_root(staging, cache, packages)
            print(f"      {len(versions)} packages from {mirror}")
            source = (f"debootstrap --variant=minbase {SUITE} from {mirror}, with "
                      f"{', '.join(packages)}; packages outside their Depends closure "
                      "and the Essential set purged")

        progress.step("root tree: session drivers, links, alternatives, ld.so.cache, timestamps")
        add_drivers(staging, drivers)
        finish_root(staging, epoch, host_alternatives=args.source == "host")
        dists = python_distributions(staging)
        lacking = [f"{r[2]} ({r[1]})" for r in runtimes if r[2] and normalize(r[2]) not in dists]
        if lacking:
            raise BuildError("the root lacks the Python distributions " + ", ".join(lacking) +
                             " of the runtime manifest")

        progress.step("rootfs.ext4 (read-only, no journal)")
        mb = make_ext4(staging, os.path.join(tmp, "rootfs.ext4"), epoch)
        shutil.rmtree(staging)
        shutil.rmtree(kdir)
        print(f"      {mb} MiB")

        progress.step("manifest and checksums")
        manifest = {
            "format": FORMAT,
            "inputs_sha256": key,
            "kernel": {"package": kernel_pkg, "version": kernel_version, "release": kver},
            "agent_sha256": agent_sha,
            "session_drivers": {"/" + DRIVERS_GUEST_DIR + "/" + n: sha for n, sha in drivers_sha.items()},
            "modules": modules,
            "source_date_epoch": epoch,
            "rootfs_source": source,
            "packages": versions,
            # what GET /api/v1/runtimes reports for the microVM backends
            "python_distributions": dists,
            "files": {o: {"sha256": sha256_file(os.path.join(tmp, o)),
                          "size": os.path.getsize(os.path.join(tmp, o))} for o in OUTPUTS},
        }
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
        for o in OUTPUTS + ("manifest.json",):
            os.chmod(os.path.join(tmp, o), 0o644)
        os.chmod(tmp, 0o755)

        old = None
        if os.path.exists(outdir):
            old = tempfile.mkdtemp(prefix=os.path.basename(outdir) + ".old-", dir=parent)
            os.rename(outdir, os.path.join(old, "x"))
        os.rename(tmp, outdir)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        print(f"image ready in {outdir}")
        return 0
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def info(args):
    outdir = os.path.abspath(args.dir)
    try:
        with open(os.path.join(outdir, "manifest.json")) as f:
            m = json.load(f)
    except OSError:
        print(f"no image in {outdir} (no manifest.json): run `hexr-sandbox image build`", file=sys.stderr)
        return 1
    except ValueError:
        print(f"{outdir}/manifest.json is not valid JSON: rebuild with `hexr-sandbox image build --force`",
              file=sys.stderr)
        return 1
    try:
        runtime_packages = [r[1] for r in read_runtimes()]
    except BuildError:
        runtime_packages = sorted(m["packages"])
    print(f"image {outdir}")
    print(f"  kernel   {m['kernel']['package']} {m['kernel']['version']}")
    print(f"  agent    sha256 {m['agent_sha256']}")
    print(f"  root     {m.get('rootfs_source', '?')}")
    print("  modules  " + "; ".join(f"{g}: {', '.join(v) or '(built in)'}" for g, v in m["modules"].items()))
    print(f"  packages {len(m['packages'])}: " + ", ".join(
        f"{p} {m['packages'][p]}" for p in runtime_packages if p in m["packages"]))
    missing = 0
    for o, meta in m["files"].items():
        p = os.path.join(outdir, o)
        if not os.path.isfile(p):
            print(f"  {o:14s} MISSING")
            missing += 1
        elif os.path.getsize(p) != meta["size"]:
            print(f"  {o:14s} WRONG SIZE ({os.path.getsize(p)}, manifest says {meta['size']})")
            missing += 1
        else:
            print(f"  {o:14s} {human(meta['size']):>10s}  sha256 {meta['sha256']}")
    return 1 if missing else 0


def main():
    ap = argparse.ArgumentParser(prog="hexr-sandbox image")
    sub = ap.add_subparsers(dest="verb", required=True)
    b = sub.add_parser("build")
    b.add_argument("--output", required=True)
    b.add_argument("--agent", required=True)
    b.add_argument("--cache", help="where downloaded .deb files are kept (default OUTPUT.cache)")
    b.add_argument("--force", action="store_true")
    b.add_argument("--drivers", help="the session drivers' directory (default: src/session/drivers "
                   "of the source tree, or session-drivers/ next to this script)")
    b.add_argument("--from", dest="source", choices=("host", "debootstrap"), default="host",
                   help="root files: the host's installed packages (default), or debootstrap")
    i = sub.add_parser("info")
    i.add_argument("dir")
    args = ap.parse_args()
    try:
        return build(args) if args.verb == "build" else info(args)
    except BuildError as e:
        print(f"hexr-sandbox image {args.verb}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"hexr-sandbox image {args.verb}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
