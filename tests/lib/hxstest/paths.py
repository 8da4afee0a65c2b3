"""Where things are: the repository root and the binary under test."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SDK_DIR = ROOT / "sdk" / "python"


def sandbox_bin() -> str:
    """The binary under test: $HEXR_SANDBOX_BIN (ctest sets it), else build/hexr-sandbox."""
    return os.environ.get("HEXR_SANDBOX_BIN") or str(ROOT / "build" / "hexr-sandbox")


BIN = sandbox_bin()
