"""Execution back-end: one list of independent tasks, run in a plain loop or as Ray tasks.

Walk-forward (symbols × agents × seeds × retrain groups) and per-symbol training are many
independent, CPU-bound jobs. The callers describe them once as ``fn`` + a list of keyword-argument
dicts and hand them to an executor; ``runtime.engine`` picks the executor.

Reproducibility contract (what makes both engines give identical numbers): ``fn`` is a module-level
function of its arguments only and seeds every RNG it uses itself, and every task, on either engine,
runs ``single_threaded``: one torch thread and one BLAS thread. Thread counts change the order of
floating-point sums (NumPy's OpenBLAS splits a product differently over 2 threads than over 1), so
without the limit a Ray worker (started with ``OMP_NUM_THREADS=1``) and the kedro process (all
cores) would drift apart in the last bits, and the drift grows through training.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from trading_rl.config import Section, setting
from trading_rl.runtime.node_lock import released_while_waiting

logger = logging.getLogger(__name__)


def _gpu_share_problem(gpus: float) -> str | None:
    # Ray accepts a fraction of one GPU or a whole number of GPUs per task.
    return None if 0 <= gpus <= 1 or gpus == int(gpus) else "a fraction in [0, 1] or a whole number of GPUs"


@dataclass(frozen=True, kw_only=True)
class RayParams(Section):
    address: str | None = None
    num_cpus: int | None = setting(None, interval="[1, inf)")
    num_gpus_per_task: float = setting(0.0, interval="[0, inf)", check=_gpu_share_problem)


@dataclass(frozen=True, kw_only=True)
class PopulationParams(Section):
    """``runtime.population``, read by the population engine only: ``workers`` groups of walk-forward
    chains, each trained as populations in one Ray task (1: every chain in this process, no Ray)."""

    workers: int = setting(1, interval="[1, inf)")


@dataclass(frozen=True, kw_only=True)
class RuntimeParams(Section):
    """The ``runtime`` section: where independent tasks run (walk-forward folds x seeds x agents,
    per-symbol training). ``sequential``: one after another in the kedro process. ``ray`` (the
    default): Ray tasks, one CPU each, on a local Ray (``num_cpus: null``: every core) or on the
    cluster at ``address`` ("auto", "ray://head:10001" after ``ray start --head`` there); both give
    the same numbers for the same seed (with ``torch_threads: 1``). ``population``: one process,
    the walk-forward's SAC / SAC+ICM chains trained as batched populations (the same distribution of
    results, not the same numbers); ``population.workers`` > 1 splits the chains into that many
    groups, each a Ray task running its populations (the same numbers as one process). Ray by
    default so the walk-forward's fold x seed chains use both cores of a small machine: on 2 cores
    the default run's 4 chains ran 1.66x sequential on Ray, 1.38x as one population
    (benchmarks/default_engine.py, docs/benchmarks.md); conf/ci keeps sequential (no Ray start-up
    in tests). ``ray.num_gpus_per_task``: share of a GPU per task (0.25: four tasks per GPU; 0 keeps
    tasks on CPUs). docs/scale_out.md."""

    engine: Literal["sequential", "ray", "population"] = "ray"
    ray: RayParams = setting(RayParams())
    population: PopulationParams = setting(PopulationParams())


# Called with (task index, result) as each task finishes, so a long map can say what it has done.
OnResult = Callable[[int, Any], None]


class Executor(Protocol):
    """``share`` a large input once, then ``map`` a function over keyword-argument dicts;
    ``run_retrain_groups`` runs the walk-forward's chains (an engine may train them together)."""

    def share(self, value: Any) -> Any: ...

    def map(
        self,
        fn: Callable[..., Any],
        kwargs_list: Sequence[Mapping[str, Any]],
        on_result: OnResult | None = None,
        *,
        others_may_compute: bool = False,
    ) -> list[Any]:
        """``fn(**kwargs)`` per dict, results in input order. ``others_may_compute``: long remote work,
        during whose wait another node may compute (``runtime.node_lock``); short maps keep their
        node's turn, so that the node goes on at once."""
        ...

    def run_retrain_groups(
        self, run_group: Callable[[Any], Any], tasks: Sequence[Any], on_result: OnResult | None = None
    ) -> list[Any]:
        """``run_group(task)`` for every walk-forward retrain task, results in input order; by default
        one ``map`` task per chain (the population engine trains chains stage by stage instead), the
        long wait during which other nodes may compute."""
        return self.map(run_group, [{"task": task} for task in tasks], on_result, others_may_compute=True)


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """One torch thread and one BLAS thread inside the block; the previous counts afterwards."""
    import torch
    from threadpoolctl import threadpool_limits

    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(torch_threads)


class SequentialExecutor(Executor):
    """The tasks one after another in this process."""

    def share(self, value: Any) -> Any:
        return value

    def map(
        self,
        fn: Callable[..., Any],
        kwargs_list: Sequence[Mapping[str, Any]],
        on_result: OnResult | None = None,
        *,
        others_may_compute: bool = False,
    ) -> list[Any]:
        """In this process: nothing to wait for, so ``others_may_compute`` changes nothing."""
        results = []
        with single_threaded():
            for index, kwargs in enumerate(kwargs_list):
                results.append(fn(**kwargs))
                if on_result is not None:
                    on_result(index, results[-1])
        return results


_RAY_INIT_LOCK = threading.Lock()


def connect_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join the cluster at ``address`` or start a local Ray with ``num_cpus`` CPUs, once per process.

    A Ray session that is already up (started by an earlier node, a test fixture or the user) is
    reused as it is; it ends with the process (Ray registers its own shutdown at exit), so several
    nodes of one run, even concurrent ones under ``ThreadRunner``, share one session.
    """
    import ray

    with _RAY_INIT_LOCK:
        if ray.is_initialized():
            return
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=True)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False)
        logger.info("Ray cluster resources: %s", ray.cluster_resources())


def _resolve_shared(value: Any) -> Any:
    """Fetch object-store references: Ray resolves a reference given directly as an argument, not
    one inside a list, and a task often needs a list of shared inputs (e.g. a chain's fold specs),
    also as a field of a task dataclass, or a list of such dataclasses."""
    import ray

    if isinstance(value, list) and value and all(isinstance(item, ray.ObjectRef) for item in value):
        return ray.get(value)
    if isinstance(value, list):  # e.g. a population group's retrain tasks
        fetched_items = [_resolve_shared(item) for item in value]
        return fetched_items if any(a is not b for a, b in zip(fetched_items, value)) else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fetched = {
            field.name: _resolve_shared(getattr(value, field.name)) for field in dataclasses.fields(value) if field.init
        }
        changed = {name: item for name, item in fetched.items() if item is not getattr(value, name)}
        return dataclasses.replace(value, **changed) if changed else value
    return value


def _run_in_worker(fn: Callable[..., Any], **kwargs: Any) -> Any:
    with single_threaded():
        return fn(**{key: _resolve_shared(value) for key, value in kwargs.items()})


class RayExecutor(Executor):
    """Every task a Ray task with one CPU and ``num_gpus_per_task`` of a GPU; results in input order."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None, num_gpus_per_task: float = 0.0) -> None:
        import ray

        connect_ray(address, num_cpus)
        self._remote = ray.remote(num_cpus=1, num_gpus=num_gpus_per_task)(_run_in_worker)

    def share(self, value: Any) -> Any:
        """Put ``value`` in the object store once; tasks receive it without another copy per task."""
        import ray

        return ray.put(value)

    def map(
        self,
        fn: Callable[..., Any],
        kwargs_list: Sequence[Mapping[str, Any]],
        on_result: OnResult | None = None,
        *,
        others_may_compute: bool = False,
    ) -> list[Any]:
        """Results in input order; ``on_result`` sees each as it finishes (in finishing order)."""
        import ray

        pending = {self._remote.remote(fn, **kwargs): index for index, kwargs in enumerate(kwargs_list)}
        results: list[Any] = [None] * len(pending)
        waiting = released_while_waiting if others_may_compute else contextlib.nullcontext
        while pending:
            with waiting():  # another node may compute meanwhile (runtime.node_lock)
                (finished,), _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(finished)
            results[index] = ray.get(finished)
            if on_result is not None:
                on_result(index, results[index])
        return results


def make_runtime_executor(runtime: RuntimeParams) -> SequentialExecutor | RayExecutor:
    """The executor ``runtime.engine`` names. ``population`` trains walk-forward chains, phase work:
    ``phases.walk_forward.population.make_executor`` builds it (and every other engine through this
    function)."""
    if runtime.engine == "sequential":
        return SequentialExecutor()
    if runtime.engine == "population":
        raise ValueError(
            "runtime.engine 'population' is built by trading_rl.phases.walk_forward.population.make_executor"
        )
    return RayExecutor(runtime.ray.address, runtime.ray.num_cpus, runtime.ray.num_gpus_per_task)
