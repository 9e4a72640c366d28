"""Walk-forward's SAC fold × seed chains trained as populations (``runtime.engine: population``).

A walk-forward task is a retrain chain: fold 0 from scratch, every later fold fine-tuning the
previous fold's agent. The population engine runs stage ``k`` of every SAC chain together (the
chain loop of every engine, ``walk_forward.chains.train_chains``, with a stage trainer of its own):
all from-scratch agents as one ``PopulationSAC``, then all first fine-tunes as one, and so on; each
member is still the SB3 ``SACWithICM`` that ``train_sac`` would build (same env, parameters and
seed), so the test rollouts, and everything downstream, are unchanged. Other agents (V-trace, ES, options, ...)
run their chains one after another as on the sequential engine.

The numbers are not those of the sequential engine: members share torch's and NumPy's global RNG
(noise and replay sampling), so each agent sees other random draws than its own sequential run. What
must agree is the distribution of the per-fold results (``benchmarks/population_walk_forward_ab.py``
compares them with two-sample tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stable_baselines3.common.utils import set_random_seed

from trading_rl.algorithms.population.population_sac import PopulationSAC, population_groups
from trading_rl.phases.walk_forward.chains import Chain, ChainResult, RetrainTask, train_chains
from trading_rl.phases.walk_forward.trainers import SB3Agent, sac_on_fold
from trading_rl.runtime.engine import (
    OnResult,
    RayExecutor,
    RuntimeParams,
    SequentialExecutor,
    make_runtime_executor,
    single_threaded,
)
from trading_rl.training.device import resolve_device

# Walk-forward agents the population trains -> whether their ICM is on (as in AGENT_TRAINERS).
POPULATION_AGENTS: dict[str, bool] = {"sac_icm": True, "sac": False}


class PopulationExecutor(SequentialExecutor):
    """Independent tasks one after another in this process, and walk-forward's SAC retrain chains
    as populations (``run_retrain_groups``)."""

    def run_retrain_groups(
        self, run_group: Callable[[Any], Any], tasks: Sequence[RetrainTask], on_result: OnResult | None = None
    ) -> list[ChainResult]:
        """What ``map(run_group, tasks)`` returns, with the chains of ``POPULATION_AGENTS`` trained
        as populations."""
        results: list[ChainResult | None] = [None] * len(tasks)
        batched = [i for i, task in enumerate(tasks) if task.agent in POPULATION_AGENTS]
        others = [i for i in range(len(tasks)) if i not in set(batched)]
        for i, result in zip(others, self.map(run_group, [{"task": tasks[i]} for i in others])):
            results[i] = result
        if batched:
            with single_threaded():
                chains = train_populations([tasks[i] for i in batched])
            for i, result in zip(batched, chains):
                results[i] = result
        return [result for result in results if result is not None]


def make_executor(runtime: RuntimeParams) -> SequentialExecutor | RayExecutor:
    """The executor ``runtime.engine`` names: ``population`` (sequential, except that walk-forward
    trains its SAC chains as batched populations) or ``runtime.make_runtime_executor``'s."""
    if runtime.engine == "population":
        return PopulationExecutor()
    return make_runtime_executor(runtime)


def _train_populations(stage: int, planned: list[tuple[Chain, bool, int]]) -> None:
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
        cohorts.setdefault((fresh, budget), []).append(chain)
    for (fresh, budget), cohort in cohorts.items():
        for group in population_groups([chain.agent.model for chain in cohort]):
            population = PopulationSAC([cohort[j].agent.model for j in group])
            population.learn(budget, reset_num_timesteps=fresh)
            population.release()


def train_populations(tasks: Sequence[RetrainTask]) -> list[ChainResult]:
    """``run_retrain_group`` for every task, stage by stage, each stage's SAC agents trained as
    populations; one seed for all (the first task's): members share the global RNG."""
    set_random_seed(int(tasks[0].seed))
    return train_chains(tasks, _train_populations)
