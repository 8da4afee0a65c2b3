"""Command line: ``python -m hexr.sandbox [options] [FILE | -]``.

Runs a file (or standard input, or ``-c CODE``) in the sandbox service named by
``HEXR_SANDBOX_URL`` (or ``--url``), copies the program's stdout and stderr to
its own as it prints them, and exits with the program's exit code. ``--file``
sends local files with it, ``--return`` names more files to bring back and
``--out`` writes the returned files under a directory.

Exit status: the sandbox exit code; 2 when the service rejects the request or
fails (and for usage errors); 3 when the service is unavailable; 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import BinaryIO, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple

from . import __version__
from ._client import DEFAULT_TIMEOUT, DEFAULT_URL, URL_ENV, Client
from ._errors import SandboxError, SandboxUnavailableError

EXIT_ERROR = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130

PROG = "python -m hexr.sandbox"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Run code in a hexr-sandbox service and exit with its exit code. "
            "The service address is --url, else ${}, else {}.".format(URL_ENV, DEFAULT_URL)
        ),
        epilog=(
            "Exit status: the program's exit code; {} if the request was rejected or "
            "the service failed; {} if the service is unavailable.".format(
                EXIT_ERROR, EXIT_UNAVAILABLE
            )
        ),
    )
    parser.add_argument(
        "-l", "--language", default="python", metavar="LANG",
        help="python (default), javascript/js/node or bash/shell/sh",
    )
    parser.add_argument(
        "-t", "--timeout", type=int, default=None, metavar="SECONDS",
        help="time limit in seconds (service default: 30)",
    )
    parser.add_argument(
        "-m", "--memory-mb", type=int, default=None, metavar="MB",
        help="memory limit in MiB (service default)",
    )
    parser.add_argument(
        "-e", "--env", action="append", default=[], metavar="NAME=VALUE",
        help="set an environment variable in the sandbox (repeatable)",
    )
    parser.add_argument(
        "-p", "--package", action="append", default=None, metavar="PACKAGE",
        help="Python package the code needs (repeatable)",
    )
    parser.add_argument("-c", dest="code", default=None, metavar="CODE", help="code to run")
    parser.add_argument(
        "--file", dest="files", action="append", default=[], metavar="LOCAL[:PATH]",
        help="send the local file LOCAL as PATH (default: its name) in the working directory (repeatable)",
    )
    parser.add_argument(
        "--return", dest="returns", action="append", default=None, metavar="GLOB",
        help="also return the files matching GLOB, besides those under output/ (repeatable)",
    )
    parser.add_argument(
        "--out", default=None, metavar="DIR",
        help="write the returned files under DIR (never outside it)",
    )
    parser.add_argument("--url", default=None, help="service address (overrides ${})".format(URL_ENV))
    parser.add_argument(
        "--json", action="store_true",
        help="print the result object as JSON instead of the program's output",
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    parser.add_argument(
        "file", nargs="?", default=None, metavar="FILE",
        help="file to run; '-' or nothing reads standard input",
    )
    return parser


def _env_vars(parser: argparse.ArgumentParser, items: Sequence[str]) -> Optional[Dict[str, str]]:
    if not items:
        return None
    env: Dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error("-e expects NAME=VALUE, got {!r}".format(item))
        env[name] = value
    return env


def _files(parser: argparse.ArgumentParser, items: Sequence[str]) -> Optional[List[Tuple[str, Path]]]:
    """``LOCAL[:PATH]`` arguments; an argument naming an existing file is all LOCAL."""
    if not items:
        return None
    files: List[Tuple[str, Path]] = []
    for item in items:
        local, path = item, ""
        if not os.path.exists(item) and ":" in item:
            local, _, path = item.rpartition(":")
        if not local or not os.path.isfile(local):
            parser.error("--file {!r}: no such local file".format(item))
        files.append((path or os.path.basename(local), Path(local)))
    return files


def _write_files(out_dir: str, files: Mapping[str, bytes]) -> List[str]:
    """Write ``files`` under ``out_dir``; return the paths refused (they would land
    outside it: absolute, ``..``, or through a symbolic link)."""
    root = os.path.realpath(out_dir)
    os.makedirs(root, exist_ok=True)
    refused = []
    for path, data in files.items():
        parts = path.split("/")
        if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            refused.append(path)
            continue
        parent = _make_dirs(root, parts[:-1])
        if parent is None:
            refused.append(path)
            continue
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(os.path.join(parent, parts[-1]), flags, 0o644)
        except OSError:
            refused.append(path)
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return refused


def _make_dirs(root: str, parts: Sequence[str]) -> Optional[str]:
    """Create ``root/parts...`` one directory at a time; None when one of them is a
    symbolic link or not a directory (never create anything through a link)."""
    current = root
    for part in parts:
        current = os.path.join(current, part)
        try:
            os.mkdir(current, 0o755)
        except FileExistsError:
            pass
        if os.path.islink(current) or not os.path.isdir(current):
            return None
    return current


def _read_code(parser: argparse.ArgumentParser, args: argparse.Namespace, stdin: BinaryIO) -> str:
    if args.code is not None:
        if args.file is not None:
            parser.error("give either -c CODE or FILE, not both")
        return str(args.code)
    try:
        if args.file is None or args.file == "-":
            data = stdin.read()
            where = "standard input"
        else:
            with open(args.file, "rb") as handle:
                data = handle.read()
            where = args.file
    except OSError as exc:
        parser.exit(EXIT_ERROR, "{}: error: cannot read {}: {}\n".format(PROG, args.file, exc.strerror or exc))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        parser.exit(EXIT_ERROR, "{}: error: {} is not UTF-8: {}\n".format(PROG, where, exc))
    raise AssertionError("unreachable")  # pragma: no cover


def _write(stream: TextIO, text: str) -> None:
    """Write ``text`` as UTF-8 bytes when possible, so no character is lost."""
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    env_vars = _env_vars(parser, args.env)
    stdin = getattr(sys.stdin, "buffer", None)
    code = _read_code(parser, args, stdin if stdin is not None else sys.stdin)  # type: ignore[arg-type]
    try:
        client = Client(args.url)
    except ValueError as exc:
        parser.error(str(exc))
    files = _files(parser, args.files)
    # Plain mode copies the output as it comes; --json prints the result alone.
    streamed = not args.json
    try:
        result = client.exec(
            code,
            language=args.language,
            timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout,
            env_vars=env_vars,
            packages=args.package,
            memory_mb=args.memory_mb,
            files=files,
            return_files=args.returns,
            on_stdout=(lambda text: _write(sys.stdout, text)) if streamed else None,
            on_stderr=(lambda text: _write(sys.stderr, text)) if streamed else None,
        )
    except SandboxUnavailableError as exc:
        _write(sys.stderr, "{}: {}\n".format(PROG, exc.message))
        return EXIT_UNAVAILABLE
    except SandboxError as exc:
        _write(sys.stderr, "{}: {}\n".format(PROG, exc.message))
        return EXIT_ERROR

    if args.json:
        _write(sys.stdout, json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    if args.out is not None:
        refused = _write_files(args.out, result.files)
        for path in refused:
            _write(sys.stderr, "{}: not written: {!r} would land outside {}\n".format(PROG, path, args.out))
        if refused:
            return EXIT_ERROR
    status = result.exit_code
    return status if 0 <= status <= 255 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
