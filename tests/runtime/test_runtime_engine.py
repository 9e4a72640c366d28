"""The execution back-end: parameter validation, and both executors returning the same results in
input order (Ray: the package's local 2-CPU session, see conftest)."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest
import ray
import torch
from threadpoolctl import threadpool_info

from trading_rl.runtime import RayExecutor, RuntimeParams, SequentialExecutor, make_runtime_executor
from trading_rl.runtime.node_lock import holds_node_lock, node_lock


def runtime(params):
    return RuntimeParams.from_mapping(params, "runtime")


@pytest.mark.parametrize(
    "params, key",
    [
        ({"engine": "spark"}, r"runtime\.engine"),
        ({"engin": "ray"}, r"runtime\.engin"),
        ({"ray": {"num_cpu": 2}}, r"runtime\.ray\.num_cpu"),
        ({"ray": {"num_cpus": 0}}, r"runtime\.ray\.num_cpus"),
        ({"ray": {"num_gpus_per_task": 1.5}}, r"runtime\.ray\.num_gpus_per_task"),
        ({"ray": {"num_gpus_per_task": -0.1}}, r"runtime\.ray\.num_gpus_per_task"),
        ({"ray": {"address": 6379}}, r"runtime\.ray\.address"),
        ({"population": {"workers": 0}}, r"runtime\.population\.workers"),
        ({"population": {"workers": -2}}, r"runtime\.population\.workers"),
        ({"population": {"workers": 1.5}}, r"runtime\.population\.workers"),
        ({"population": {"workers": "two"}}, r"runtime\.population\.workers"),
        ({"population": {"worker": 2}}, r"runtime\.population\.worker"),
    ],
)
def test_bad_runtime_parameters_are_rejected_by_key(params, key):
    with pytest.raises(ValueError, match=key):
        runtime(params)


def test_defaults_and_accepted_gpu_shares():
    assert runtime(None).to_dict() == {
        "engine": "ray",
        "ray": {"address": None, "num_cpus": None, "num_gpus_per_task": 0.0},
        "population": {"workers": 1},
    }
    assert runtime({"ray": {"num_gpus_per_task": 0.25}}).ray.num_gpus_per_task == 0.25
    assert runtime({"ray": {"num_gpus_per_task": 2}}).ray.num_gpus_per_task == 2.0
    assert isinstance(make_runtime_executor(runtime({"engine": "sequential"})), SequentialExecutor)


def test_ray_tasks_return_in_input_order_with_shared_inputs_resolved(ray_session):
    executor = make_runtime_executor(runtime({"engine": "ray", "ray": {"num_cpus": 2}}))
    assert isinstance(executor, RayExecutor)
    big = np.arange(100_000, dtype=np.float64)
    shared = executor.share(big)
    kwargs_list = [{"index": i, "values": shared, "parts": [shared, executor.share(i)]} for i in range(5)]
    finished = []
    results = executor.map(dict, kwargs_list, on_result=lambda i, result: finished.append((i, result["index"])))
    assert [result["index"] for result in results] == list(range(5))  # dict(**kwargs): what the task got
    assert sorted(finished) == [(i, i) for i in range(5)]  # each reported once, as it finished
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result["values"], big)
        np.testing.assert_array_equal(result["parts"][0], big)
        assert result["parts"][1] == i
    seen = []
    assert SequentialExecutor().map(dict, [{"index": 3}], on_result=lambda i, r: seen.append((i, r))) == [{"index": 3}]
    assert seen == [(0, {"index": 3})]


def thread_counts() -> tuple[int, int]:
    """Torch threads and the most threads any loaded BLAS library would use."""
    return torch.get_num_threads(), max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")


def test_every_task_runs_single_threaded_on_both_engines(ray_session):
    """One torch and one BLAS thread per task (multi-threaded sums change the last bits), and the
    kedro process gets its own thread counts back after a sequential map."""
    torch.set_num_threads(2)
    try:
        assert SequentialExecutor().map(thread_counts, [{}]) == [(1, 1)]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    # Ray's workers cannot import this test module: send its functions by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    assert make_runtime_executor(runtime({"engine": "ray"})).map(thread_counts, [{}, {}]) == [(1, 1), (1, 1)]


@pytest.mark.parametrize("others_may_compute", [True, False])
def test_a_node_waiting_on_long_ray_tasks_lets_another_node_compute(ray_session, others_may_compute):
    """Inside ``node_lock`` (OverlapRunner's nodes) the Ray engine gives the lock up while it waits
    for tasks marked ``others_may_compute`` (another node computes before they return) and keeps it
    for the others (short maps: the node goes on at once); the node holds the lock after either."""
    computed_while_waiting = threading.Event()
    returned = threading.Event()

    def other_node() -> None:
        with node_lock():
            if not returned.is_set():
                computed_while_waiting.set()

    executor = make_runtime_executor(runtime({"engine": "ray"}))
    with node_lock():
        other = threading.Thread(target=other_node)
        other.start()
        sleeping = [{"seconds": 1.0}]
        results = executor.map(
            lambda seconds: time.sleep(seconds) or seconds, sleeping, others_may_compute=others_may_compute
        )
        assert results == [1.0]
        returned.set()
        assert holds_node_lock()
    other.join(10.0)
    assert computed_while_waiting.is_set() == others_may_compute
