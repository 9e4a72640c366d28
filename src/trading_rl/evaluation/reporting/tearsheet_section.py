"""What a tearsheet is drawn from: its sections (a symbol, a checkpoint), each holding the agents'
rollouts (several lines when there are several agents or seeds; the first is the one whose trades
and actions are drawn), the baselines' rollouts, the market line (``buy_and_hold_full``), closes and
causal regime labels; ``env_section`` runs the baselines for agents evaluated on one env, and
``rollout_table`` lays every rollout out as the ``<phase>_rollout`` dataset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import pandas as pd

from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics.attribution import env_cost_rate
from trading_rl.evaluation.metrics.baselines import MARKET, market_returns, run_baselines
from trading_rl.evaluation.validation.regimes import RegimeParams, label_regimes

# The rollout columns a tearsheet keeps (returns, positions, actions and fills), one row per step.
ROLLOUT_COLUMNS = (
    "timestamp",
    "return",
    "equity",
    "position",
    "action_raw",
    "action_type",
    "trade_value",
    "trade_units",
    "fill_price",
    "fees",
)


@dataclass
class TearsheetSection:
    """One tearsheet section: ``agents`` and ``baselines`` map a name to a rollout
    (``rollout.run_episode`` rows; only ``return`` is needed for the market line in ``baselines``),
    ``close`` the closes over at least the rollout's bars, ``regimes`` causal labels of those bars."""

    title: str
    symbol: str
    periods_per_year: float
    agents: Mapping[str, pd.DataFrame]
    baselines: Mapping[str, pd.DataFrame]
    close: pd.Series
    regimes: pd.Series | None = None
    notes: list[str] = field(default_factory=list)
    # commission + slippage per unit traded of the section's env: the exposure-matched passive's
    # costs in the attribution table (None: unknown, its Sharpe is n/a)
    cost_rate: float | None = None
    facts: dict[str, str] = field(default_factory=dict)  # header lines: costs, position cap, model version

    def __post_init__(self) -> None:
        if not self.agents:
            raise ValueError(f"tearsheet section {self.title!r} has no agent rollout")
        for name, rollout in {**self.agents, **self.baselines}.items():
            missing = [c for c in ("timestamp", "return") if c not in rollout]
            if missing:
                raise ValueError(f"tearsheet section {self.title!r}: rollout {name!r} lacks column(s) {missing}")
            if rollout.empty:
                raise ValueError(f"tearsheet section {self.title!r}: rollout {name!r} is empty")

    @property
    def primary(self) -> tuple[str, pd.DataFrame]:
        return next(iter(self.agents.items()))


def env_section(
    title: str,
    symbol: str,
    periods_per_year: float,
    agents: Mapping[str, pd.DataFrame],
    make_env: Callable[[], gym.Env],
    closes: pd.Series,
    seed: int,
    regime_params: RegimeParams,
) -> TearsheetSection:
    """A section for agents evaluated on ``make_env``'s episode: the baselines run through the same
    env, seed and costs, the market line on the same bars, regimes labelled causally on ``closes``
    (every close up to the episode's, so the labels are warm from its first bar)."""
    baselines = run_baselines(make_env, seed)
    env = make_env()
    market = pd.DataFrame(
        {"timestamp": baselines["buy_and_hold"]["timestamp"].to_numpy(), "return": market_returns(env, seed)}
    )
    return TearsheetSection(
        title,
        symbol,
        periods_per_year,
        agents,
        {**baselines, MARKET: market},
        closes,
        label_regimes(closes, regime_params),
        cost_rate=env_cost_rate(trading_env(env, "env_section").config),
    )


def rollout_timestamps(rollout: pd.DataFrame) -> pd.DatetimeIndex:
    """A rollout's ``timestamp`` column as bar times."""
    return pd.DatetimeIndex(pd.to_datetime(rollout["timestamp"]))


def rollout_returns(rollout: pd.DataFrame) -> np.ndarray:
    """A rollout's per-bar ``return`` column as floats."""
    return rollout["return"].to_numpy(dtype=np.float64)


def rollout_table(sections: Sequence[TearsheetSection]) -> pd.DataFrame:
    """Every section's agent and baseline rollouts as one long frame (``section``, ``kind``,
    ``agent``, ``step`` + ``ROLLOUT_COLUMNS`` present, ``equity_index``: growth of 1)."""
    frames = []
    for section in sections:
        named = [("agent", n, r) for n, r in section.agents.items()]
        named += [("market" if n == MARKET else "baseline", n, r) for n, r in section.baselines.items()]
        for kind, name, rollout in named:
            columns = [c for c in ROLLOUT_COLUMNS if c in rollout]
            frame = rollout[columns].reset_index(drop=True).copy()
            frame["timestamp"] = pd.to_datetime(frame["timestamp"])
            frame.insert(0, "step", np.arange(len(frame)))
            frame.insert(0, "agent", name)
            frame.insert(0, "kind", kind)
            frame.insert(0, "section", section.title)
            frame["equity_index"] = np.cumprod(1.0 + rollout_returns(rollout))
            if "action_type" in frame:
                frame["action_type"] = frame["action_type"].astype(str)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)
