# Warm templates for Python executions (see src/ns/template.h).
#
# Started by the engine as the templates' host user, with a clean environment and
# only CAP_SETUID and CAP_SETGID: the mother. It imports what the templates preload,
# then hands control to the C loop in _hxs_zygote, which forks one slot template per
# owner slot (each takes its slot's uid and drops every capability) and, in each of
# them, clones a fresh sandbox for every execution with the same C code as the cold
# path. That call returns only inside a new sandbox's program process, after the
# sandbox user, capabilities, no_new_privs, seccomp and limits are in place; from there
# this script runs the request's code as `python3 /code/main.py` would.
import sys

_kind, _moddir = sys.argv[1], sys.argv[2]
# what a cold program gets as its sitecustomize (charts.py), run for each program
_charts = compile(sys.argv[3], "<hexr-sandbox charts>", "exec")


def _load_zygote(path):
    # from a memfd, so that no program's /proc/self/maps names where the engine keeps it
    import importlib.machinery
    import importlib.util
    import os

    with open(path, "rb") as f:
        data = f.read()
    fd = os.memfd_create("_hxs_zygote.so", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        where = "/proc/self/fd/%d" % fd
        loader = importlib.machinery.ExtensionFileLoader("_hxs_zygote", where)
        spec = importlib.util.spec_from_file_location("_hxs_zygote", where, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        os.close(fd)
    sys.modules["_hxs_zygote"] = mod
    return mod


_hxs_zygote = _load_zygote(_moddir + "/_hxs_zygote.so")
del _load_zygote
if _kind == "sci":
    # numexpr starts a thread pool on import; a template must stay single-threaded
    # (it clones). pandas then simply runs without numexpr.
    sys.modules["numexpr"] = None
    import io

    import numpy
    import pandas

    del sys.modules["numexpr"]
    # One representative pass so that pandas' lazily imported modules and caches
    # (describe, formatting, to_string, JSON) are loaded before any fork.
    _df = pandas.DataFrame({"x": [1, 2, 3], "y": [4.0, 5.5, 6.25]})
    _buf = io.StringIO()
    print(_df.describe(), _df.to_string(), _df.to_json(), _df.mean(), _df["x"].median(),
          _df.groupby("x").sum(), numpy.linalg.norm(numpy.eye(2)), file=_buf)
    del _df, _buf
import atexit  # noqa: E402,F401  (what the runner itself uses, and common stdlib)
import builtins  # noqa: E402
import collections  # noqa: E402,F401
import datetime  # noqa: E402,F401
import functools  # noqa: E402,F401
import gc  # noqa: E402
import itertools  # noqa: E402,F401
import json  # noqa: E402,F401
import math  # noqa: E402,F401
import os  # noqa: E402
import random  # noqa: E402,F401
import re  # noqa: E402,F401
import stat  # noqa: E402
import threading  # noqa: E402,F401
import time  # noqa: E402,F401

gc.collect()
gc.freeze()  # keep the collector from touching (and so copying) the template's pages


def _exit_status(code, sys):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _unbuffered(sys):
    # as python3 -u sets them up: every write reaches the pipe at once, so that a kill
    # at a limit loses nothing the program printed
    import io

    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        new = io.TextIOWrapper(io.FileIO(fd, "wb", closefd=False), encoding=old.encoding,
                               errors=old.errors, line_buffering=False, write_through=True)
        setattr(sys, name, new)
        setattr(sys, "__%s__" % name, new)


# The FIFO of a pre-started sandbox has nothing more to give once read, and what
# shows a program's lines opens its file again: the parser on a syntax error (by
# name, before it looks at the source it was given), the interpreter's traceback
# printer (io.open, and it wants a real descriptor), linecache (traceback, warnings,
# inspect). So the code is compiled under a name no file has and then given its own
# name back, and the others get the code it ran. Code that opens its own file itself
# is not pooled (pool.c).
_NO_FILE = "/code/.pooled/main.py"


def _pooled(source, code_path, io, linecache, os):
    lines = source.decode("utf-8", "replace").splitlines(True)
    linecache.cache[code_path] = (len(source), None, lines, code_path)

    def _open_program(file, mode="r", *args, _open=io.open, **kw):
        if file != code_path or mode != "rb":
            return _open(file, mode, *args, **kw)
        fd = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
        view = memoryview(source)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        return _open(fd, "rb")

    io.open = _open_program


def _renamed(code, name, types):
    # (the __main__ globals are cleared before a program runs: no global names here)
    def rename(c):
        consts = tuple(rename(k) if isinstance(k, types.CodeType) else k for k in c.co_consts)
        return c.replace(co_filename=name, co_consts=consts)

    return rename(code)


def _compile(source, code_path, fifo, _NO_FILE=_NO_FILE, _renamed=_renamed):
    if not fifo:
        return compile(source, code_path, "exec", dont_inherit=True)
    import types
    import warnings

    # the compiler's warnings (SyntaxWarning, DeprecationWarning) again, under the
    # program's name, where the warnings module finds their lines (linecache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = compile(source, _NO_FILE, "exec", dont_inherit=True)
        except SyntaxError as e:
            if e.filename == _NO_FILE:
                e.filename = code_path
            raise e.with_traceback(None)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, code_path if w.filename == _NO_FILE else w.filename,
                               w.lineno)
    return _renamed(code, code_path, types)


def _run(program, sys=sys, os=os, stat=stat, builtins=builtins, _exit_status=_exit_status, _charts=_charts,
         _pooled=_pooled, _compile=_compile):
    code_path, env = program
    # the request's environment, as the C side set it
    os.environ.clear()
    for item in env:
        name, _, value = item.partition(b"=")
        os.environb[name] = value
    sys.path[0:1] = [os.path.dirname(code_path)]
    # PYTHONPATH comes only from the engine (a request setting it runs cold): an
    # installed package set, which the interpreter would put right after the script's
    # directory at start-up
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    sys.path[1:1] = extra
    # state that must not be shared between executions forked from one template
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    if os.environ.get("PYTHONUNBUFFERED"):
        _unbuffered(sys)  # as a cold python3 does with it set
    exec(_charts, {"__name__": "sitecustomize"})
    sys.argv[:] = [code_path]
    sys.orig_argv[:] = [sys.executable, code_path]
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __doc__=None, __package__=None, __loader__=None,
                __spec__=None, __file__=code_path, __cached__=None, __builtins__=builtins)
    # A pre-started sandbox (the engine's pool) has a FIFO there: all of the above is
    # done before any request; the open waits for the engine to write the code in.
    fifo = stat.S_ISFIFO(os.stat(code_path).st_mode)
    if fifo:
        import io
        import linecache
    with open(code_path, "rb") as f:
        source = f.read()
    if fifo:
        _pooled(source, code_path, io, linecache, os)
    status = 0
    try:
        try:
            code = _compile(source, code_path, fifo)
        except SyntaxError as e:
            sys.excepthook(type(e), e.with_traceback(None), None)
            raise SystemExit(1)
        try:
            exec(code, main)
        except SystemExit:
            raise
        except BaseException as e:  # as the interpreter: traceback from the program's frames
            e = e.with_traceback(e.__traceback__.tb_next)
            sys.excepthook(type(e), e, e.__traceback__)
            raise SystemExit(130 if isinstance(e, KeyboardInterrupt) else 1)
    except SystemExit as e:
        status = _exit_status(e.code, sys)
    # Shut down as the interpreter would (threads, atexit, flush), but skip freeing
    # every object: that would write to, and so copy, every page of the template.
    import threading

    threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120
    os._exit(status)


_run(_hxs_zygote.mother(3))
