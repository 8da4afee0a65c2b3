"""`hexr-sandbox exec --out DIR` never writes outside DIR: not through a symlink already
in DIR, whether the returned file is right under it or in a directory below, and no
directory is made outside either.

Run: /usr/bin/python3 -m pytest tests/integration/test_cli_out.py -q
"""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEXR_SANDBOX_BIN", str(ROOT / "build" / "hexr-sandbox"))


@pytest.mark.parametrize("inner", ["evil.txt", "sub/evil.txt", "sub/deeper/evil.txt"])
def test_out_does_not_follow_a_symlink_in_dir(tmp_path, inner):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "output").symlink_to(outside)
    code = (f"import os; p = 'output/{inner}'; os.makedirs(os.path.dirname(p), exist_ok=True); "
            "open(p, 'w').write('x')")
    p = subprocess.run([BIN, "exec", "--out", str(out), "-c", code], capture_output=True, timeout=120)
    assert p.returncode != 0, p.stderr.decode()
    assert list(outside.iterdir()) == [], "something was made outside DIR"


def test_out_writes_nested_files(tmp_path):
    out = tmp_path / "out"
    code = "import os; os.makedirs('output/a/b'); open('output/a/b/c.txt', 'w').write('deep')"
    p = subprocess.run([BIN, "exec", "--out", str(out), "-c", code], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert (out / "output" / "a" / "b" / "c.txt").read_text() == "deep"
