# SPDX-License-Identifier: Apache-2.0
# The package installer. It runs inside a sandbox like any program (no network,
# read-only root, the request's memory and time limits), never on the host. The
# engine binds the operator's wheelhouse read-only at /wheelhouse and an empty
# directory of its package cache writable at /target, and sends on stdin:
#   {"requirements": [...], "max_bytes": N, "max_files": N}
# It resolves the requirements against the image's own distributions and the
# wheelhouse (wheels only: nothing is built, no code of a package runs), unpacks the
# chosen wheels into /target, byte-compiles them, and prints one JSON line:
#   {"wheels": ["name-1.0-py3-none-any.whl", ...]}            exit 0
#   {"error": "not_found"|"invalid", "package": ..., "message": ...}   exit 3
#   {"error": "unreadable", "message": ...}   exit 4: the wheelhouse is not readable
import json
import os
import stat
import sys
import zipfile

try:
    from packaging.requirements import Requirement, InvalidRequirement
    from packaging.tags import sys_tags
    from packaging.utils import canonicalize_name
    from packaging.version import Version, InvalidVersion
except ImportError:  # Debian's pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement, InvalidRequirement
    from pip._vendor.packaging.tags import sys_tags
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import Version, InvalidVersion
from importlib import metadata

WHEELHOUSE = "/wheelhouse"
TARGET = "/target"
MAX_METADATA = 1 << 20
MAX_DISTS = 256


class Refused(Exception):
    def __init__(self, kind, package, message):
        super().__init__(message)
        self.kind, self.package, self.message = kind, package, message


def wheelhouse():
    """name -> [(version, filename)] of the compatible wheels."""
    supported = {str(t) for t in sys_tags()}
    found = {}
    for fn in sorted(os.listdir(WHEELHOUSE)):
        if not fn.endswith(".whl") or "/" in fn:
            continue
        parts = fn[:-4].split("-")
        if len(parts) not in (5, 6):
            continue
        name, ver, py, abi, plat = parts[0], parts[1], parts[-3], parts[-2], parts[-1]
        try:
            v = Version(ver)
        except InvalidVersion:
            continue
        tags = {f"{p}-{a}-{pl}" for p in py.split(".") for a in abi.split(".") for pl in plat.split(".")}
        if not tags & supported:
            continue
        found.setdefault(canonicalize_name(name), []).append((v, fn))
    return found


def in_image(name):
    try:
        return Version(metadata.version(name))
    except (metadata.PackageNotFoundError, InvalidVersion):
        return None


def read_metadata(fn, name):
    with zipfile.ZipFile(os.path.join(WHEELHOUSE, fn)) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                if info.file_size > MAX_METADATA:
                    raise Refused("invalid", name, f"{fn}: METADATA larger than {MAX_METADATA} bytes")
                with z.open(info) as f:
                    data = f.read(MAX_METADATA + 1)
                if len(data) > MAX_METADATA:
                    raise Refused("invalid", name, f"{fn}: METADATA larger than {MAX_METADATA} bytes")
                return data.decode("utf-8", "replace")
    raise Refused("invalid", name, f"{fn}: no .dist-info/METADATA")


def requires(meta_text, extras):
    out = []
    for line in meta_text.splitlines():
        if line == "":
            break  # end of the headers
        if not line.lower().startswith("requires-dist:"):
            continue
        try:
            req = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        if req.url:
            raise Refused("invalid", req.name, f"a dependency names a URL ({req.url}): not installed")
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            out.append(req)
    return out


def resolve(requirements):
    """Greedy: the newest compatible wheel that satisfies every specifier seen so far;
    a later specifier the choice does not meet is a conflict (no backtracking)."""
    house = wheelhouse()
    chosen = {}      # name -> (version, filename)
    queue = []
    for text in requirements:
        try:
            queue.append(Requirement(text))
        except InvalidRequirement as e:
            raise Refused("invalid", text, f"{text!r} is not a requirement: {e}")
    while queue:
        req = queue.pop(0)
        name = canonicalize_name(req.name)
        if name in chosen:
            if not req.specifier.contains(chosen[name][0], prereleases=True):
                raise Refused("not_found", req.name,
                              f"{req} conflicts with {name} {chosen[name][0]} chosen for another requirement")
            continue
        have = in_image(name)
        if have is not None and req.specifier.contains(have, prereleases=True):
            continue  # the image provides it
        candidates = sorted((c for c in house.get(name, []) if req.specifier.contains(c[0])), reverse=True)
        if not candidates:
            candidates = sorted((c for c in house.get(name, [])
                                 if req.specifier.contains(c[0], prereleases=True)), reverse=True)
        if not candidates:
            why = "is not in the wheelhouse" if name not in house else "has no wheel that satisfies it"
            raise Refused("not_found", req.name, f"{req} {why}" + ("" if have is None else f" (the image has {have})"))
        if len(chosen) >= MAX_DISTS:
            raise Refused("invalid", req.name, f"more than {MAX_DISTS} distributions to install")
        chosen[name] = candidates[0]
        queue.extend(requires(read_metadata(candidates[0][1], req.name), req.extras))
    return [fn for _, fn in chosen.values()]


def safe_path(fn, member):
    """The path under /target a wheel member goes to, or None to skip it."""
    if "\\" in member or "\0" in member or member.startswith("/"):
        raise Refused("invalid", fn, f"{fn}: member {member!r} has an absolute or odd path")
    parts = [p for p in member.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise Refused("invalid", fn, f"{fn}: member {member!r} escapes the install directory")
    if parts[0].endswith(".data"):
        # name-ver.data/<scheme>/...: purelib and platlib are ordinary code; scripts
        # would go to a bin directory nothing uses; headers and data would go outside
        # site-packages, which this installer refuses rather than guess.
        if len(parts) < 3:
            return None
        if parts[1] in ("purelib", "platlib"):
            parts = parts[2:]
        elif parts[1] == "scripts":
            return None
        else:
            raise Refused("invalid", fn, f"{fn}: installs {parts[1]} files outside site-packages (not supported)")
    return parts


def unpack(fn, budget):
    size = os.stat(os.path.join(WHEELHOUSE, fn)).st_size
    if size > budget["max_bytes"]:
        # the host hashes every chosen wheel: its size counts, not only what is unpacked
        raise Refused("invalid", fn, f"{fn}: {size >> 20} MiB, larger than the install allows")
    with zipfile.ZipFile(os.path.join(WHEELHOUSE, fn)) as z:
        for info in z.infolist():
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise Refused("invalid", fn, f"{fn}: member {info.filename!r} is a symbolic link")
            parts = safe_path(fn, info.filename)
            if parts is None:
                continue
            path = os.path.join(TARGET, *parts)
            if info.is_dir():
                os.makedirs(path, 0o755, exist_ok=True)
                continue
            budget["files"] -= 1
            if budget["files"] < 0:
                raise Refused("invalid", fn, "the packages have more files than the install allows")
            if info.file_size > budget["bytes"]:
                raise Refused("invalid", fn, "the packages are larger than the install allows")
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o755 if mode & 0o111 else 0o644)
            except FileExistsError:
                raise Refused("invalid", fn, f"{fn}: {'/'.join(parts)} is also installed by another wheel")
            with z.open(info) as src, os.fdopen(fd, "wb") as dst:
                while True:
                    chunk = src.read(1 << 16)
                    if not chunk:
                        break
                    budget["bytes"] -= len(chunk)  # what is written, not what the header says
                    if budget["bytes"] < 0:
                        raise Refused("invalid", fn, "the packages are larger than the install allows")
                    dst.write(chunk)


def main():
    req = json.loads(sys.stdin.read())
    budget = {"bytes": int(req["max_bytes"]), "files": int(req["max_files"]), "max_bytes": int(req["max_bytes"])}
    try:
        wheels = resolve(req["requirements"])
        for fn in wheels:
            try:
                unpack(fn, budget)
            except zipfile.BadZipFile as e:
                raise Refused("invalid", fn, f"{fn}: not a valid wheel ({e})")
            except PermissionError as e:
                if not (e.filename or "").startswith(WHEELHOUSE):
                    raise Refused("invalid", fn, f"{fn}: cannot be unpacked: {e.strerror} ({e.filename or ''})")
                raise
            except OSError as e:
                # EFBIG: one file above the sandbox's file size limit (SANDBOX_TMPFS_MB);
                # ENOTDIR, EEXIST...: members that collide with each other
                raise Refused("invalid", fn, f"{fn}: cannot be unpacked: {e.strerror} ({e.filename or ''})")
    except Refused as e:
        print(json.dumps({"error": e.kind, "package": e.package, "message": e.message}))
        sys.exit(3)
    except PermissionError as e:
        print(json.dumps({"error": "unreadable", "message": f"{e.strerror}: {e.filename}"}))
        sys.exit(4)
    import compileall
    import io
    import contextlib
    # The cache is read-only in the sandboxes that use it: compile now, once.
    with contextlib.redirect_stdout(io.StringIO()):
        compileall.compile_dir(TARGET, quiet=2, workers=1)
    print(json.dumps({"wheels": sorted(wheels)}))


main()
