"""Run a policy through an env once and keep everything the env reported, one row per step.

Every evaluation number (metrics, baselines, walk-forward, regimes, plots) is computed from this
frame, so all of them see the same fills, costs and equity as the env accounted them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

Policy = Callable[[Any], Any]


def _scalar_or_value(value: Any) -> Any:
    """Unwrap one-element arrays (actions arrive as shape ``(1,)``) so columns hold plain numbers."""
    if isinstance(value, np.ndarray) and value.size == 1:
        return value.item()
    if isinstance(value, np.generic):
        return value.item()
    return value


class StepReturns:
    """The simple return of ``info["equity"]`` over the previous step's equity, step by step from
    the equity reported by ``reset``: the one equity bookkeeping of every rollout, so the returns
    compound to the episode's net return."""

    def __init__(self, reset_info: dict[str, Any]) -> None:
        self.previous_equity = float(reset_info["equity"])

    def __call__(self, info: dict[str, Any]) -> float:
        equity = float(info["equity"])
        step_return = equity / self.previous_equity - 1.0
        self.previous_equity = equity
        return step_return


def run_episode(
    env, policy: Policy, seed: int | None = None, max_steps: int | None = None, options: dict | None = None
) -> pd.DataFrame:
    """Reset ``env`` with ``seed`` (and ``options``, e.g. a goal view's ``desired_goal``) and step
    ``policy(observation) -> action`` until the episode ends.

    Returns one row per step (a ``RangeIndex``) with the step's ``info`` entries plus ``reward``,
    ``terminated``, ``truncated`` and ``return`` (``StepReturns``). ``max_steps`` stops early, for
    smoke tests.
    """
    observation, info = env.reset(seed=seed, options=options)
    step_return = StepReturns(info)
    rows: list[dict[str, Any]] = []
    terminated = truncated = False
    while not (terminated or truncated) and (max_steps is None or len(rows) < max_steps):
        observation, reward, terminated, truncated, info = env.step(policy(observation))
        row = {key: _scalar_or_value(value) for key, value in info.items()}
        row.update(
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
            **{"return": step_return(info)},
        )
        rows.append(row)
    return pd.DataFrame(rows)


def policy_from_sb3(model, deterministic: bool = True) -> Policy:
    """Adapt a Stable-Baselines3 model (``predict`` returns ``(action, state)``) to ``run_episode``."""

    def policy(observation):
        action, _ = model.predict(observation, deterministic=deterministic)
        return action

    return policy


def trade_returns(rollout: pd.DataFrame) -> pd.DataFrame:
    """Round-trip trades of a rollout, one row each.

    A trade starts at the step the position becomes non-zero and ends at the first step it is flat
    again or changes side (a flip closes one trade and opens the next at the same step). Its ``pnl``
    is the equity at the exit step minus the equity just before the entry step, so entry and exit
    costs and every mark-to-market in between count. A position still open at the last step is
    marked to market there and reported with ``closed=False``. ``return`` is ``pnl`` over the equity
    before entry.

    Columns: ``entry_row``, ``exit_row`` (row positions in ``rollout``), ``side`` (+1 long, -1 short), ``pnl``,
    ``return``, ``closed``.
    """
    columns = ["entry_row", "exit_row", "side", "pnl", "return", "closed"]
    if rollout.empty:
        return pd.DataFrame(columns=columns)
    side = np.sign(rollout["position"].to_numpy(dtype=np.float64))
    equity = rollout["equity"].to_numpy(dtype=np.float64)
    initial_equity = equity[0] / (1.0 + float(rollout["return"].iloc[0]))
    equity_before = np.concatenate(([initial_equity], equity[:-1]))

    changes = np.flatnonzero(side[1:] != side[:-1]) + 1
    starts = np.concatenate(([0], changes))
    starts = starts[side[starts] != 0]
    next_change = np.searchsorted(changes, starts, side="right")
    closed = next_change < changes.size
    exits = np.append(changes, side.size - 1)[next_change]

    pnl = equity[exits] - equity_before[starts]
    return pd.DataFrame(
        {
            "entry_row": starts,
            "exit_row": exits,
            "side": side[starts].astype(np.int64),
            "pnl": pnl,
            "return": pnl / equity_before[starts],
            "closed": closed,
        },
        columns=columns,
    )
