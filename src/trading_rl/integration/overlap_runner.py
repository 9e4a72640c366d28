"""``kedro run --runner trading_rl.integration.overlap_runner.OverlapRunner``: the sequential run's
numbers, with the walk-forward's Ray tasks training beside the in-process phases.

Kedro's ``ThreadRunner`` runs independent nodes at once; in this project that changes every trained
model (process-wide random generators, ``trading_rl.runtime.node_lock``). ``OverlapRunner`` is a
``ThreadRunner`` whose threads each hold the node lock for a whole node, so nodes compute one at a
time, as under ``SequentialRunner``, except while a node waits on Ray tasks
(``runtime.engine: ray``): then the next ready node computes. On 2 cores the default run's
walk-forward chains (two Ray workers) then train while sac_icm → options_her → reward_shaper
train in the kedro process (docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kedro.runner import ThreadRunner

from trading_rl.runtime.node_lock import node_lock


def _holding_node_lock(task: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with node_lock():
        return task(*args, **kwargs)


class _NodeLockExecutor(ThreadPoolExecutor):
    """Each submitted Kedro task (a node's loads, run, hooks and saves) inside ``node_lock``."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return super().submit(_holding_node_lock, fn, *args, **kwargs)


class OverlapRunner(ThreadRunner):
    """``ThreadRunner`` whose nodes overlap only while one waits on remote (Ray) work."""

    def _get_executor(self, max_workers: int) -> ThreadPoolExecutor:
        return _NodeLockExecutor(max_workers=max_workers)
