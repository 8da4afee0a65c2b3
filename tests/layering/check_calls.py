#!/usr/bin/python3
"""No two files of src/ call each other.

A call circle between two files (a driver calling back into the code that started it)
is the joint the include check cannot see: both files include the same header. For
every function a .c file under src/ defines without `static`, every other .c file that
calls it is noted; a pair of files that call each other is reported with the names
each way, and the exit status is 1 when a pair is not listed in KNOWN. Comments and
string literals are left out, so naming a function in a comment is no call.

Run: /usr/bin/python3 tests/layering/check_calls.py [REPO_ROOT]
"""

from __future__ import annotations

import re
import sys

from pathlib import Path

# Pairs that call each other by design, each with its reason; a new pair fails. None
# today: the package step runs its installer through engine/exec.c, which knows no step.
KNOWN: set = set()

# A function definition at the start of a line: return type, name, parameters, then
# the body's brace on the next line (the house style). `static` ones are file-local.
DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(\w+)\([^;{]*\)\s*\n\{", re.M)
COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_of(path: Path) -> str:
    """The file without comments and string literals (newlines kept)."""
    return COMMENT_OR_STRING.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text(errors="replace"))


def mutual_calls(root: Path):
    """(file a, file b, names a calls in b, names b calls in a) for each pair, a < b."""
    texts = {p.relative_to(root).as_posix(): code_of(p) for p in sorted((root / "src").rglob("*.c"))}
    defined = {}
    for rel, text in texts.items():
        for m in DEFINITION.finditer(text):
            defined.setdefault(m.group(1), rel)
    calls: dict[tuple[str, str], list[str]] = {}
    for rel, text in texts.items():
        for name, where in defined.items():
            if where != rel and re.search(r"\b" + name + r"\s*\(", text):
                calls.setdefault((rel, where), []).append(name)
    return [(a, b, calls[(a, b)], calls[(b, a)]) for (a, b) in sorted(calls) if a < b and (b, a) in calls]


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2]
    if not (root / "src").is_dir():
        print(f"check_calls: {root}/src is not a directory", file=sys.stderr)
        return 2
    found = mutual_calls(root)
    new = [f for f in found if (f[0], f[1]) not in KNOWN]
    gone = sorted(KNOWN - {(f[0], f[1]) for f in found})
    for a, b, ab, ba in found:
        mark = "known" if (a, b) in KNOWN else "a call circle"
        print(f"{a} <-> {b} ({mark}): {a} calls {', '.join(sorted(ab))}; {b} calls {', '.join(sorted(ba))}")
    for a, b in gone:
        print(f"note: {a} and {b} no longer call each other: remove them from KNOWN in {Path(__file__).name}")
    print(f"check_calls: {len(new)} new call circle(s), {len(found) - len(new)} known, {len(gone)} known gone")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
