"""Server-Sent Events parser (internal): bytes as they arrive in, events out.

Follows the WHATWG event-stream format: lines end with CRLF, LF or CR (a CR at
the end of one read may be the first half of a CRLF split across reads); an
empty line dispatches the event; ``event:`` names it (default ``message``),
``data:`` lines are joined with LF; a line starting with ``:`` is a comment
(the service's heartbeat, counted in :attr:`Parser.comments`); ``id:`` and
``retry:`` are accepted and ignored (no reconnection: an execution is not
resumable). Lines are searched only in the bytes just received, so a large
event arriving in many reads costs linear time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

__all__ = ["RawEvent", "Parser", "MAX_EVENT_BYTES"]

#: Largest event accepted (a result with its returned files, base64-encoded).
MAX_EVENT_BYTES = 2 << 30


@dataclass(frozen=True)
class RawEvent:
    type: str
    data: str


class EventTooLarge(ValueError):
    pass


class Parser:
    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._line: List[bytes] = []  # the current, unfinished line
        self._line_len = 0
        self._skip_lf = False  # the last read ended with CR: a LF first in the next is its pair
        self._type = ""
        self._data: List[str] = []
        self._size = 0
        self._max = max_event_bytes
        self.comments = 0

    def feed(self, chunk: bytes) -> List[RawEvent]:
        """Take the next bytes of the stream; return the events they complete."""
        events: List[RawEvent] = []
        start = 0
        if self._skip_lf and chunk[:1] == b"\n":
            start = 1
        self._skip_lf = False
        n = len(chunk)
        while start < n:
            end = _line_end(chunk, start)
            if end < 0:
                self._keep(chunk[start:])
                break
            self._keep(chunk[start:end])
            line = b"".join(self._line)
            self._line, self._line_len = [], 0
            if chunk[end] == 0x0D:
                if end + 1 < n:
                    start = end + 2 if chunk[end + 1] == 0x0A else end + 1
                else:
                    self._skip_lf = True
                    start = n
            else:
                start = end + 1
            event = self._take(line)
            if event is not None:
                events.append(event)
        return events

    def _keep(self, piece: bytes) -> None:
        if piece:
            self._line.append(piece)
            self._line_len += len(piece)
            if self._line_len + self._size > self._max:
                raise EventTooLarge("an event of more than {} bytes".format(self._max))

    def _take(self, raw: bytes) -> Optional[RawEvent]:
        if not raw:
            if not self._data:  # no data: not dispatched (WHATWG)
                self._type = ""
                return None
            event = RawEvent(self._type or "message", "\n".join(self._data))
            self._type, self._data, self._size = "", [], 0
            return event
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            self.comments += 1
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._type = value
        elif name == "data":
            self._data.append(value)
            self._size += len(raw)
        return None


def _line_end(chunk: bytes, start: int) -> int:
    lf = chunk.find(b"\n", start)
    cr = chunk.find(b"\r", start, lf if lf >= 0 else len(chunk))
    return cr if cr >= 0 else lf
