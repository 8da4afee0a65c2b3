"""Reading a captured output that kept its head and tail (MAX_OUTPUT_BYTES)."""

from __future__ import annotations

import re
from typing import Optional, Tuple

MARKER = re.compile(r"\n\[hexr-sandbox: (\d+) bytes left out\]\n")
KILL_LINE = re.compile(r"hexr-sandbox: (killed[^\n]*)\n\Z")


def split_kept(text: str) -> Tuple[str, Optional[int], str]:
    """(head, bytes left out, tail) of an output with the marker; (text, None, "") without."""
    m = MARKER.search(text)
    if not m:
        return text, None, ""
    return text[:m.start()], int(m.group(1)), text[m.end():]


def kept_len(text: str) -> int:
    """How many of the program's characters an output kept: head and tail, not the marker."""
    head, _, tail = split_kept(text)
    return len(head) + len(tail)


def without_kill_line(stderr: str) -> str:
    """stderr without the engine's last line saying why the program was killed."""
    m = KILL_LINE.search(stderr)
    if not m:
        return stderr
    rest = stderr[:m.start()]
    # the kill line starts a line of its own: a newline before it may be ours
    return rest


def wait_warm_ready(url: str, timeout: float = 90.0) -> None:
    """Until the service at url has every warm template ready, so that the next Python
    executions start warm."""
    from hxstest.client import http_request
    from hxstest.waits import wait_for

    def ready() -> bool:
        warm = http_request(url, "GET", "/health")[2].get("warm", {})
        return warm.get("templates_total", 0) > 0 and warm.get("templates_ready") == warm.get("templates_total")

    wait_for(ready, timeout, "the warm templates")
