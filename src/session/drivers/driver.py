# hexr-sandbox's session driver: the program a session's sandbox runs, for every language.
#
#   /usr/bin/python3 -B <drivers>/driver.py --language python|javascript|bash
#
# It reads commands as JSON lines on its stdin and answers with JSON lines on its fd 1
# (docs/session-driver.md is the protocol). The user's fds 0, 1 and 2, and those of every
# process it starts, are not the protocol's: stdin is /dev/null, fds 1 and 2 are pipes
# this driver reads and frames as stdout/stderr events of the cell that runs. Python
# cells run in this process, in one persistent __main__; bash cells are sourced by one
# bash kept for the session, javascript cells run by one node running driver.js beside
# this file. File operations (put, get, list, collect) are done here for every
# language, relative to the working directory the session started in, following no
# symlink. Standard library only: the sandbox has nothing else for sure.
import ast
import base64
import codecs
import errno
import fcntl
import fnmatch
import io
import json
import os
import queue
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback

DRIVER_FILE = os.path.abspath(__file__)
READ_CHUNK = 65536            # bytes of output per event: a line stays far below 4 MiB
CMD_LINE_MAX = 256 << 20      # a command line longer than this is dropped
WALK_DEPTH_MAX = 32           # as exec's files out (src/engine/files-out.c)
WALK_ENTRIES_MAX = 100000
PATH_MAX = 255                # as exec's path rule (src/engine/request-files.c)


# ---------------------------------------------------------------- protocol out

def _clean(v):
    """Values a strict JSON parser takes: strings without NUL or lone surrogates, no
    NaN or infinity."""
    if isinstance(v, str):
        if "\x00" in v:
            v = v.replace("\x00", "\ufffd")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            v = v.encode("utf-8", "replace").decode("utf-8")
        return v
    if isinstance(v, dict):
        return {_clean(str(k)): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None                         # NaN and infinities are not JSON
    return v


class Proto:
    """The protocol's fd: one writer at a time, whole lines."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()
        self.broken = False

    def emit(self, obj):
        try:
            line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            line = json.dumps(_clean(obj), ensure_ascii=False, separators=(",", ":"), default=str)
        try:
            data = line.encode("utf-8") + b"\n"
            if b"\\u0000" in data or "\x00" in line:
                raise UnicodeError
        except UnicodeError:
            data = json.dumps(_clean(obj), ensure_ascii=False, separators=(",", ":"),
                              default=str).encode("utf-8") + b"\n"
        with self.lock:
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self.fd, view)
                except InterruptedError:
                    continue
                except OSError:
                    # the host is gone (or a cell closed our fd): nothing left to say
                    self.broken = True
                    os._exit(3)
                view = view[n:]


def text_or_base64(data):
    """Output bytes as the protocol carries them: text when UTF-8 (and no NUL)."""
    if b"\x00" not in data:
        try:
            return {"text": data.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {"base64": base64.b64encode(data).decode("ascii")}


# ---------------------------------------------------------------- output capture

class Capture:
    """One of the user's fds (1 or 2): a pipe read by a thread, framed as events of the
    cell running now. sync() returns once every byte written before it is framed, so a
    display event or a done never overtakes what was printed before it."""

    def __init__(self, proto, state, fd, name):
        self.proto, self.state, self.name = proto, state, name
        r, w = os.pipe()
        os.dup2(w, fd)                      # inheritable: children write here too
        self.fd, self.w = fd, w             # w kept: restore() puts it back on fd
        self.r = r
        os.set_blocking(r, False)
        self.lock = threading.Lock()
        self.pending = b""                  # a UTF-8 sequence cut by a read
        threading.Thread(target=self._run, daemon=True, name="capture-" + name).start()

    def _run(self):
        while True:
            try:
                select.select([self.r], [], [])
            except InterruptedError:
                continue
            with self.lock:
                if not self._read_some():
                    return

    def _read_some(self):
        try:
            data = os.read(self.r, READ_CHUNK)
        except BlockingIOError:
            return True                    # sync() took it first
        except InterruptedError:
            return True
        if not data:
            self._flush()
            return False
        data = self.pending + data
        self.pending = b""
        if b"\x00" not in data:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as e:
                if e.reason == "unexpected end of data" and len(data) - e.start < 4:
                    data, self.pending = data[:e.start], data[e.start:]
        self._send(data)
        return True

    def _send(self, data):
        if data:
            ev = {"ev": self.name, "id": self.state.cell_id}
            ev.update(text_or_base64(data))
            self.proto.emit(ev)

    def _flush(self):
        data, self.pending = self.pending, b""
        self._send(data)

    def restore(self):
        """A cell that closed or redirected fd 1 or 2: the next cell has it again."""
        try:
            same = os.path.samestat(os.fstat(self.fd), os.fstat(self.w))
        except OSError:
            same = False
        if not same:
            os.dup2(self.w, self.fd)

    def sync(self):
        with self.lock:
            while True:
                buf = fcntl.ioctl(self.r, termios.FIONREAD, b"\0\0\0\0")
                if struct.unpack("i", buf)[0] <= 0:
                    break
                if not self._read_some():
                    break
            self._flush()


class State:
    """What the reader thread and the cell runner share."""

    def __init__(self):
        self.cell_id = None                 # the cell output is framed for
        self.running = None                 # id of the cell in user code now, or None
        self.interrupted = False
        self.early = None                   # id of a cell interrupted before it began
        self.lock = threading.Lock()

    def begin(self, cid):
        """The cell's code may run now: False when its interrupt came first (sent as
        the engine gave it, read before this thread took it up), so it never runs."""
        with self.lock:
            if self.early == cid:
                self.early = None
                self.interrupted = True
                return False
            self.running = cid
            return True


# ---------------------------------------------------------------- file operations

class FileOpError(Exception):
    def __init__(self, type_, message):
        super().__init__(message)
        self.type = type_


def normalize_path(p, allow_empty=False):
    """exec's path rule (src/engine/request-files.c): relative, no "..", no control
    characters, "." and repeated slashes dropped, at most 255 bytes."""
    if not isinstance(p, str):
        raise FileOpError("InvalidPath", "path: must be a string")
    if p == "" and allow_empty:
        return ""
    if p == "":
        raise FileOpError("InvalidPath", "path: is empty")
    if p.startswith("/"):
        raise FileOpError("InvalidPath", "%s: must be relative to the working directory" % p)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in p):
        raise FileOpError("InvalidPath", "%r: contains a control character" % p)
    parts = []
    for seg in p.split("/"):
        if seg == "..":
            raise FileOpError("InvalidPath", "%s: must not contain .." % p)
        if seg and seg != ".":
            parts.append(seg)
    out = "/".join(parts)
    if len(out.encode("utf-8", "surrogateescape")) > PATH_MAX:
        raise FileOpError("InvalidPath", "%s: is longer than 255 bytes" % p)
    if not out and not allow_empty:
        raise FileOpError("InvalidPath", "%s: names no file" % p)
    return out


def os_error(path, e):
    if e.errno == errno.ELOOP:
        return FileOpError("SymlinkError", "%s: is a symbolic link (not followed)" % path)
    return FileOpError(type(e).__name__, "%s: %s" % (path, e.strerror or e))


class Files:
    """The working directory, held by an fd: a cell that changes directory does not move
    it. Every component is opened with O_NOFOLLOW from its parent's fd."""

    def __init__(self, proto):
        self.proto = proto
        self.home = os.open(".", os.O_RDONLY | os.O_DIRECTORY)

    def _open_dir(self, parts, create=False):
        fd = os.dup(self.home)
        try:
            for seg in parts:
                if create:
                    try:
                        os.mkdir(seg, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                nfd = os.open(seg, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open(self, path, flags, mode=0o644, create_dirs=False):
        parts = path.split("/")
        dfd = self._open_dir(parts[:-1], create=create_dirs)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NOCTTY, mode, dir_fd=dfd)
        finally:
            os.close(dfd)

    def put(self, cmd):
        path = normalize_path(cmd.get("path"))
        try:
            data = base64.b64decode(cmd.get("base64") or "", validate=True)
        except (ValueError, TypeError):
            raise FileOpError("InvalidData", "base64: is not valid base64")
        try:
            fd = self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK,
                            create_dirs=True)
        except OSError as e:
            raise os_error(path, e)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileOpError("NotARegularFile", "%s: is not a regular file" % path)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            raise os_error(path, e)
        finally:
            os.close(fd)
        return {"path": path, "size": len(data)}

    def get(self, cmd):
        path = normalize_path(cmd.get("path"))
        max_bytes = int(cmd.get("max_bytes") or 0)
        offset = max(0, int(cmd.get("offset") or 0))
        try:
            fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            raise os_error(path, e)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise FileOpError("IsADirectoryError", "%s: is a directory" % path)
            if not stat.S_ISREG(st.st_mode):
                raise FileOpError("NotARegularFile", "%s: is not a regular file" % path)
            want = st.st_size - offset if max_bytes <= 0 else min(max_bytes, st.st_size - offset)
            data = os.pread(fd, max(0, want), offset) if want > 0 else b""
        except OSError as e:
            raise os_error(path, e)
        finally:
            os.close(fd)
        self.proto.emit({"ev": "file", "id": cmd.get("id"), "path": path, "size": st.st_size,
                         "offset": offset, "base64": base64.b64encode(data).decode("ascii"),
                         "truncated": offset + len(data) < st.st_size})
        return {}

    def list(self, cmd):
        path = normalize_path(cmd.get("path") or "", allow_empty=True)
        max_entries = int(cmd.get("max_entries") or 0) or 10000
        try:
            dfd = self._open_dir(path.split("/") if path else [])
        except OSError as e:
            raise os_error(path or ".", e)
        try:
            names = sorted(os.listdir(dfd))
            n = 0
            for name in names:
                if n >= max_entries:
                    return {"truncated": True}
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except OSError:
                    continue
                kind = "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"
                self.proto.emit({"ev": "entry", "id": cmd.get("id"),
                                 "path": (path + "/" + name) if path else name,
                                 "type": kind, "size": st.st_size if kind == "file" else 0})
                n += 1
        finally:
            os.close(dfd)
        return {"truncated": False}

    def collect(self, cmd):
        """exec's files out (src/engine/files-out.c): regular files under output/ and those
        matching the globs, in path order, at most max_files, their bytes within max_bytes
        in all (the files past it listed with truncated and no content)."""
        globs = [g for g in (cmd.get("globs") or []) if isinstance(g, str)]
        max_files = int(cmd.get("max_files") or 100)
        budget = int(cmd.get("max_bytes") or (64 << 20))
        found = []
        seen = [0]
        home_dev = os.fstat(self.home).st_dev

        def wanted(rel):
            return rel.startswith("output/") or any(glob_match(g, rel) for g in globs)

        def walk(dfd, rel, depth):
            try:
                names = os.listdir(dfd)
            except OSError:
                return
            for name in names:
                seen[0] += 1
                if seen[0] > WALK_ENTRIES_MAX:
                    return
                path = rel + "/" + name if rel else name
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode) and depth < WALK_DEPTH_MAX and st.st_dev == home_dev:
                    try:
                        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
                    except OSError:
                        continue
                    try:
                        walk(sub, path, depth + 1)
                    finally:
                        os.close(sub)
                elif stat.S_ISREG(st.st_mode) and wanted(path):
                    found.append(path)

        try:
            if globs:
                start = os.dup(self.home)
                rel, depth = "", 0
            else:
                start = self._open_dir(["output"])
                rel, depth = "output", 1
        except OSError:
            return {"files": 0}
        try:
            walk(start, rel, depth)
        finally:
            os.close(start)
        n = 0
        for path in sorted(found):
            if n >= max_files:
                break
            try:
                fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue
                ev = {"ev": "file", "id": cmd.get("id"), "path": path, "size": st.st_size,
                      "truncated": st.st_size > budget}
                if not ev["truncated"]:
                    data = os.pread(fd, st.st_size, 0) if st.st_size else b""
                    budget -= len(data)
                    ev["base64"] = base64.b64encode(data).decode("ascii")
                self.proto.emit(ev)
                n += 1
            except OSError:
                continue
            finally:
                os.close(fd)
        return {"files": n}


def glob_match(pattern, path):
    """exec's return globs: one segment of the pattern per segment of the path (fnmatch
    with FNM_PERIOD), "**" any number of segments."""
    pat = pattern.split("/")
    segs = path.split("/")

    def seg_ok(p, s):
        if s.startswith(".") and not p.startswith("."):
            return False
        return fnmatch.fnmatchcase(s, p)

    def match(i, j):
        if i == len(pat):
            return j == len(segs)
        if pat[i] == "**":
            if i + 1 == len(pat):
                return True
            return any(match(i + 1, k) for k in range(j, len(segs)))
        return j < len(segs) and seg_ok(pat[i], segs[j]) and match(i + 1, j + 1)

    return match(0, 0)


# ---------------------------------------------------------------- python cells

def mime_bundle(obj):
    """What Jupyter shows of a value: text/plain always, the rich forms it has."""
    data = {}
    fig_png = figure_png(obj)
    if fig_png is not None:
        data["image/png"] = fig_png
    for meth, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                       ("_repr_svg_", "image/svg+xml"), ("_repr_latex_", "text/latex"),
                       ("_repr_json_", "application/json"), ("_repr_png_", "image/png"),
                       ("_repr_jpeg_", "image/jpeg")):
        f = getattr(type(obj), meth, None)
        if f is None or mime in data:
            continue
        try:
            v = getattr(obj, meth)()
        except Exception:
            continue
        if isinstance(v, tuple):              # (data, metadata)
            v = v[0]
        if v is None:
            continue
        if mime in ("image/png", "image/jpeg"):
            if isinstance(v, str):
                data[mime] = v
            elif isinstance(v, (bytes, bytearray)):
                data[mime] = base64.b64encode(bytes(v)).decode("ascii")
        elif mime == "application/json":
            try:
                json.dumps(v, allow_nan=False)
                data[mime] = v
            except (TypeError, ValueError):
                pass
        elif isinstance(v, str):
            data[mime] = v
    mb = getattr(type(obj), "_repr_mimebundle_", None)
    if mb is not None:
        try:
            extra = obj._repr_mimebundle_()
            if isinstance(extra, tuple):
                extra = extra[0]
            for k, v in (extra or {}).items():
                if isinstance(k, str) and k not in data and isinstance(v, (str, dict, list)):
                    data[k] = v
        except Exception:
            pass
    try:
        data["text/plain"] = repr(obj)
    except Exception as e:
        data["text/plain"] = "<repr failed: %s: %s>" % (type(e).__name__, e)
    return data


def figure_png(obj):
    """A matplotlib Figure as base64 PNG, or None (matplotlib never imported here)."""
    mf = sys.modules.get("matplotlib.figure")
    if mf is None or not isinstance(obj, getattr(mf, "Figure", ())):
        return None
    buf = io.BytesIO()
    try:
        obj.savefig(buf, format="png", bbox_inches="tight")
    except Exception:
        return None
    return base64.b64encode(buf.getvalue()).decode("ascii")


class PythonKernel:
    """Cells in one persistent __main__, the last expression's value as a mime bundle."""

    def __init__(self, proto, state, captures):
        self.proto, self.state, self.captures = proto, state, captures
        self.n = 0
        self.pid = os.getpid()
        self.loop = None
        import types
        main = types.ModuleType("__main__")
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main     # pickle and multiprocessing find cell classes
        self.ns = main.__dict__
        sys.argv = [""]
        sys.path[0] = ""                    # a module in the working directory imports
        os.environ.setdefault("MPLBACKEND", "Agg")
        import builtins
        builtins.display = self.display
        self._install_hooks()

    def version(self):
        import platform
        return platform.python_version()

    # -- display(), plt.show(), IPython.display when IPython is absent

    def flush_user_output(self):
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass
        for c in self.captures:
            c.sync()

    def display(self, *objs, **kwargs):
        raw = kwargs.get("raw", False)
        for obj in objs:
            data = obj if raw and isinstance(obj, dict) else mime_bundle(obj)
            self.flush_user_output()
            self.proto.emit({"ev": "display", "id": self.state.cell_id, "data": data})

    def show_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in list(plt.get_fignums()):
            fig = plt.figure(num)
            png = figure_png(fig)
            plt.close(fig)
            if png is not None:
                self.flush_user_output()
                self.proto.emit({"ev": "display", "id": self.state.cell_id,
                                 "data": {"image/png": png, "text/plain": repr(fig)}})

    def _install_hooks(self):
        kernel = self
        # the exec sitecustomize's chart hook saves figures to output/: a session shows them
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "__name__", "") != "_HxsPyplotHook"
                            and type(f).__name__ != "_HxsPyplotHook"]

        class PyplotHook:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name != "matplotlib.pyplot":
                    return None
                sys.meta_path.remove(PyplotHook)
                import importlib.util
                spec = importlib.util.find_spec(name)
                loader = getattr(spec, "loader", None)
                if loader is None or not hasattr(loader, "exec_module"):
                    return spec
                run = loader.exec_module

                def exec_module(module):
                    run(module)

                    def show(*args, **kw):
                        kernel.show_figures()
                    show.__doc__ = module.show.__doc__
                    module.show = show
                loader.exec_module = exec_module
                return spec

        sys.meta_path.insert(0, PyplotHook)

        import importlib.util
        if importlib.util.find_spec("IPython") is None:
            sys.meta_path.append(ipython_finder(self.display))

    # -- one cell

    def compile_cell(self, code, name):
        import linecache
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, name, "exec", flags=flags)
        expr = compile(last, name, "eval", flags=flags) if last is not None else None
        return body, expr

    def run_code(self, co):
        r = eval(co, self.ns)
        if co.co_flags & 0x80:             # CO_COROUTINE: the cell awaits at top level
            # one loop for the session, as a kernel has: what a cell made on it stays usable
            if self.loop is None:
                import asyncio
                self.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(self.loop)
            r = self.loop.run_until_complete(r)
        return r

    def exec_cell(self, cid, code):
        self.n += 1
        name = "<cell-%d>" % self.n
        value, exc, status = None, None, "ok"
        try:
            try:
                body, expr = self.compile_cell(code, name)
                if not self.state.begin(cid):
                    raise KeyboardInterrupt
                self.run_code(body)
                v = self.run_code(expr) if expr is not None else None
                if v is not None:
                    plt = sys.modules.get("matplotlib.pyplot")
                    if plt is not None and figure_png(v) is not None and v.number in plt.get_fignums():
                        value = mime_bundle(v)
                        plt.close(v)
                    else:
                        value = mime_bundle(v)
                    self.ns["_"] = v
            finally:
                if os.getpid() != self.pid:
                    os._exit(0)             # a cell forked: its child ends with the cell
                self.state.running = None
            self.show_figures()
        except KeyboardInterrupt as e:
            status = "interrupted" if self.state.interrupted else "exception"
            exc = exception_info(e)
        except BaseException as e:         # SystemExit too: the session goes on
            status = "exception"
            exc = exception_info(e)
        self.flush_user_output()
        return {"status": status, "value": value, "exception": exc}


def without_driver_frames(te, seen=None):
    """Drops the driver's frames from a TracebackException and those chained to it:
    the ones that ran the cell (first) and the SIGINT handler that raised an
    interrupt's KeyboardInterrupt (last)."""
    seen = set() if seen is None else seen
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != DRIVER_FILE])
    without_driver_frames(te.__cause__, seen)
    without_driver_frames(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        without_driver_frames(sub, seen)


def exception_info(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == DRIVER_FILE:
        tb = tb.tb_next
    if isinstance(e, SyntaxError) and tb is None:
        text = "".join(traceback.format_exception_only(type(e), e))
    else:
        try:
            te = traceback.TracebackException(type(e), e, tb)
            without_driver_frames(te)
            text = "".join(te.format())
        except Exception:              # whatever the cell made of its exception
            text = "".join(traceback.format_exception(type(e), e, tb))
    try:
        msg = str(e)
    except Exception:
        msg = ""
    return {"type": type(e).__name__, "message": msg, "traceback": text}


def ipython_finder(display):
    """IPython.display for a sandbox without IPython: display() and the usual wrappers."""
    import importlib.abc
    import importlib.util
    import types

    class Rich:
        mime = "text/plain"

        def __init__(self, data=None, url=None, filename=None, **kw):
            if filename is not None:
                with open(filename, "rb") as f:
                    data = f.read()
            self.data = data

        def __repr__(self):
            return "<%s object>" % type(self).__name__

    def make(mime, binary=False):
        class C(Rich):
            def _repr_mimebundle_(self, include=None, exclude=None):
                d = self.data
                if binary:
                    d = base64.b64encode(d).decode("ascii") if isinstance(d, (bytes, bytearray)) else d
                elif isinstance(d, (bytes, bytearray)):
                    d = d.decode("utf-8", "replace")
                return {mime: d}
        return C

    classes = {"HTML": make("text/html"), "Markdown": make("text/markdown"),
               "Latex": make("text/latex"), "SVG": make("image/svg+xml"),
               "JSON": make("application/json"), "Javascript": make("application/javascript")}

    class Image(Rich):
        def __init__(self, data=None, url=None, filename=None, format=None, **kw):
            super().__init__(data, url, filename)
            self.format = format or ("jpeg" if filename and filename.lower().endswith((".jpg", ".jpeg")) else "png")

        def _repr_mimebundle_(self, include=None, exclude=None):
            return {"image/" + self.format: base64.b64encode(self.data or b"").decode("ascii")}

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            if module.__name__ == "IPython":
                module.__path__ = []
                module.get_ipython = lambda: None
                module.display = sys.modules.get("IPython.display") or None
            else:
                module.display = display
                module.Image = Image
                for k, v in classes.items():
                    setattr(module, k, v)
                module.clear_output = lambda wait=False: None
                parent = sys.modules.get("IPython")
                if parent is not None:
                    parent.display = module

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in ("IPython", "IPython.display"):
                return importlib.util.spec_from_loader(name, Loader(), is_package=(name == "IPython"))
            return None

    return Finder


# ---------------------------------------------------------------- bash and node cells

BASH_LOOP = r"""
builtin readonly __hxs_ctl=$1 __hxs_ans=$2
builtin shift 2
exec {__hxs_out}>&1 {__hxs_err}>&2
builtin readonly __hxs_out __hxs_err
builtin printf 'ready %s\n' "$BASH_VERSION" >&"$__hxs_ans"
while builtin :; do
  IFS= builtin read -r -u "$__hxs_ctl" __hxs_cell || { (( $? > 128 )) && builtin continue; builtin break; }
  builtin unset -f command 2>/dev/null
  command exec 1>&"$__hxs_out" 2>&"$__hxs_err"
  builtin trap 'builtin return 130 2>/dev/null' INT
  builtin source "$__hxs_cell" </dev/null
  __hxs_status=$?
  builtin trap - INT
  builtin printf 'done %d\n' "$__hxs_status" >&"$__hxs_ans"
done
"""


# bash: how often, and how long apart, an interrupted cell that still runs is
# interrupted again (ChildKernel._interrupt_again)
INTERRUPT_AGAIN_TIMES = 20
INTERRUPT_AGAIN_S = 0.5


class ChildKernel:
    """A bash or node kept for the session: a cell goes in on a command pipe, the answer
    comes back on an answer pipe (their fd numbers are its arguments), its fds 1 and 2
    are the captured ones. If it exits (a cell ran
    exit), the cell says so and a new one is started: the state in it is lost."""

    def __init__(self, proto, state, captures, language, private_dir):
        self.proto, self.state, self.captures = proto, state, captures
        self.language = language
        self.dir = private_dir
        self.n = 0
        self.proc = None
        self._version = None
        self.before = set()                 # node's children when the running cell began
        self.start()

    def start(self):
        ctl_r, ctl_w = os.pipe()
        ans_r, ans_w = os.pipe()
        if self.language == "bash":
            argv = ["/usr/bin/bash", "--noprofile", "--norc", "-c", BASH_LOOP, "bash",
                    str(ctl_r), str(ans_w)]
        else:
            js = os.path.join(os.path.dirname(DRIVER_FILE), "driver.js")
            argv = [shutil.which("node") or "/usr/bin/node", js, str(ctl_r), str(ans_w)]
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            # its own session: an interrupt is SIGINT to its process group, never to us
            self.proc = subprocess.Popen(argv, stdin=devnull, stdout=None, stderr=None,
                                         pass_fds=(ctl_r, ans_w), start_new_session=True)
        finally:
            os.close(devnull)
            os.close(ctl_r)
            os.close(ans_w)
        self.ctl = ctl_w
        self.ans = os.fdopen(ans_r, "rb", buffering=0)
        self.ans_buf = b""
        first = self._answer()
        if first is None:
            raise RuntimeError("%s did not start" % self.language)
        self._version = first.get("version", "")

    def _answer(self):
        """The child's next answer line, as a dict; None when it has exited."""
        while b"\n" not in self.ans_buf:
            # a process the cell left running may hold the pipe open after the child
            # exited: its exit ends the wait too
            try:
                ready, _, _ = select.select([self.ans], [], [], 0.5)
            except InterruptedError:
                continue
            if not ready:
                if self.proc.poll() is not None:
                    return None
                continue
            data = self.ans.read(65536)
            if not data:
                return None
            self.ans_buf += data
        line, self.ans_buf = self.ans_buf.split(b"\n", 1)
        if self.language == "bash":
            word, _, rest = line.decode("utf-8", "replace").partition(" ")
            return {"ev": word, "version": rest, "status": rest}
        try:
            return json.loads(line)
        except ValueError:
            return {"ev": "done", "status": "exception",
                    "exception": {"type": "ProtocolError", "message": "node's answer is not JSON",
                                  "traceback": ""}}

    def version(self):
        return self._version

    def interrupt(self):
        if self.language == "bash":
            # the foreground command and bash (whose trap ends the cell); a
            # non-interactive bash's background jobs ignore SIGINT
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except OSError:
                pass
            threading.Thread(target=self._interrupt_again, args=(self.n,), daemon=True).start()
            return
        self._interrupt_started()

    def _interrupt_started(self):
        """SIGINT to what this cell started (and node), not the processes earlier cells
        left running."""
        # node (breakOnSigint stops the cell)
        pids = [] if self.language == "bash" else [self.proc.pid]
        for child in child_pids(self.proc.pid) - self.before:
            pids += [child] + sorted(descendants(child))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGINT)
            except OSError:
                pass

    def _interrupt_again(self, n):
        """A SIGINT that came while bash's foreground child was between its fork and
        its exec is lost with the child's copy of bash's handler: the command then runs
        on (sleep 100: 100 s), and bash, which got its own SIGINT, runs the trap that
        ends the cell only once it exits. While the interrupted cell still runs, its
        commands get SIGINT again (not bash: between cells a SIGINT would end it)."""
        for _ in range(INTERRUPT_AGAIN_TIMES):
            time.sleep(INTERRUPT_AGAIN_S)
            with self.state.lock:
                if self.n != n or self.state.running is None:
                    return
                self._interrupt_started()

    def exec_cell(self, cid, code):
        self.n += 1
        if self.language == "bash":
            path = os.path.join(self.dir, "cell-%d.sh" % self.n)
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(code)
                if not code.endswith("\n"):
                    f.write("\n")
            msg = path + "\n"
        else:
            path = None
            msg = json.dumps({"op": "exec", "code": code}) + "\n"
        self.before = child_pids(self.proc.pid)
        if not self.state.begin(cid):
            if path:
                os.unlink(path)
            return {"status": "interrupted", "value": None, "exception": {
                "type": "KeyboardInterrupt", "message": "interrupted", "traceback": ""}}
        try:
            try:
                os.write(self.ctl, msg.encode("utf-8", "surrogateescape"))
                ans = self._answer()
            except OSError:
                ans = None
        finally:
            self.state.running = None
            if path:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        for c in self.captures:
            c.sync()
        if ans is None:
            return self._exited()
        if self.language == "bash":
            st = int(ans["status"]) if ans["status"].isdigit() else 1
            if self.state.interrupted:
                return {"status": "interrupted", "value": None, "exit_status": st,
                        "exception": {"type": "KeyboardInterrupt", "message": "interrupted",
                                      "traceback": ""}}
            if st != 0:
                return {"status": "exception", "value": None, "exit_status": st,
                        "exception": {"type": "ExitStatus", "message": "exit status %d" % st,
                                      "traceback": ""}}
            return {"status": "ok", "value": None, "exit_status": 0, "exception": None}
        status = ans.get("status", "exception")
        if status == "exception" and self.state.interrupted:
            status = "interrupted"
        return {"status": status, "value": ans.get("value"), "exception": ans.get("exception")}

    def _exited(self):
        code = self.proc.wait()
        for c in self.captures:
            c.sync()
        how = "exit status %d" % code if code >= 0 else "signal %d" % -code
        name = "bash" if self.language == "bash" else "node"
        try:
            os.close(self.ctl)
            self.ans.close()
        except OSError:
            pass
        self.start()
        return {"status": "exception", "value": None,
                "exception": {"type": "ProcessExited",
                              "message": "%s exited (%s); a new %s was started, the state in "
                                         "it is lost" % (name, how, name),
                              "traceback": ""}}

    def close(self):
        try:
            os.close(self.ctl)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# ---------------------------------------------------------------- the loop

def read_commands(fd, proto, state, files, cells, kernel):
    """The reader thread: exec and shutdown go to the main thread in order; interrupt
    and the file operations are done here, so they work while a cell runs."""
    buf = bytearray()
    scanned = 0                            # no newline in buf[:scanned]: a big put stays linear
    dropping = False
    while True:
        try:
            data = os.read(fd, 1 << 20)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            cells.put({"op": "shutdown"})
            return
        buf += data
        while True:
            nl = buf.find(b"\n", scanned)
            if nl < 0:
                scanned = len(buf)
                if len(buf) > CMD_LINE_MAX:
                    buf, scanned, dropping = bytearray(), 0, True
                break
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            scanned = 0
            if dropping:
                dropping = False
                continue
            handle_command(line, proto, state, files, cells, kernel)


def handle_command(line, proto, state, files, cells, kernel):
    try:
        cmd = json.loads(line)
        if not isinstance(cmd, dict):
            raise ValueError("not an object")
    except ValueError:
        proto.emit({"ev": "done", "id": None, "status": "error",
                    "error": {"type": "ProtocolError", "message": "a command is not a JSON object"}})
        return
    op = cmd.get("op")
    if op in ("exec", "shutdown"):
        cells.put(cmd)
    elif op == "interrupt":
        with state.lock:
            cid = cmd.get("id")
            if state.running is not None and cid in (None, state.running):
                state.interrupted = True
                kernel[0].interrupt()
            elif isinstance(cid, str):
                state.early = cid           # its cell is queued here: it never runs
    elif op in ("put", "get", "list", "collect"):
        try:
            extra = getattr(files, op)(cmd)
            ev = {"ev": "done", "id": cmd.get("id"), "status": "ok"}
            ev.update(extra)
        except FileOpError as e:
            ev = {"ev": "done", "id": cmd.get("id"), "status": "error",
                  "error": {"type": e.type, "message": str(e)}}
        except (ValueError, TypeError) as e:
            ev = {"ev": "done", "id": cmd.get("id"), "status": "error",
                  "error": {"type": "InvalidArgument", "message": str(e)}}
        except OSError as e:
            ev = {"ev": "done", "id": cmd.get("id"), "status": "error",
                  "error": {"type": type(e).__name__, "message": str(e)}}
        proto.emit(ev)
    else:
        proto.emit({"ev": "done", "id": cmd.get("id"), "status": "error",
                    "error": {"type": "ProtocolError", "message": "unknown op %r" % (op,)}})


def child_pids(pid):
    """The children of pid (every thread's), from /proc; empty where it cannot tell."""
    out = set()
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out.update(int(x) for x in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def descendants(pid):
    seen, todo = set(), [pid]
    while todo and len(seen) < 10000:
        for c in child_pids(todo.pop()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


class PythonInterrupt:
    """interrupt for Python cells: SIGINT to the processes the cell started (as a
    terminal's Ctrl-C reaches its foreground job; those of earlier cells, a server left
    running, are spared), and to the driver's main thread, whose handler raises
    KeyboardInterrupt only while a cell runs (so an interrupt that arrives as the cell
    ends never hits the driver; a SIGINT from elsewhere is ignored). The signal wakes a blocking call (sleep, a wait);
    _thread.interrupt_main marks it pending for Python itself too, so a cell inside
    os.system(), which ignores SIGINT until its command ends, is interrupted as soon as
    it returns."""

    def __init__(self, state):
        self.state = state
        self.main = threading.main_thread().ident
        self.before = set()                  # children that were there when the cell began
        self.pending = False                 # an interrupt not raised yet
        self.install()

    def on_sigint(self, signum, frame):
        # one KeyboardInterrupt per interrupt, though it arrives twice (signal and mark)
        if self.state.running is not None and self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def install(self):
        # whatever the sandbox started us with (SIG_IGN is inherited through exec)
        signal.signal(signal.SIGINT, self.on_sigint)
        self.pending = False
        self.before = child_pids(os.getpid())

    def interrupt(self):
        for child in child_pids(os.getpid()) - self.before:
            for pid in [child] + sorted(descendants(child)):
                try:
                    os.kill(pid, signal.SIGINT)
                except OSError:
                    pass
        import _thread
        self.pending = True
        _thread.interrupt_main(signal.SIGINT)
        signal.pthread_kill(self.main, signal.SIGINT)


def main(argv):
    language = "python"
    if len(argv) >= 3 and argv[1] == "--language":
        language = argv[2]
    if language not in ("python", "javascript", "bash"):
        sys.stderr.write("driver: --language must be python, javascript or bash\n")
        return 2
    # the protocol keeps the real fds 0 and 1 (non-inheritable copies); the user's are others
    proto_in = os.dup(0)
    proto = Proto(os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    state = State()
    captures = [Capture(proto, state, 1, "stdout"), Capture(proto, state, 2, "stderr")]
    # buffered writers under the text layers: a short write to a pipe is never lost
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", write_through=True, line_buffering=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    files = Files(proto)
    private = None                          # bash's cell files only; mode 0700
    if language == "bash":
        try:
            private = tempfile.mkdtemp(prefix="hxs-driver-")
        except OSError:
            private = tempfile.mkdtemp(prefix=".hxs-driver-", dir=".")
    if language == "python":
        kernel = PythonKernel(proto, state, captures)
        interrupter = PythonInterrupt(state)
    else:
        # a handler, not SIG_IGN: bash and node must start with SIGINT at its default
        signal.signal(signal.SIGINT, lambda signum, frame: None)
        kernel = ChildKernel(proto, state, captures, language, private)
        interrupter = kernel
    proto.emit({"ev": "ready", "language": language, "version": kernel.version()})
    cells = queue.Queue()
    threading.Thread(target=read_commands, daemon=True, name="commands",
                     args=(proto_in, proto, state, files, cells, [interrupter])).start()
    while True:
        cmd = cells.get()
        if cmd.get("op") == "shutdown":
            break
        cid = cmd.get("id")
        code = cmd.get("code")
        if not isinstance(code, str):
            proto.emit({"ev": "done", "id": cid, "status": "exception", "value": None,
                        "exception": {"type": "ProtocolError", "message": "code: must be a string",
                                      "traceback": ""}})
            continue
        with state.lock:
            state.cell_id = cid
            state.interrupted = False
        for c in captures:
            c.restore()
        if language == "python":
            interrupter.install()          # a cell may have replaced the handler
        res = kernel.exec_cell(cid, code)
        with state.lock:
            state.running = None
        ev = {"ev": "done", "id": cid}
        ev.update(res)
        proto.emit(ev)
    if language != "python":
        kernel.close()
    for c in captures:
        c.sync()
    if private:
        shutil.rmtree(private, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        rc = main(sys.argv)
    except SystemExit:
        raise
    sys.stdout.flush()
    os._exit(rc)
