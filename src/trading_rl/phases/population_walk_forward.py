"""Walk-forward's SAC fold × seed chains trained as populations (``runtime.engine: population``).

A walk-forward task is a retrain chain: fold 0 from scratch, every later fold fine-tuning the
previous fold's agent. The population engine runs stage ``k`` of every SAC chain together: all
from-scratch agents as one ``PopulationSAC``, then all first fine-tunes as one, and so on; each member
is still the SB3 ``SACWithICM`` that ``train_sac`` would build (same env, parameters and seed), so the
test rollouts, and everything downstream, are unchanged. Other agents (V-trace, ES, options, ...)
run their chains one after another as on the sequential engine.

The numbers are not those of the sequential engine: members share torch's and NumPy's global RNG
(noise and replay sampling), so each agent sees other random draws than its own sequential run. What
must agree is the distribution of the per-fold results (``benchmarks/population_walk_forward_ab.py``
compares them with two-sample tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from stable_baselines3.common.utils import set_random_seed

from trading_rl.agents import resolve_device
from trading_rl.algorithms.population_sac import PopulationSAC, population_groups
from trading_rl.phases.chains import ChainResult, saved_agent, training_point
from trading_rl.phases.walk_forward import fold_test_rollout, run_retrain_group, sac_on_fold
from trading_rl.runtime.engine import (
    RayExecutor,
    SequentialExecutor,
    make_runtime_executor,
    resolve_runtime_params,
    single_threaded,
)

# Walk-forward agents the population trains -> whether their ICM is on (as in AGENT_TRAINERS).
POPULATION_AGENTS: dict[str, bool] = {"sac_icm": True, "sac": False}


class PopulationExecutor(SequentialExecutor):
    """Independent tasks one after another in this process, and walk-forward's SAC retrain chains
    as populations (``run_retrain_groups``)."""

    def run_retrain_groups(self, tasks: Sequence[Mapping[str, Any]], agents: Sequence[str]) -> list[ChainResult]:
        """What ``map(run_retrain_group, tasks)`` returns, with the chains of ``POPULATION_AGENTS``
        trained as populations; ``agents[i]`` names task ``i``'s agent."""
        results: list[ChainResult | None] = [None] * len(tasks)
        batched = [i for i, agent in enumerate(agents) if agent in POPULATION_AGENTS]
        others = [i for i in range(len(tasks)) if i not in set(batched)]
        for i, result in zip(others, self.map(run_retrain_group, [tasks[i] for i in others])):
            results[i] = result
        if batched:
            with single_threaded():
                chains = train_chains([tasks[i] for i in batched], [POPULATION_AGENTS[agents[i]] for i in batched])
            for i, result in zip(batched, chains):
                results[i] = result
        return [result for result in results if result is not None]


def make_executor(runtime_params: Mapping[str, Any] | None) -> SequentialExecutor | RayExecutor:
    """The executor ``runtime.engine`` names: ``population`` (sequential, except that walk-forward
    trains its SAC chains as batched populations) or ``runtime.make_runtime_executor``'s."""
    if resolve_runtime_params(runtime_params)["engine"] == "population":
        return PopulationExecutor()
    return make_runtime_executor(runtime_params)


def train_chains(tasks: Sequence[Mapping[str, Any]], icm: Sequence[bool]) -> list[ChainResult]:
    """``run_retrain_group`` for every task, stage by stage: the agents that train from scratch in a
    stage form one population, those that fine-tune another (one per budget); each splits further
    by ``population_groups`` (batch size, network or ICM shapes, ...: tuning trials or walk-forward
    variants that differ in them cannot take one batched step)."""
    set_random_seed(int(tasks[0]["seed"]))
    models: list[Any] = [None] * len(tasks)
    rollouts: list[list[pd.DataFrame]] = [[] for _ in tasks]
    training: list[list[dict[str, Any]]] = [[] for _ in tasks]
    trained_steps = [0] * len(tasks)
    for stage in range(max(len(task["specs"]) for task in tasks)):
        cohorts: dict[tuple[bool, int], list[int]] = {}
        for i, task in enumerate(tasks):
            if stage >= len(task["specs"]):
                continue
            fresh = bool(task["retrains"][stage]) or models[i] is None
            budget = int(task["timesteps"] if fresh else task["finetune_timesteps"])
            if budget > 0:
                models[i] = sac_on_fold(
                    task["specs"][stage],
                    task["agent_params"],
                    int(task["seed"]),
                    None if fresh else models[i],
                    resolve_device(task["device"]),
                    icm[i],
                )
                cohorts.setdefault((fresh, budget), []).append(i)
                trained_steps[i] = budget if fresh else trained_steps[i] + budget
        for (fresh, budget), cohort in cohorts.items():
            for group in population_groups([models[i] for i in cohort]):
                population = PopulationSAC([models[cohort[j]] for j in group])
                population.learn(budget, reset_num_timesteps=fresh)
                population.release()
        for i, task in enumerate(tasks):
            if stage < len(task["specs"]):
                training[i].append(training_point(models[i], trained_steps[i]))
                rollouts[i].append(fold_test_rollout(models[i], task["specs"][stage], int(task["seed"])))
    return [ChainResult(r, t, saved_agent(m)) for r, t, m in zip(rollouts, training, models)]
