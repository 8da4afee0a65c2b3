"""Files in and out through the Python SDK against the real service (issue 14): a
CSV in and a chart out (saved, or only shown with plt.show()), bytes round-tripped, a local file uploaded as multipart,
return_files globs, refused paths, and file events in a stream.

Run: /usr/bin/python3 -m pytest tests/integration/test_sdk_service_files.py -q
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = ROOT / "sdk" / "python"
if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

from hexr.sandbox import Client, SandboxRequestError  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def client(service_url: str) -> Client:
    return Client(url=service_url)


def test_a_csv_in_a_summary_and_a_saved_chart_out(client: Client) -> None:
    code = (
        "import os, pandas as pd, matplotlib\n"
        "matplotlib.use('Agg')\n"
        "import matplotlib.pyplot as plt\n"
        "df = pd.read_csv('data/sales.csv')\n"
        "print(df['amount'].sum())\n"
        "df.plot(x='month', y='amount')\n"
        "os.makedirs('output', exist_ok=True)\n"
        "plt.savefig('output/chart.png')\n"
    )
    result = client.exec(code, files={"data/sales.csv": "month,amount\n1,10\n2,20\n3,12\n"})
    assert result.ok, result.stderr
    assert result.stdout.strip() == "42"
    png = result.files["output/chart.png"]
    assert png.startswith(PNG_MAGIC)
    info = {f.path: f for f in result.file_info}["output/chart.png"]
    assert info.mime == "image/png" and info.size == len(png) and not info.truncated


def test_a_chart_shown_comes_back_without_being_saved(client: Client) -> None:
    code = (
        "import pandas as pd, matplotlib.pyplot as plt\n"
        "df = pd.read_csv('data/sales.csv')\n"
        "print(df['amount'].sum())\n"
        "df.plot(x='month', y='amount')\n"
        "plt.show()\n"
    )
    result = client.exec(code, files={"data/sales.csv": "month,amount\n1,10\n2,20\n3,12\n"})
    assert result.ok, result.stderr
    assert result.stdout.strip() == "42"
    png = result.files["output/figure-1.png"]
    assert png.startswith(PNG_MAGIC)
    info = {f.path: f for f in result.file_info}["output/figure-1.png"]
    assert info.mime == "image/png" and info.size == len(png) and not info.truncated


def test_bytes_in_and_back_unchanged(client: Client) -> None:
    blob = bytes(range(256)) * 64
    code = "import shutil, os\nos.makedirs('output', exist_ok=True)\nshutil.copy('in.bin', 'output/copy.bin')\n"
    result = client.exec(code, files=[("in.bin", blob)])
    assert result.ok, result.stderr
    assert result.files == {"output/copy.bin": blob}


def test_a_local_file_goes_multipart(client: Client, tmp_path: Path) -> None:
    local = tmp_path / "big.bin"
    local.write_bytes(b"\x07" * (3 << 20))
    code = "import hashlib\nprint(hashlib.sha256(open('big.bin', 'rb').read()).hexdigest())\n"
    result = client.exec(code, files={"big.bin": local})
    assert result.ok, result.stderr
    assert result.stdout.strip() == hashlib.sha256(local.read_bytes()).hexdigest()


def test_return_files_globs(client: Client) -> None:
    code = "open('a.log', 'w').write('log')\nopen('b.txt', 'w').write('no')\n"
    result = client.exec(code, return_files=["*.log"])
    assert result.files == {"a.log": b"log"}


@pytest.mark.parametrize("path", ["/etc/x", "../x", "a/../../x"])
def test_a_refused_path_is_a_400_naming_it(client: Client, path: str) -> None:
    with pytest.raises(SandboxRequestError) as info:
        client.exec("print(1)", files={path: "x"})
    assert info.value.status == 400 and "files[0].path" in info.value.message


def test_stream_yields_file_events_and_the_result(client: Client) -> None:
    code = "import os\nos.makedirs('output', exist_ok=True)\nopen('output/r.txt', 'w').write('hi')\nprint('done')\n"

    async def main() -> list:
        return [event async for event in client.stream(code)]

    events = asyncio.run(main())
    assert events[-1].type == "result" and events[-1].result is not None
    files = [e for e in events if e.type == "file"]
    assert [(e.file.path, e.data) for e in files if e.file is not None] == [("output/r.txt", b"hi")]
    assert events[-1].result.files == {"output/r.txt": b"hi"}

