"""Command line: ``python -m hexr.sandbox [options] [FILE | -]``.

Runs a file (or standard input, or ``-c CODE``) in the sandbox service named by
``HEXR_SANDBOX_URL`` (or ``--url``), copies the program's stdout and stderr to
its own, and exits with the program's exit code.

Exit status: the sandbox exit code; 2 when the service rejects the request or
fails (and for usage errors); 3 when the service is unavailable; 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import BinaryIO, Dict, List, Optional, Sequence, TextIO

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
    try:
        result = client.exec(
            code,
            language=args.language,
            timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout,
            env_vars=env_vars,
            packages=args.package,
            memory_mb=args.memory_mb,
        )
    except SandboxUnavailableError as exc:
        _write(sys.stderr, "{}: {}\n".format(PROG, exc.message))
        return EXIT_UNAVAILABLE
    except SandboxError as exc:
        _write(sys.stderr, "{}: {}\n".format(PROG, exc.message))
        return EXIT_ERROR

    if args.json:
        _write(sys.stdout, json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    else:
        if result.stdout:
            _write(sys.stdout, result.stdout)
        if result.stderr:
            _write(sys.stderr, result.stderr)
    status = result.exit_code
    return status if 0 <= status <= 255 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
