"""Walk-forward's SAC fold × seed chains trained as populations (``runtime.engine: population``).

A walk-forward task is a retrain chain: fold 0 from scratch, every later fold fine-tuning the
previous fold's agent. The population engine runs stage ``k`` of every SAC chain together (the
chain loop of every engine, ``walk_forward.chains.train_chains``, with a stage trainer of its own):
all from-scratch agents as one ``PopulationSAC``, then all first fine-tunes as one, and so on; each
member is still the SB3 ``SACWithICM`` that ``train_sac`` would build (same env, parameters and
seed), so the test rollouts, and everything downstream, are unchanged. Other agents (V-trace, ES, options, ...)
run their chains one after another as on the sequential engine.

``runtime.population.workers: N`` splits the SAC chains into ``N`` groups (``split_chains``), each
group's populations trained in one Ray task (one CPU, ``runtime.ray.num_gpus_per_task`` of a GPU),
so N cores train at once; the other tasks then run as Ray tasks too. A chain's numbers do not
depend on its group: each member draws from its own random stream (``PopulationSAC``), continued
from stage to stage here, and the batched computations round a member's rows as they would alone.

The numbers are not those of the sequential engine: each member's draws come in another order than
in its own SB3 run. What must agree is the distribution of the per-fold results
(``benchmarks/population_walk_forward_ab.py`` compares them with two-sample tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.utils import set_random_seed

from trading_rl.algorithms.population.population_sac import PopulationSAC, member_stream, population_groups
from trading_rl.phases.walk_forward.chains import Chain, ChainResult, RetrainTask, train_chains
from trading_rl.phases.walk_forward.trainers import SB3Agent, sac_on_fold
from trading_rl.runtime.engine import (
    Executor,
    OnResult,
    RayExecutor,
    RuntimeParams,
    SequentialExecutor,
    make_runtime_executor,
)
from trading_rl.training.device import resolve_device

# Walk-forward agents the population trains -> whether their ICM is on (as in AGENT_TRAINERS).
POPULATION_AGENTS: dict[str, bool] = {"sac_icm": True, "sac": False}


class PopulationExecutor(Executor):
    """Independent tasks on ``base`` (in this process, or Ray tasks when ``workers`` > 1), and
    walk-forward's SAC retrain chains as populations, split into up to ``workers`` groups that each
    train as one ``base`` task (``run_retrain_groups``)."""

    def __init__(self, base: SequentialExecutor | RayExecutor | None = None, workers: int = 1) -> None:
        self.base = base or SequentialExecutor()
        self.workers = workers

    def share(self, value: Any) -> Any:
        return self.base.share(value)

    def map(
        self,
        fn: Callable[..., Any],
        kwargs_list: Sequence[Mapping[str, Any]],
        on_result: OnResult | None = None,
        *,
        others_may_compute: bool = False,
    ) -> list[Any]:
        return self.base.map(fn, kwargs_list, on_result, others_may_compute=others_may_compute)

    def run_retrain_groups(
        self, run_group: Callable[[Any], Any], tasks: Sequence[RetrainTask], on_result: OnResult | None = None
    ) -> list[ChainResult]:
        """What ``map(run_group, tasks)`` returns, with the chains of ``POPULATION_AGENTS`` trained
        as populations, group by group; ``on_result`` sees each chain as its task finishes."""
        results: list[ChainResult | None] = [None] * len(tasks)
        batched = [i for i, task in enumerate(tasks) if task.agent in POPULATION_AGENTS]
        others = [i for i in range(len(tasks)) if i not in set(batched)]
        groups = [[batched[j] for j in group] for group in split_chains([tasks[i] for i in batched], self.workers)]

        def chain_done(i: int, chain: ChainResult) -> None:
            results[i] = chain
            if on_result is not None:
                on_result(i, chain)

        def group_done(k: int, chains: list[ChainResult]) -> None:
            for i, chain in zip(groups[k], chains):
                chain_done(i, chain)

        others_kwargs = [{"task": tasks[i]} for i in others]
        self.base.map(run_group, others_kwargs, lambda k, chain: chain_done(others[k], chain), others_may_compute=True)
        groups_kwargs = [{"tasks": [tasks[i] for i in group]} for group in groups]
        self.base.map(train_populations, groups_kwargs, group_done, others_may_compute=True)
        return [result for result in results if result is not None]


def split_chains(tasks: Sequence[RetrainTask], workers: int) -> list[list[int]]:
    """``tasks``' indices in at most ``workers`` runs of consecutive tasks, each about an equal share
    of the env steps (a chain's budget from scratch plus its fine-tunes): consecutive tasks are
    mostly one variant's and agent's, which then share a population in their group."""
    if not tasks:
        return []
    costs = np.array([_env_steps(task) for task in tasks], dtype=np.float64)
    costs = costs + 1.0  # a chain without budget still takes its rollouts
    midpoints = np.cumsum(costs) - costs / 2
    group = np.minimum((midpoints * workers / costs.sum()).astype(int), workers - 1)
    return [np.flatnonzero(group == g).tolist() for g in range(workers) if (group == g).any()]


def _env_steps(task: RetrainTask) -> int:
    fresh = [k == 0 or retrain for k, retrain in enumerate(task.retrains)]
    return sum(task.timesteps if new else task.finetune_timesteps for new in fresh)


def make_executor(runtime: RuntimeParams) -> Executor:
    """The executor ``runtime.engine`` names: ``population`` (sequential, or Ray tasks with
    ``runtime.population.workers`` > 1, except that walk-forward trains its SAC chains as batched
    populations) or ``runtime.make_runtime_executor``'s."""
    if runtime.engine != "population":
        return make_runtime_executor(runtime)
    workers = runtime.population.workers
    if workers == 1:
        return PopulationExecutor()
    return PopulationExecutor(make_runtime_executor(dataclasses.replace(runtime, engine="ray")), workers)


class _StageTrainer:
    """Trains a stage's agents as populations and keeps each chain's random stream from stage to
    stage (a fine-tune continues the stream of the chain's earlier training, as an SB3 chain
    continues torch's global one)."""

    def __init__(self) -> None:
        self.streams: dict[int, th.Generator] = {}

    def __call__(self, stage: int, planned: list[tuple[Chain, bool, int]]) -> None:
        """A stage's agents that train from scratch form one population, those that fine-tune another
        (one per budget); each splits further by ``population_groups`` (batch size, network or ICM
        shapes, ...: tuning trials or walk-forward variants that differ in them cannot take one batched
        step)."""
        cohorts: dict[tuple[bool, int], list[Chain]] = {}
        for chain, fresh, budget in planned:
            task = chain.task
            model = sac_on_fold(
                task.specs[stage],
                task.params,
                task.seed,
                None if fresh else chain.agent.model,
                resolve_device(task.device),
                POPULATION_AGENTS[task.agent],
            )
            chain.agent = SB3Agent(model)
            if fresh:
                self.streams[id(chain)] = member_stream(model)
            cohorts.setdefault((fresh, budget), []).append(chain)
        for (fresh, budget), cohort in cohorts.items():
            for group in population_groups([chain.agent.model for chain in cohort]):
                chains = [cohort[j] for j in group]
                streams = [self.streams[id(chain)] for chain in chains]
                population = PopulationSAC([chain.agent.model for chain in chains], streams)
                population.learn(budget, reset_num_timesteps=fresh)
                population.release()


def train_populations(tasks: Sequence[RetrainTask]) -> list[ChainResult]:
    """``run_retrain_group`` for every task, stage by stage, each stage's SAC agents trained as
    populations. Torch's and NumPy's global generators are seeded with the first task's seed for
    whatever else draws from them (each member's training draws from its own stream)."""
    set_random_seed(int(tasks[0].seed))
    return train_chains(tasks, _StageTrainer())
