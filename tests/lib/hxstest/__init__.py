"""hxstest: the helpers every test suite of hexr-sandbox shares.

The suites (tests/integration, security, vm, deploy, guest, soak, sdk_unit) import
these and never each other. Each suite's conftest.py (and tests/soak/soak.py) puts
tests/lib on sys.path.

    paths          ROOT, SDK_DIR, BIN / sandbox_bin(): where the tree and the binary are
    service        launch() / Service / stop_checked(): the real `hexr-sandbox serve`;
                   free_port(), safe_rmtree()
    client         http_request(), post_exec(), get_metrics(): HTTP over TCP or unix sockets
    waits          wait_for() (raises on time-out), wait_until() (returns the last value)
    canary         run_exec(): the CLI, checked; require_isolation(): the canary
    host           leftover checks on the host: cgroups, processes, mounts, files
    openapi        load_openapi(): responses checked against docs/openapi.yaml
    seed_examples  the seed pages' SDK examples, as tests a suite imports to run them
"""

from .client import get_metrics, http_request, post_exec
from .paths import BIN, ROOT, SDK_DIR, sandbox_bin
from .service import Service, free_port, launch, safe_rmtree, stop_checked
from .waits import wait_for, wait_until

__all__ = ["BIN", "ROOT", "SDK_DIR", "Service", "free_port", "get_metrics", "http_request", "launch",
           "post_exec", "safe_rmtree", "sandbox_bin", "stop_checked", "wait_for", "wait_until"]
