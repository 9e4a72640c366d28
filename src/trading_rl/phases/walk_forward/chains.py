"""Walk-forward chains: the retrain task, the one loop that trains a chain on every engine, and
what a chain leaves besides its test rollouts (its training record and its agent).

A chain (``walk_forward.retrain_groups``) is one agent: trained from scratch on its first fold and
fine-tuned through the others. It is the walk-forward's unit of "a trained agent": its final model
is kept (one per symbol × agent × seed × chain, 2 in the default run of 2 seeds × 3 folds in one
chain) rather than every fold's model (6), since the folds' models are snapshots of the same agent
on the way to the last one and would triple the models written and logged.

``train_chains`` steps chains stage by stage (stage ``k``: every chain's ``k``-th fold); a stage's
training is the engine's: ``run_retrain_group`` trains one chain with its trainer (the sequential and
Ray engines run one such task per chain), the population engine trains a stage's SAC agents as one
batched population (``phases.walk_forward.population``).

Chains run in worker processes (Ray), which have no MLflow run; so a chain returns its record and
the driver logs it with its steps (``pipelines/tracking.log_history``) — see docs/tearsheets.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.utils import set_random_seed

from trading_rl.evaluation.validation.folds import chain_name
from trading_rl.phases.walk_forward.trainers import Agent, Trainer

# Test-window metrics logged with each fold's training point.
TEST_METRICS = ("sharpe", "total_return", "max_drawdown", "n_trades")


@dataclass
class ChainResult:
    """A chain's output: each fold's test rollout; per fold, the env steps trained so far in the chain
    and the mean reward of the last (up to 100) finished training episodes (SB3's ``Monitor``, as
    ``train_agent`` reports it); the final agent's saved form (``None`` for agents without one)."""

    rollouts: list[pd.DataFrame]
    training: list[dict[str, Any]]
    agent: bytes | None


@dataclass
class TrainedChain:
    """A ``ChainResult``'s training record and agent, labelled with where it ran."""

    symbol: str
    agent_name: str
    seed: int
    folds: list[int]
    training: list[dict[str, Any]]
    agent: bytes | None

    @property
    def name(self) -> str:
        return chain_name(self.symbol, self.agent_name, self.seed, self.folds[0], self.folds[-1])


def training_point(agent: Agent, timestep: int) -> dict[str, Any]:
    """The chain's record after one fold's training; no episode reward when none finished or the
    agent keeps no episode buffer (V-trace, ES)."""
    rewards = agent.episode_rewards()
    point: dict[str, Any] = {"timestep": int(timestep)}
    if rewards:
        point["train/episode_reward"] = float(np.mean(rewards))
    return point


@dataclass(frozen=True)
class RetrainTask:
    """One chain to train: ``agent`` (its name) with ``trainer`` on ``specs`` (one per fold;
    ``retrains[i]``: fold ``i`` trains from scratch), ``timesteps`` for a fresh agent and
    ``finetune_timesteps`` per fine-tune. ``specs`` may be the executor's shared references."""

    agent: str
    trainer: Trainer
    specs: list[Any]
    retrains: list[bool]
    params: Any
    seed: int
    timesteps: int
    finetune_timesteps: int
    device: str


@dataclass
class Chain:
    """A chain while it trains: its agent so far, the env steps it has trained, and per fold done
    its test rollout and training point."""

    task: RetrainTask
    agent: Any = None
    trained_steps: int = 0
    rollouts: list[pd.DataFrame] = field(default_factory=list)
    training: list[dict[str, Any]] = field(default_factory=list)

    def plan(self, stage: int) -> tuple[bool, int] | None:
        """``(fresh, budget)`` of the chain's training on fold ``stage``, ``None`` when it trains
        nothing there (a fine-tune without budget: the previous fold's agent is scored again)."""
        fresh = bool(self.task.retrains[stage]) or self.agent is None
        budget = self.task.timesteps if fresh else self.task.finetune_timesteps
        if budget <= 0:
            return None
        self.trained_steps = budget if fresh else self.trained_steps + budget
        return fresh, budget

    def record(self, stage: int) -> None:
        """Fold ``stage``'s training point and test rollout of the agent as trained so far."""
        self.training.append(training_point(self.agent, self.trained_steps))
        self.rollouts.append(self.agent.rollout(self.task.specs[stage], "test", self.task.seed))

    def result(self) -> ChainResult:
        return ChainResult(self.rollouts, self.training, self.agent.save())


# Trains one stage: ``(stage, [(chain, fresh, budget), ...])`` for the chains that train in it; sets
# each chain's ``agent``.
StageTrainer = Callable[[int, list[tuple[Chain, bool, int]]], None]


def train_chains(tasks: Sequence[RetrainTask], train_stage: StageTrainer) -> list[ChainResult]:
    """Every chain of ``tasks``, stage by stage: plan each chain's training on its ``stage``-th fold,
    let ``train_stage`` train them, then score each on the fold's test window."""
    chains = [Chain(task) for task in tasks]
    for stage in range(max(len(task.specs) for task in tasks)):
        active = [chain for chain in chains if stage < len(chain.task.specs)]
        planned = [(chain, *plan) for chain in active if (plan := chain.plan(stage)) is not None]
        train_stage(stage, planned)
        for chain in active:
            chain.record(stage)
    return [chain.result() for chain in chains]


def _train_each(stage: int, planned: list[tuple[Chain, bool, int]]) -> None:
    for chain, fresh, budget in planned:
        task = chain.task
        previous = None if fresh else chain.agent
        chain.agent = task.trainer(task.specs[stage], task.params, task.seed, budget, previous, task.device)


def run_retrain_group(task: RetrainTask) -> ChainResult:
    """A task: train on the group's first fold, fine-tune through the rest; each fold's test rollout
    and training point, and the final agent. Seeds Python, NumPy and torch first, so the result
    depends on the task only."""
    set_random_seed(task.seed)
    [result] = train_chains([task], _train_each)
    return result


def chain_histories(chains: Sequence[TrainedChain], folds: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per chain name, one point per fold: the training record plus the fold's test metrics
    (``test/<metric>``) from the walk-forward's fold table."""
    agents = folds[folds["kind"] == "agent"].set_index(["symbol", "agent", "seed", "fold"])
    histories = {}
    for chain in chains:
        points = []
        for fold, point in zip(chain.folds, chain.training):
            row = agents.loc[(chain.symbol, chain.agent_name, chain.seed, fold)]
            points.append({**point, **{f"test/{m}": row[m] for m in TEST_METRICS if m in row.index}})
        histories[chain.name] = points
    return histories
