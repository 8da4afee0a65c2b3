"""SANDBOX_UID_BASE is refused at start when one of its ranges is someone's.

The engine runs sandboxes, templates, the downloader, the VMMs and the owners of the
sandboxes' user namespaces as host uids from SANDBOX_UID_BASE on. A uid that is also
in /etc/subuid or /etc/subgid (a user's rootless containers run processes as it) or an
account would let that user signal, trace or write what belongs to sandboxes. The real
binary runs here with the real paths, in a mount namespace of its own where /etc is an
overlay holding the test's entries (the host's /etc is untouched).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Dict, Tuple

import pytest

from conftest import BIN, safe_rmtree

TIMEOUT = 120  # only against a hang


def run_with_etc(files: Dict[str, str], args: Tuple[str, ...], env: Dict[str, str]) -> subprocess.CompletedProcess:
    """BIN args, with /etc overlaid by `files` (appended to the host's), in its own mount namespace."""
    top = tempfile.mkdtemp(prefix="hxs-uidrange-")
    try:
        upper, work, state = (os.path.join(top, d) for d in ("upper", "work", "state"))
        for d in (upper, work, state):
            os.mkdir(d)
        os.chmod(top, 0o755)
        os.chmod(state, 0o755)
        for name, text in files.items():
            host = "/etc/" + name
            old = open(host).read() if os.path.exists(host) else ""
            with open(os.path.join(upper, name), "w") as f:
                f.write(old + text)
        script = ('mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && '
                  'exec "$@"')
        full = dict(os.environ, STATE_DIR=state, **env)
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh",
                               upper, work, BIN, *args], env=full, capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    finally:
        safe_rmtree(top)


@pytest.fixture(scope="module", autouse=True)
def overlay_works() -> None:
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                        "mount -t tmpfs none /mnt && echo ok"], capture_output=True, text=True, timeout=30)
    if r.stdout.strip() != "ok":
        pytest.skip("cannot make a private mount namespace here: %s" % r.stderr.strip())
    if "overlay" not in open("/proc/filesystems").read():
        pytest.skip("this kernel has no overlayfs, which the test uses to change /etc privately")


EXEC = ("exec", "-l", "bash", "-c", "echo ran")


def test_a_subordinate_range_over_the_base_refuses_to_start() -> None:
    # shadow-utils' allocation for a host's 14th user covers the default base
    r = run_with_etc({"subuid": "nick:951968:65536\n"}, EXEC, {})
    assert r.returncode != 0 and "ran" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "SANDBOX_UID_BASE" in r.stderr and "/etc/subuid" in r.stderr and "nick:951968:65536" in r.stderr, r.stderr
    # serve: a bad setting, exit 2, before it listens
    r = run_with_etc({"subgid": "nick:951968:65536\n"}, ("serve", "--listen", "127.0.0.1:0"), {})
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "SANDBOX_UID_BASE" in r.stderr and "/etc/subgid" in r.stderr and "listening" not in r.stderr, r.stderr


def test_an_owner_uid_that_is_an_account_refuses_to_start() -> None:
    # an account on a uid of the owner slots (cold ones: past the warm slots)
    r = run_with_etc({"passwd": "hxs-test-user:x:1004010:1004010::/nonexistent:/usr/sbin/nologin\n"}, EXEC,
                     {"SANDBOX_UID_BASE": "1000000"})
    assert r.returncode != 0 and "ran" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "owners of the sandboxes' user namespaces" in r.stderr and "1004010" in r.stderr, r.stderr


def test_ranges_elsewhere_are_fine() -> None:
    # the same kind of entries, away from every range the engine uses
    r = run_with_etc({"subuid": "nick:100000:65536\n", "subgid": "nick:100000:65536\n",
                      "passwd": "hxs-test-user:x:1009000:1009000::/nonexistent:/usr/sbin/nologin\n"}, EXEC, {})
    assert r.returncode == 0 and r.stdout == "ran\n", (r.returncode, r.stdout, r.stderr)
