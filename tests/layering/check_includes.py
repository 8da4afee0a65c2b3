#!/usr/bin/python3
"""The include graph of src/ follows the layering architecture.md states.

Every `#include "dir/file.h"` (or <dir/file.h>) of every .c and .h file under src/ is
checked against the rules below; each violation is reported as file:line with the rule
it breaks, and the exit status is 1 when there is one that KNOWN does not list.

Run: /usr/bin/python3 tests/layering/check_includes.py [REPO_ROOT]
"""

from __future__ import annotations

import re
import sys

from pathlib import Path

# folder -> folders of src/ it must not include from, and why
FORBIDDEN = {
    "core": ({"engine", "ns", "vm", "pkg", "server", "cli", "proto", "mcp", "session"}, "core is the bottom layer: it reaches up to nothing"),
    "engine": ({"ns", "vm", "server", "mcp", "session"}, "the engine reaches its backends only through the backend interface"),
    "ns": ({"server", "mcp", "session"}, "a backend knows nothing of the service"),
    "vm": ({"server", "ns", "mcp", "session"}, "a backend knows nothing of the service, nor of the other backend"),
    "pkg": ({"server", "vm", "mcp", "session"}, "packages= knows nothing of the service nor of the microVMs"),
    "session": ({"ns", "vm", "pkg", "server", "cli", "proto", "mcp"},
                "sessions run on the engine (one interactive execution): they know no backend nor the service"),
    "server": ({"ns", "vm", "pkg", "cli"}, "the service does not know which isolation runs (architecture.md)"),
    "proto": ({"engine", "ns", "vm", "pkg", "server", "cli", "mcp", "session"}, "the wire protocol stands alone: the guest agent links it"),
    "mcp": ({"ns", "vm", "pkg", "server", "cli", "proto"},
            "the MCP protocol is transport-free: it speaks to the engine, sessions and core, never to the service's internals"),
}

# src/cli is a small CLI over the library: it may include only these.
CLI_ALLOWED_DIRS = {"hexr-sandbox", "core", "cli"}
# The server's public face: what `serve` needs to start, run and stop the service; and
# the MCP protocol's face, which `mcp` speaks over stdio.
SERVER_PUBLIC = {"server/serve.h", "mcp/mcp.h"}
# The service reaches the MCP protocol through its face only.
MCP_PUBLIC = {"mcp/mcp.h"}
MCP_RULE = "the service uses the MCP protocol's face (mcp/mcp.h) only"
CLI_RULE = "the CLI uses the public header (include/), core, the server's and the MCP protocol's public faces only"

# Violations tolerated while work removes them (a new one fails the check; the check
# says which entries no longer occur). None is left: every include follows the rules.
KNOWN: set[tuple[str, str]] = set()

INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')


def violations(root: Path):
    """(file, line number, included path, rule) for every include that breaks a rule."""
    src = root / "src"
    # project headers are named from src/ ("ns/cgroup.h"); <sys/stat.h> and the like are not ours
    ours = {d.name for d in src.iterdir() if d.is_dir()}
    found = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".c", ".h") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        folder = path.relative_to(src).parts[0]
        lines = path.read_text(errors="replace").splitlines()
        for n, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue
            target = m.group(1)
            top = target.split("/")[0]
            if top not in ours:
                continue
            if folder == "cli":
                if top not in CLI_ALLOWED_DIRS and target not in SERVER_PUBLIC:
                    found.append((rel, n, target, CLI_RULE))
            elif folder == "server" and top == "mcp" and target not in MCP_PUBLIC:
                found.append((rel, n, target, MCP_RULE))
            elif folder in FORBIDDEN and top in FORBIDDEN[folder][0]:
                found.append((rel, n, target, FORBIDDEN[folder][1]))
    return found


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2]
    if not (root / "src").is_dir():
        print(f"check_includes: {root}/src is not a directory", file=sys.stderr)
        return 2
    found = violations(root)
    new = [v for v in found if (v[0], v[2]) not in KNOWN]
    known = [v for v in found if (v[0], v[2]) in KNOWN]
    gone = sorted(KNOWN - {(v[0], v[2]) for v in found})
    for rel, n, target, rule in new:
        print(f"{rel}:{n}: includes \"{target}\": {rule}")
    for rel, n, target, _ in known:
        print(f"{rel}:{n}: includes \"{target}\" (known, being removed)")
    for rel, target in gone:
        print(f"note: {rel} no longer includes \"{target}\": remove it from KNOWN in {Path(__file__).name}")
    print(f"check_includes: {len(new)} new violation(s), {len(known)} known, {len(gone)} known gone")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
