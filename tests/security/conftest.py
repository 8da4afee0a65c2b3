"""Security suite fixtures: the canary runs first, and stops everything if it fails.

The session-scoped autouse fixture runs a small program inside a sandbox (through the
CLI) and checks that it is isolated (capabilities, no_new_privs, seccomp, only `lo`)
before any test of this directory runs attack-like code (see
tests/lib/hxstest/canary.py). If the check fails the session ends with pytest.exit()
and the reason.

The hostile-code suite (test_hostile_*.py) goes through the service instead, in both
modes: `svc` is a module-scoped `hexr-sandbox serve` parametrized with
SANDBOX_WARM=on ("warm": Python starts from warm templates) and SANDBOX_WARM=off
("cold"). Starting it runs the canary through the service in all three languages (and,
warm, in a warm Python program from each template); a failure ends the session before
any attack. A test module may set SERVICE_ENV (a dict of settings) for its services.
After every test that uses `svc`, the service must still answer a normal request with
a fresh, clean sandbox (and warm Python must still start warm), and the host must have
no leftover process, mount, cgroup or file; at the end of the module the service must
stop cleanly on SIGTERM and leave nothing behind (see _service.py).
"""

from __future__ import annotations

import os
import sys
from typing import Iterator, Optional

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB = os.path.join(os.path.dirname(_HERE), "lib")  # the shared helpers (hxstest)
for _p in (_HERE, _LIB):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from hxstest import canary  # noqa: E402  (needs the path above)


@pytest.fixture(scope="session", autouse=True)
def sandbox_isolates() -> str:
    canary.require_isolation()
    return canary.check_isolation()[1]


# ---- the hostile suite's services ----------------------------------------------------------


@pytest.fixture(scope="module", params=["warm", "cold"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def _module_env(request: pytest.FixtureRequest) -> dict:
    return dict(getattr(request.module, "SERVICE_ENV", {}) or {})


@pytest.fixture(scope="module")
def svc(mode: str, request: pytest.FixtureRequest, sandbox_isolates: str) -> Iterator["object"]:
    import _service
    s = _service.start_service(mode, _module_env(request))
    yield s
    problems = s.stop_and_check()
    if problems:
        pytest.fail("the %s service (%s) did not end cleanly:\n%s" % (mode, s.url, "\n".join(problems)),
                    pytrace=False)


@pytest.fixture(scope="module")
def unix_svc(mode: str, request: pytest.FixtureRequest, sandbox_isolates: str) -> Iterator["object"]:
    """A second service of the same mode, listening on a unix socket."""
    import tempfile
    import _service
    sockdir = tempfile.mkdtemp(prefix="hxs-hostile-sock-")
    os.chmod(sockdir, 0o755)
    s = _service.start_service(mode, _module_env(request), listen="unix:%s/sock" % sockdir)
    yield s
    problems = s.stop_and_check()
    _service.safe_rmtree(sockdir)
    if problems:
        pytest.fail("the unix-socket %s service did not end cleanly:\n%s" % (mode, "\n".join(problems)),
                    pytrace=False)


@pytest.fixture(autouse=True)
def unaffected_afterwards(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a hostile test: the service answers normally and nothing leaked."""
    services = [request.getfixturevalue(name) for name in ("svc", "unix_svc")
                if name in request.fixturenames]
    yield
    if not services:
        return
    callspec = getattr(request.node, "callspec", None)
    lang: Optional[str] = callspec.params.get("lang") if callspec else None
    problems = []
    for s in services:
        problems += s.check_unaffected(python=lang in (None, "python"))
    if problems:
        pytest.fail("after %s, the service or the host is affected:\n%s"
                    % (request.node.name, "\n".join(problems)), pytrace=False)
