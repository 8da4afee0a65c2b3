"""/metrics exposes what an autoscaler needs: slots in use and in all, the queue's
length, room and age, and the time requests waited for a slot (a histogram).

One slot (MAX_CONCURRENT=1) and two executions at once: the second waits for the
first, so it shows in the queue gauges while it waits and in the wait histogram after.
"""

from __future__ import annotations

import subprocess
import threading

import hxstest


def test_slots_queue_and_wait() -> None:
    svc = hxstest.launch({"MAX_CONCURRENT": "1", "MAX_QUEUE": "7", "SANDBOX_WARM": "off"}, None)
    try:
        m = hxstest.get_metrics(svc.url)
        assert m["hexr_sandbox_max_concurrent_executions"] == 1
        assert m["hexr_sandbox_max_queued_executions"] == 7
        assert m["hexr_sandbox_queue_oldest_wait_seconds"] == 0
        assert m["hexr_sandbox_queue_wait_seconds_count"] == 0

        # the first holds the slot for a few seconds; the second waits for it
        results = []

        def run(body):
            results.append(hxstest.post_exec(svc.url, body, timeout=60))

        first = threading.Thread(target=run, args=({"code": "sleep 3; echo first", "language": "bash"},))
        first.start()
        hxstest.wait_for(lambda: hxstest.get_metrics(svc.url)["hexr_sandbox_active_executions"] == 1, 30,
                       "the first execution to hold the slot")
        second = threading.Thread(target=run, args=({"code": "echo second", "language": "bash"},))
        second.start()
        m = hxstest.wait_for(lambda: (lambda x: x if x["hexr_sandbox_queued_executions"] == 1 and
                                    x["hexr_sandbox_queue_oldest_wait_seconds"] > 0 else None)(
                                        hxstest.get_metrics(svc.url)), 30, "the second request to wait")
        assert m["hexr_sandbox_active_executions"] == 1
        first.join(60)
        second.join(60)
        assert sorted(r[2]["stdout"] for r in results) == ["first\n", "second\n"]

        m = hxstest.get_metrics(svc.url)
        assert m["hexr_sandbox_queued_executions"] == 0
        assert m["hexr_sandbox_queue_oldest_wait_seconds"] == 0
        assert m["hexr_sandbox_queue_wait_seconds_count"] == 2
        # the second waited for the first: it is above the smallest bucket
        assert m['hexr_sandbox_queue_wait_seconds_bucket{le="0.001"}'] <= 1
        assert m['hexr_sandbox_queue_wait_seconds_bucket{le="+Inf"}'] == 2
        assert m["hexr_sandbox_queue_wait_seconds_sum"] > 0

        _, _, text = hxstest.http_request(svc.url, "GET", "/metrics", timeout=30)
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                               timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        assert svc.stop() == 0, svc.log_text()
