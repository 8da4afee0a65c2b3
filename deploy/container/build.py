#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the OCI image of hexr-sandbox (`make image`) with buildah, from Debian packages only.

No base image is pulled. The root is assembled the way the microVM guest's root is
(scripts/image-build.py, whose functions this reuses): the files of the Debian packages
installed on the build host, for the runtimes the sandbox offers (scripts/runtimes.txt:
Python 3.11 with numpy, pandas, scipy, matplotlib, ...; Node.js; Bash), the libraries the service binary links, tini
(PID 1: reaps orphans, forwards SIGTERM) and the Essential set, with the closure of
their Depends. To that it adds:

  /usr/lib/hexr-sandbox/hexr-sandbox     the binary (debug info stripped)
  /usr/lib/hexr-sandbox/hexr-sandbox-http  what it hands `serve` to (the same CLI with
                                         the HTTP server and TLS linked)
  /usr/lib/hexr-sandbox/_hxs_zygote.so   the warm templates' module (found beside the binary)
  /usr/lib/hexr-sandbox/entrypoint.sh    prepares cgroups and /proc, then drops CAP_SYS_ADMIN
  /usr/bin/hexr-sandbox                  a link to the binary
  /usr/share/hexr-sandbox/manifest.json  the runtime manifest: packages and versions,
                                         checksums of the binary and the module

The tree is packed as one layer (sorted, numeric owner root, the files' own mtimes),
added to `buildah from scratch`, configured (entrypoint, settings as environment
variables, port, stop signal, labels) and committed as an OCI image into the local
containers storage, where podman runs it (deploy/container/run.sh).

Reused when nothing changed: the image carries a label with the hash of its inputs
(package versions, the binary, the module, this script and the root builder); when
an image of that tag has the same hash, the build says so and stops.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
ENTRYPOINT = os.path.join(HERE, "entrypoint.sh")
FORMAT = 1
INPUTS_LABEL = "dev.hexr-sandbox.inputs"
# Besides image-build.py's runtimes: tini as PID 1. The service reaps only the
# processes it started; a warm template's sandbox whose template died would be
# reparented to PID 1 and stay a zombie under a PID 1 that does not reap.
# mount: the entrypoint's cgroup remount and proc mount (deploy/container/entrypoint.sh).
EXTRA_PACKAGES = ["tini", "mount"]
# The settings an image starts with (the seed's table; anything else at its default).
# LISTEN_ADDRESS: all interfaces of the container's own network namespace. A
# non-loopback address still needs identified callers or ALLOW_NON_LOOPBACK=on (see
# docs/deploy.md): the image does not turn that check off.
IMAGE_ENV = {
    "LISTEN_ADDRESS": ":8080",
    "MAX_EXECUTION_TIME": "30s",
    "MAX_MEMORY_MB": "512",
    "SANDBOX_BACKEND": "namespaces",
    "STATE_DIR": "/run/hexr-sandbox",
    # warm templates need three more capabilities in the service (docs/deploy.md):
    # the image starts with the fewest, and SANDBOX_WARM=on asks for them
    "SANDBOX_WARM": "off",
}


def load_image_builder():
    spec = importlib.util.spec_from_file_location("image_build", os.path.join(SOURCE, "scripts", "image-build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ib = load_image_builder()
BuildError = ib.BuildError


def sha256_file(path):
    return ib.sha256_file(path)


def linked_packages(binaries):
    """The Debian packages that hold the shared libraries the binaries link."""
    paths = set()
    for b in binaries:
        for line in ib.run(["ldd", b]).splitlines():
            parts = line.split()
            for p in parts:
                if p.startswith("/"):
                    paths.add(p)
                    break
    names = set()
    for p in sorted(paths):
        candidates = {p, os.path.realpath(p)}
        for c in list(candidates):
            if c.startswith("/usr/lib/"):
                candidates.add(c[len("/usr"):])
        found = False
        for c in sorted(candidates):
            r = subprocess.run(["dpkg-query", "-S", c], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if r.returncode == 0:
                for line in r.stdout.splitlines():
                    names.add(line.split(":")[0].split(",")[0].strip())
                found = True
                break
        if not found:
            raise BuildError(f"{p}, linked by the service, belongs to no installed Debian package")
    return sorted(names)


def runner():
    for tool in ("buildah", "podman"):
        if shutil.which(tool):
            return tool
    raise BuildError("neither buildah nor podman is installed (scripts/setup.sh installs them)")


def existing_inputs(tag):
    tool = runner()
    if tool == "buildah":
        cmd = ["buildah", "inspect", "--type", "image", "--format",
               "{{index .OCIv1.Config.Labels \"" + INPUTS_LABEL + "\"}}", tag]
    else:
        cmd = ["podman", "image", "inspect", "--format", "{{index .Labels \"" + INPUTS_LABEL + "\"}}", tag]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def write_etc(staging):
    """What a running service reads of /etc beyond the packages' own files."""
    etc = os.path.join(staging, "etc")
    with open(os.path.join(etc, "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    with open(os.path.join(etc, "group"), "w") as f:
        f.write("root:x:0:\nnogroup:x:65534:\n")
    with open(os.path.join(etc, "hexr-image"), "w") as f:
        f.write("hexr-sandbox OCI image: files of Debian packages installed on the build host\n")
    for d in ("root", "var/cache/hexr-sandbox", "run/hexr-sandbox"):
        os.makedirs(os.path.join(staging, d), exist_ok=True)
    os.chmod(os.path.join(staging, "root"), 0o700)
    os.chmod(os.path.join(staging, "tmp"), 0o1777)


def install_service(staging, binary, http, module):
    lib = os.path.join(staging, "usr/lib/hexr-sandbox")
    os.makedirs(lib, exist_ok=True)
    for src, name in ((binary, "hexr-sandbox"), (http, "hexr-sandbox-http"), (module, "_hxs_zygote.so")):
        dst = os.path.join(lib, name)
        r = subprocess.run(["strip", "--strip-debug", "-o", dst, src], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            shutil.copyfile(src, dst)
        os.chmod(dst, 0o644 if name.endswith(".so") else 0o755)
    shutil.copyfile(ENTRYPOINT, os.path.join(lib, "entrypoint.sh"))
    os.chmod(os.path.join(lib, "entrypoint.sh"), 0o755)
    link = os.path.join(staging, "usr/bin/hexr-sandbox")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink("../lib/hexr-sandbox/hexr-sandbox", link)


def pack_layer(staging, out, epoch):
    # GNU tar: sorted names, numeric root owner, no atime/ctime: the same tree gives the same layer
    ib.run(["tar", "--sort=name", "--numeric-owner", "--owner=0", "--group=0", "--xattrs",
            "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
            f"--mtime=@{epoch}", "--clamp-mtime", "-C", staging, "-cf", out, "."])


def buildah(*args):
    return ib.run(["buildah"] + list(args)).strip()


def build(args):
    t0 = time.monotonic()
    binary = os.path.abspath(os.path.join(args.build, "hexr-sandbox"))
    http = os.path.abspath(os.path.join(args.build, "hexr-sandbox-http"))
    module = os.path.abspath(os.path.join(args.build, "_hxs_zygote.so"))
    for p in (binary, http, module):
        if not os.path.isfile(p):
            raise BuildError(f"no {p}: build the project first (make build)")
    if not shutil.which("buildah"):
        raise BuildError("buildah is not installed (scripts/setup.sh installs it)")
    version = ib.run([binary, "version"]).split()[-1] if args.version is None else args.version
    tag = args.tag or f"hexr-sandbox:{version}"

    pkgs = ib.installed_packages()
    roots = [r[1] for r in ib.read_runtimes()] + EXTRA_PACKAGES + linked_packages([binary, http, module])
    missing = [r for r in roots if r not in pkgs]
    if missing:
        raise BuildError(f"not installed on this host: {', '.join(missing)} (scripts/setup.sh installs them)")
    roots += sorted(n for n, p in pkgs.items() if p["essential"])
    names = ib.closure(pkgs, roots)
    versions = {n: pkgs[n]["version"] for n in names}
    config = {"env": IMAGE_ENV, "entrypoint": entrypoint(), "cmd": ["serve"], "port": 8080}
    key = hashlib.sha256(json.dumps({
        "format": FORMAT, "packages": versions, "binary": sha256_file(binary), "http": sha256_file(http), "module": sha256_file(module),
        "builder": sha256_file(os.path.abspath(__file__)), "entrypoint": sha256_file(ENTRYPOINT), "root_builder": sha256_file(ib.__file__),
        "config": config, "version": version}, sort_keys=True).encode()).hexdigest()
    print(f"image {tag}: {len(names)} packages, binary {sha256_file(binary)[:12]}, inputs {key[:12]}", flush=True)
    if not args.force and existing_inputs(tag) == key:
        tag_latest(tag, args)
        print(f"unchanged inputs: the image {tag} is reused ({time.monotonic() - t0:.1f} s)")
        return 0

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or os.lstat(binary).st_mtime)
    tmp = tempfile.mkdtemp(prefix="hexr-image.", dir=args.tmpdir)
    ctr = None
    try:
        staging = os.path.join(tmp, "root")
        os.makedirs(staging)
        progress = ib.Progress(4)
        progress.step(f"root files: {len(names)} packages installed on this host")
        files = ib.root_files(pkgs, names)
        total = ib.copy_tree(files, staging, progress)
        print(f"      {len(files)} files, {ib.human(total)}", flush=True)
        ib.finish_root(staging, epoch)
        write_etc(staging)
        install_service(staging, binary, http, module)
        manifest = {"format": FORMAT, "inputs_sha256": key, "version": version, "packages": versions,
                    "binary_sha256": sha256_file(os.path.join(staging, "usr/lib/hexr-sandbox/hexr-sandbox")),
                    "http_sha256": sha256_file(os.path.join(staging, "usr/lib/hexr-sandbox/hexr-sandbox-http")),
                    "module_sha256": sha256_file(os.path.join(staging, "usr/lib/hexr-sandbox/_hxs_zygote.so")),
                    "root_source": "files of the Debian packages installed on the build host (dpkg file lists)"}
        os.makedirs(os.path.join(staging, "usr/share/hexr-sandbox"), exist_ok=True)
        with open(os.path.join(staging, "usr/share/hexr-sandbox/manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")

        progress.step("layer: one sorted tar")
        layer = os.path.join(tmp, "layer.tar")
        pack_layer(staging, layer, epoch)
        shutil.rmtree(staging)
        print(f"      {ib.human(os.path.getsize(layer))}", flush=True)

        progress.step("buildah: from scratch, add the layer, configure")
        ctr = buildah("from", "--quiet", "scratch")
        buildah("add", "--quiet", ctr, layer, "/")
        cfg = ["config", "--entrypoint", json.dumps(entrypoint()), "--cmd", json.dumps(["serve"]),
               "--port", "8080/tcp", "--stop-signal", "SIGTERM", "--workingdir", "/",
               "--os", "linux", "--arch", "amd64",
               "--label", f"{INPUTS_LABEL}={key}",
               "--label", f"org.opencontainers.image.version={version}",
               "--label", "org.opencontainers.image.title=hexr-sandbox",
               "--label", "org.opencontainers.image.description=Sandbox Engine: runs untrusted code in fresh, isolated sandboxes"]
        for k, v in IMAGE_ENV.items():
            cfg += ["--env", f"{k}={v}"]
        buildah(*cfg, ctr)

        progress.step(f"commit {tag}")
        old = image_id(tag)
        buildah("commit", "--quiet", "--format", "oci", "--rm", ctr, tag)
        ctr = None
        tag_latest(tag, args)
        if old and old != image_id(tag):
            # the previous build of this tag, now untagged: not kept (hundreds of MB)
            subprocess.run(["buildah", "rmi", old], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"image {tag} built ({time.monotonic() - t0:.1f} s)")
        return 0
    finally:
        if ctr:
            subprocess.run(["buildah", "rm", ctr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def image_id(tag):
    r = subprocess.run(["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", tag],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def tag_latest(tag, args):
    """hexr-sandbox:VERSION is also hexr-sandbox:latest, which run.sh starts."""
    if not args.tag:
        buildah("tag", tag, "hexr-sandbox:latest")


def entrypoint():
    # tini forwards SIGTERM to the service alone (not its process group: the
    # sandboxes of running executions must be left to finish while it drains);
    # the command (default: serve) is the service's verb
    return ["/usr/bin/tini", "--", "/usr/lib/hexr-sandbox/entrypoint.sh"]


def main():
    ap = argparse.ArgumentParser(prog="deploy/container/build.py", description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"), help="the CMake build tree (default build/)")
    ap.add_argument("--tag", help="image name (default hexr-sandbox:VERSION)")
    ap.add_argument("--version", help=argparse.SUPPRESS)
    ap.add_argument("--tmpdir", default=None, help="where the root is staged (default $TMPDIR)")
    ap.add_argument("--force", action="store_true", help="build even when the inputs are unchanged")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("deploy/container/build.py: needs root (rootful buildah storage, which podman runs from)",
              file=sys.stderr)
        return 1
    try:
        return build(args)
    except (BuildError, OSError) as e:
        print(f"deploy/container/build.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
