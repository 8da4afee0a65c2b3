"""Every SDK example of the three seed pages, run through the SDK against this suite's
service (the tests live in tests/lib/hxstest/seed_examples.py, shared with the deploy
suite, which runs them against the container)."""

from __future__ import annotations

from hxstest.seed_examples import *  # noqa: F401,F403
from hxstest.seed_examples import _sandbox_url  # noqa: F401  (autouse: HEXR_SANDBOX_URL)
