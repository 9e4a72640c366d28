"""What a walk-forward chain leaves besides its test rollouts: its training record and its agent.

A chain (``walk_forward.retrain_groups``) is one agent: trained from scratch on its first fold and
fine-tuned through the others. It is the walk-forward's unit of "a trained agent": its final model
is kept (one per symbol × agent × seed × chain, 2 in the default run of 2 seeds × 3 folds in one
chain) rather than every fold's model (6), since the folds' models are snapshots of the same agent
on the way to the last one and would triple the models written and logged.

Chains run in worker processes (Ray), which have no MLflow run; so a chain returns its record and
the driver logs it with its steps (``pipelines/tracking.log_history``) — see docs/tearsheets.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.agents.saved import agent_bytes, has_saved_form

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
        """``sp500_sac_icm_seed0_folds0-2``: unique per run, usable as a file and MLflow model name."""
        return f"{self.symbol}_{self.agent_name}_seed{self.seed}_folds{self.folds[0]}-{self.folds[-1]}"


def training_point(model: Any, timestep: int) -> dict[str, Any]:
    """The chain's record after one fold's training; no episode reward when none finished or the
    agent keeps no SB3 episode buffer (V-trace, ES)."""
    policy = getattr(model, "low_level", model)
    rewards = [info["r"] for info in (getattr(policy, "ep_info_buffer", None) or []) if "r" in info]
    point: dict[str, Any] = {"timestep": int(timestep)}
    if rewards:
        point["train/episode_reward"] = float(np.mean(rewards))
    return point


def saved_agent(model: Any) -> bytes | None:
    return agent_bytes(model) if has_saved_form(model) else None


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
