"""integration.overlap_runner.OverlapRunner: nodes compute one at a time, as SequentialRunner runs
them, except that a node waiting on remote work lets the next ready node compute."""

from __future__ import annotations

import threading
import time

import pytest
from kedro.io import DataCatalog
from kedro.pipeline import Pipeline, node
from kedro.runner import ThreadRunner

from trading_rl.integration.overlap_runner import OverlapRunner
from trading_rl.runtime.node_lock import released_while_waiting

TIMEOUT_S = 10.0


class Probe:
    """Counts the nodes computing at once; ``remote_done`` stands for a Ray task's result."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.computing = 0
        self.most = 0
        self.remote_done = threading.Event()

    def compute(self, name: str) -> str:
        with self.guard:
            self.computing += 1
            self.most = max(self.most, self.computing)
        time.sleep(0.2)  # long enough for an unlocked neighbour to start
        with self.guard:
            self.computing -= 1
        return name


def pipeline(probe: Probe) -> Pipeline:
    def waits_on_remote() -> str:
        with released_while_waiting():  # as RayExecutor.map waits
            assert probe.remote_done.wait(TIMEOUT_S), "no other node computed while this one waited"
        return "remote"

    def computes_b() -> str:
        result = probe.compute("b")
        probe.remote_done.set()
        return result

    return Pipeline(
        [
            node(waits_on_remote, None, "remote_result", name="walk_forward_like"),
            node(computes_b, None, "b", name="b"),
            node(lambda: probe.compute("c"), None, "c", name="c"),
        ]
    )


def test_nodes_compute_one_at_a_time_but_overlap_a_wait():
    probe = Probe()
    OverlapRunner(max_workers=3).run(pipeline(probe), DataCatalog())
    assert probe.remote_done.is_set() and probe.most == 1


def test_kedros_thread_runner_computes_nodes_at_once():
    """What the lock prevents (and what makes this test able to fail)."""
    probe = Probe()
    ThreadRunner(max_workers=3).run(pipeline(probe), DataCatalog())
    assert probe.most == 2


def test_a_failing_node_frees_the_lock_for_the_others():
    def fails() -> str:
        raise RuntimeError("node failed")

    probe = Probe()
    with pytest.raises(RuntimeError, match="node failed"):
        OverlapRunner(max_workers=2).run(
            Pipeline([node(fails, None, "x", name="fails"), node(lambda: probe.compute("c"), None, "c", name="c")]),
            DataCatalog(),
        )
    later = threading.Thread(target=lambda: OverlapRunner().run(pipeline(Probe()), DataCatalog()))
    later.start()
    later.join(TIMEOUT_S)
    assert not later.is_alive(), "the failed run left the node lock held"
