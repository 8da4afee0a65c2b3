#!/usr/bin/python3
"""The documents hold together: README.md stays a front door (at most 12 KiB); every
relative link of every Markdown file of the tree names a file that exists and, with a
#fragment, a heading of that file (GitHub's anchor rules: lower case, punctuation
dropped, spaces to hyphens); and every code reference written `path.c::name` (or .h,
.py; a bare file name means that file anywhere in the tree), such as docs/security.md's
"enforced in" and "fails when it breaks" columns, names a file that exists and a name
that occurs in it. Each problem is reported as file:line.

Run: /usr/bin/python3 tests/docs/check_docs.py [REPO_ROOT]
"""

from __future__ import annotations

import re
import sys

from pathlib import Path
from typing import Dict, List, Set

README_MAX_BYTES = 12 * 1024
SKIP_DIRS = {".git", "node_modules", "build", "build-sanitize", "dist", "results", "corpus"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(root: Path) -> List[Path]:
    out = []
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).parts
        if not any(part in SKIP_DIRS or part.startswith("build") for part in rel[:-1]):
            out.append(path)
    return out


def prose_lines(path: Path) -> List[tuple]:
    """(line number, text) of the lines outside fenced code blocks."""
    lines, fenced = [], False
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((n, line))
    return lines


def anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


_anchors: Dict[Path, Set[str]] = {}


def anchors_of(path: Path) -> Set[str]:
    if path not in _anchors:
        _anchors[path] = {anchor(m.group(1)) for _, line in prose_lines(path)
                          for m in [re.match(r"^#+\s+(.*)", line)] if m}
    return _anchors[path]


def broken_links(root: Path) -> List[str]:
    problems = []
    for md in markdown_files(root):
        for n, line in prose_lines(md):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, fragment = target.partition("#")
                dest = (md.parent / file_part).resolve() if file_part else md
                where = f"{md.relative_to(root)}:{n}"
                if not dest.exists():
                    problems.append(f"{where}: link to {target}: no such file")
                elif fragment and dest.suffix == ".md" and fragment not in anchors_of(dest):
                    problems.append(f"{where}: link to {target}: no heading #{fragment} in {file_part or md.name}")
    return problems


CODE_REF = re.compile(r"`([\w./-]+\.(?:c|h|py))::(\w+)")
_sources: Dict[str, List[Path]] = {}


def files_named(root: Path, ref: str) -> List[Path]:
    """The file a reference names: the path from the root, or for a bare file name every
    file of that name in the tree."""
    if "/" in ref:
        path = root / ref
        return [path] if path.is_file() else []
    if not _sources:
        for path in root.rglob("*"):
            rel = path.relative_to(root).parts
            if path.suffix in (".c", ".h", ".py") and not any(p in SKIP_DIRS or p.startswith("build") for p in rel):
                _sources.setdefault(path.name, []).append(path)
    return _sources.get(ref, [])


def stale_code_refs(root: Path) -> List[str]:
    problems = []
    for md in markdown_files(root):
        for n, line in prose_lines(md):
            for m in CODE_REF.finditer(line):
                ref, name = m.group(1), m.group(2)
                where = f"{md.relative_to(root)}:{n}"
                files = files_named(root, ref)
                word = re.compile(r"\b%s\b" % re.escape(name))
                if not files:
                    problems.append(f"{where}: {ref}::{name}: no such file")
                elif not any(word.search(f.read_text(errors="replace")) for f in files):
                    problems.append(f"{where}: {ref}::{name}: no {name} in {ref}")
    return problems


def main(argv: List[str]) -> int:
    root = Path(argv[1]).resolve() if len(argv) > 1 else Path(__file__).resolve().parents[2]
    problems = broken_links(root) + stale_code_refs(root)
    size = (root / "README.md").stat().st_size
    if size > README_MAX_BYTES:
        problems.append(f"README.md: {size} bytes, above the front door's {README_MAX_BYTES}: "
                        "move the detail to docs/ and link it")
    for p in problems:
        print(p)
    print(f"check_docs: {len(markdown_files(root))} Markdown files, README.md {size} bytes, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
