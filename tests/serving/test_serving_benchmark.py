"""benchmarks/serving.py measures what docs/benchmarks.md says it does: the calls of a group in turns,
CPU time per call apart from the wall time, and a server's CPU time over every process it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from serving import _cpu_seconds, _in_turns


def _spin(seconds: float) -> None:
    """Busy for ``seconds`` of this process's CPU time."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_the_calls_run_in_turns_and_cpu_time_is_apart_from_waiting():
    order: list[str] = []
    calls = {
        "computes": lambda: (order.append("computes"), _spin(0.002)),
        "waits": lambda: (order.append("waits"), time.sleep(0.002)),
    }
    timings = _in_turns(calls, repeats=5, warmup=1)
    assert order == ["computes", "waits"] * 6
    assert timings["computes"]["cpu_ms"] >= 2.0
    assert timings["waits"]["p50_ms"] >= 2.0 and timings["waits"]["cpu_ms"] < 1.0
    assert {timing["repeats"] for timing in timings.values()} == {5}


# A server-like process: it starts a child (in its group), both spend 0.2 s of CPU, then idle.
SERVER_LIKE = """
import subprocess, sys, time

start = time.process_time()
if sys.argv[1:] == ["child"]:
    while time.process_time() - start < 0.2:
        pass
    print(flush=True)
else:
    child = subprocess.Popen([sys.executable, __file__, "child"], stdout=subprocess.PIPE)
    while time.process_time() - start < 0.2:
        pass
    child.stdout.readline()
    print("both busy", flush=True)
time.sleep(60)
"""


def test_a_servers_cpu_time_counts_every_process_of_its_group(tmp_path):
    script = tmp_path / "server_like.py"
    script.write_text(SERVER_LIKE)
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout.readline() == "both busy\n"
        assert _cpu_seconds(server.pid) >= 0.38  # 0.2 s each, counted in ticks of 10 ms
        assert _cpu_seconds(server.pid + 10**7) == 0.0  # no such group
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
