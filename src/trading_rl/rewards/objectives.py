"""The five reward objectives, computed causally from env transitions, vectorised over envs.

Every objective is a function of the current transition and of a small per-env history kept in
``ObjectiveTracker`` (arrays of shape ``(n_envs,)``), so one call scores a whole batch of envs and
nothing ever looks at a later bar. Units: profit and risk are in percent of equity (``roi_scale``
= 100); activity, timing and exploration are bounded scores. ``RewardShaper`` divides each by a
scale fitted on rollouts, so the objective weights are comparable shares.

- **profit** = ``roi_scale · (realised + unrealized_weight · Δunrealised) / equity_before``.
  ``realised`` is the P&L of the units closed at this step, after the entry and exit costs (the
  step a closing trade *realises* its profit, even though the position is then zero).
  ``unrealised`` = position value − cost basis; its changes over a trade sum to zero once the trade
  is closed, so they only move credit earlier. Linear in P&L on purpose: a convex ROI multiplier
  (gains scaled up, losses scaled down) would pay for variance, i.e. for churning.
- **risk** ≤ 0: ``−roi_scale · (max(0, drawdown − drawdown_threshold) + volatility_weight · σ +
  exposure_weight · exposure + max(0, VaR95 − var_limit))`` with σ the EMA standard deviation of the
  equity log return, exposure = |position value| / equity, VaR95 = 1.645·σ − μ (parametric, from the
  same EMAs).
- **activity**: the EMA trade rate (``diversity_window`` steps) against the band
  ``target_frequency × band``: inside it ``+band_bonus`` plus ``diversity_bonus · min(1, std(actions)
  / diversity_target)``; below it a passivity penalty up to ``−passive_penalty``; above it an
  over-trading penalty up to ``−overtrade_penalty`` (and no diversity bonus), so churning never pays.
- **timing**: scored only when the position is reduced or closed: for the closed fraction ``k`` of
  the position, ``k · (entry_quality + exit_quality) / 2`` where both qualities lie in [−1, 1] and
  compare the average entry price and the exit fill with the range of prices seen while the position
  was open (buy low / sell high for a long, mirrored for a short) — known at the exit, so causal.
- **exploration**: ``icm_weight · ICM intrinsic reward + novelty_weight · novelty`` with novelty =
  ``min(1, sqrt(novelty_threshold / n))``, ``n`` the decayed visit count (``decay_rate`` per step) of
  the state's cell (see ``RewardShaper``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trading_rl.config import Section, setting

OBJECTIVES: tuple[str, ...] = ("profit", "risk", "activity", "timing", "exploration")
PROFIT, RISK, ACTIVITY, TIMING, EXPLORATION = range(len(OBJECTIVES))

# One-sided 95% quantile of the standard normal, for the parametric VaR.
_Z95 = 1.6448536269514722


def _band_problem(band: list[float]) -> str | None:
    fits = len(band) == 2 and 0.0 < band[0] <= 1.0 <= band[1]
    return None if fits else "[low, high] with 0 < low <= 1 <= high (around the target frequency)"


@dataclass(frozen=True, kw_only=True)
class ProfitParams(Section):
    roi_scale: float = setting(100.0, interval="(0, inf)")
    unrealized_weight: float = 0.3


@dataclass(frozen=True, kw_only=True)
class RiskParams(Section):
    drawdown_threshold: float = 0.05
    var_limit: float = 0.02
    volatility_window: int = setting(20, interval="[2, inf)")
    volatility_weight: float = 1.0
    exposure_weight: float = 0.01


@dataclass(frozen=True, kw_only=True)
class ActivityParams(Section):
    target_frequency: float = 0.1
    band: list[float] = setting([0.5, 2.0], check=_band_problem)
    diversity_window: int = setting(50, interval="[1, inf)")
    diversity_target: float = 0.3
    band_bonus: float = 0.05
    diversity_bonus: float = 0.05
    passive_penalty: float = 0.1
    overtrade_penalty: float = 1.0


@dataclass(frozen=True, kw_only=True)
class TimingParams(Section):
    """The timing objective has no settings."""


@dataclass(frozen=True, kw_only=True)
class ExplorationParams(Section):
    icm_weight: float = 0.5
    novelty_weight: float = 0.5
    novelty_threshold: int = setting(10, interval="(0, inf)")
    decay_rate: float = setting(0.999, interval="(0, 1]")
    novelty_bins: dict[str, list[float]] = setting(
        {
            "position_fraction": [-0.1, -0.01, 0.01, 0.1],
            "feature:ret_20": [-1.0, 0.0, 1.0],
            "feature:realized_vol_20": [-1.0, 0.0, 1.0],
        }
    )


@dataclass(frozen=True, kw_only=True)
class ObjectiveParams(Section):
    """``reward_shaper.objectives``: the settings of each objective."""

    profit: ProfitParams = setting(ProfitParams())
    risk: RiskParams = setting(RiskParams())
    activity: ActivityParams = setting(ActivityParams())
    timing: TimingParams = setting(TimingParams())
    exploration: ExplorationParams = setting(ExplorationParams())


# Per-env state that a new episode starts from zero (equity and peak start at the episode's equity,
# the trade rate at the target frequency).
_ZEROED_AT_RESET = (
    "units",
    "basis",
    "unrealized",
    "entry_price",
    "low",
    "high",
    "ret_mean",
    "ret_var",
    "action_mean",
    "action_var",
)


@dataclass
class Transitions:
    """One env step of ``n`` envs, as the env's ``info`` reports it after the step (arrays ``(n,)``).

    ``trade_units`` is signed (+ bought, − sold), ``fees`` the commission of this step's fill,
    ``action`` the policy's raw action, ``intrinsic`` the ICM reward and ``cell`` the novelty cell of
    the new state (both supplied by the shaper; zeros when unused).
    """

    equity: np.ndarray
    position: np.ndarray
    position_value: np.ndarray
    trade_units: np.ndarray
    fill_price: np.ndarray
    fees: np.ndarray
    action: np.ndarray
    intrinsic: np.ndarray
    cell: np.ndarray

    @classmethod
    def from_infos(cls, infos: list[dict], actions, intrinsic=None, cells=None) -> Transitions:
        n = len(infos)
        get = lambda key: np.fromiter((info[key] for info in infos), dtype=np.float64, count=n)  # noqa: E731
        return cls(
            equity=get("equity"),
            position=get("position"),
            position_value=get("position_value"),
            trade_units=get("trade_units"),
            fill_price=get("fill_price"),
            fees=get("fees"),
            action=np.asarray(actions, dtype=np.float64).reshape(n),
            intrinsic=np.zeros(n) if intrinsic is None else np.asarray(intrinsic, dtype=np.float64).reshape(n),
            cell=np.zeros(n, dtype=np.int64) if cells is None else np.asarray(cells, dtype=np.int64).reshape(n),
        )


class ObjectiveTracker:
    """Per-env history (cost basis, equity peak, EMAs, holding-period price range, visit counts) and
    the five objectives of each step. ``reset(rows, equity)`` starts new episodes for those envs."""

    # One float64 per env each, made in ``__init__``.
    equity: np.ndarray
    peak: np.ndarray
    units: np.ndarray
    basis: np.ndarray
    unrealized: np.ndarray
    entry_price: np.ndarray
    low: np.ndarray
    high: np.ndarray
    ret_mean: np.ndarray
    ret_var: np.ndarray
    trade_rate: np.ndarray
    action_mean: np.ndarray
    action_var: np.ndarray

    def __init__(self, n_envs: int, params: ObjectiveParams, n_cells: int = 1) -> None:
        self.params = params
        self.n_envs = int(n_envs)
        p = self.params
        self._vol_alpha = 2.0 / (int(p.risk.volatility_window) + 1.0)
        self._rate_alpha = 1.0 / int(p.activity.diversity_window)
        low, high = p.activity.band
        target = float(p.activity.target_frequency)
        self._band = (target * low, min(target * high, 1.0))
        self.visit_counts = np.zeros(max(int(n_cells), 1), dtype=np.float64)
        n = self.n_envs
        for name in ("equity", "peak", "trade_rate", *_ZEROED_AT_RESET):
            setattr(self, name, np.zeros(n, dtype=np.float64))
        self.reset(np.arange(n), np.ones(n))

    def reset(self, rows, equity) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        equity = np.broadcast_to(np.asarray(equity, dtype=np.float64), rows.shape)
        self.equity[rows] = equity
        self.peak[rows] = equity
        for name in _ZEROED_AT_RESET:
            getattr(self, name)[rows] = 0.0
        # Start inside the band: a new episode is neither passive nor over-trading yet.
        self.trade_rate[rows] = self.params.activity.target_frequency

    def step(self, t: Transitions) -> np.ndarray:
        """Objective values ``(n_envs, 5)`` of this step (columns in ``OBJECTIVES`` order)."""
        out = np.empty((self.n_envs, len(OBJECTIVES)), dtype=np.float64)
        equity_before = self.equity
        realised, closed_fraction, exit_quality = self._account(t)
        out[:, PROFIT] = self._profit(realised, t, equity_before)
        out[:, TIMING] = closed_fraction * exit_quality
        out[:, RISK] = self._risk(t, equity_before)
        out[:, ACTIVITY] = self._activity(t)
        out[:, EXPLORATION] = self._exploration(t)
        self.equity = t.equity.copy()
        return out

    # ---- accounting: cost basis, realised P&L, holding-period range ---------------------------
    def _account(self, t: Transitions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        units_before, basis = self.units, self.basis
        traded = t.trade_units
        reducing = (traded != 0.0) & (units_before != 0.0) & (np.sign(traded) != np.sign(units_before))
        closed_units = np.where(reducing, np.minimum(np.abs(traded), np.abs(units_before)), 0.0)
        safe_before = np.where(units_before != 0.0, np.abs(units_before), 1.0)
        closed_fraction = closed_units / safe_before
        share = np.where(traded != 0.0, closed_units / np.where(traded != 0.0, np.abs(traded), 1.0), 0.0)
        # Cash flow of the closing part (its share of the fee included) minus its share of the basis.
        closing_flow = -(np.sign(traded) * closed_units * t.fill_price + share * t.fees)
        realised = np.where(reducing, closing_flow - closed_fraction * basis, 0.0)

        # Quality of entry and exit against the prices seen while the position was open.
        exit_price = t.fill_price
        low = np.where(reducing, np.minimum(self.low, exit_price), self.low)
        high = np.where(reducing, np.maximum(self.high, exit_price), self.high)
        span = high - low
        safe_span = np.where(span > 0.0, span, 1.0)
        long_side = units_before > 0.0
        entry_rank = np.where(long_side, high - self.entry_price, self.entry_price - low) / safe_span
        exit_rank = np.where(long_side, exit_price - low, high - exit_price) / safe_span
        quality = np.where(span > 0.0, (entry_rank + exit_rank) - 1.0, 0.0)  # mean of 2·rank − 1

        # New basis and average entry price.
        opening_units = np.abs(traded) - closed_units
        opening_flow = np.sign(traded) * opening_units * t.fill_price + (1.0 - share) * t.fees
        remaining = basis * (1.0 - closed_fraction)
        new_basis = np.where(traded != 0.0, remaining + np.where(opening_units > 0.0, opening_flow, 0.0), basis)
        flat = t.position == 0.0
        new_basis = np.where(flat, 0.0, new_basis)
        held_before = np.where(reducing, np.abs(units_before) - closed_units, np.abs(units_before))
        opened = opening_units > 0.0
        weighted = held_before * self.entry_price + opening_units * t.fill_price
        new_entry = np.where(opened, weighted / np.where(opened, held_before + opening_units, 1.0), self.entry_price)
        new_entry = np.where(flat, 0.0, new_entry)

        close = np.where(flat, 0.0, t.position_value / np.where(flat, 1.0, t.position))
        fresh = opened & (held_before == 0.0)
        range_low = np.where(
            fresh,
            np.minimum(t.fill_price, close),
            np.minimum(np.minimum(low, close), np.where(opened, t.fill_price, np.inf)),
        )
        range_high = np.where(
            fresh,
            np.maximum(t.fill_price, close),
            np.maximum(np.maximum(high, close), np.where(opened, t.fill_price, -np.inf)),
        )
        self.low = np.where(flat, 0.0, range_low)
        self.high = np.where(flat, 0.0, range_high)
        self.units = t.position.copy()
        self.basis = new_basis
        self.entry_price = new_entry
        return realised, closed_fraction, quality

    def _profit(self, realised: np.ndarray, t: Transitions, equity_before: np.ndarray) -> np.ndarray:
        p = self.params.profit
        unrealized = t.position_value - self.basis
        change = unrealized - self.unrealized
        self.unrealized = unrealized
        return p.roi_scale * (realised + p.unrealized_weight * change) / equity_before

    def _risk(self, t: Transitions, equity_before: np.ndarray) -> np.ndarray:
        p = self.params.risk
        log_return = np.log(np.maximum(t.equity, 1e-12) / equity_before)
        alpha = self._vol_alpha
        delta = log_return - self.ret_mean
        self.ret_mean = self.ret_mean + alpha * delta
        self.ret_var = (1.0 - alpha) * (self.ret_var + alpha * delta * delta)
        sigma = np.sqrt(self.ret_var)
        self.peak = np.maximum(self.peak, t.equity)
        drawdown = 1.0 - t.equity / self.peak
        exposure = np.abs(t.position_value) / np.maximum(t.equity, 1e-12)
        value_at_risk = _Z95 * sigma - self.ret_mean
        penalty = (
            np.maximum(drawdown - p.drawdown_threshold, 0.0)
            + p.volatility_weight * sigma
            + p.exposure_weight * exposure
            + np.maximum(value_at_risk - p.var_limit, 0.0)
        )
        return -self.params.profit.roi_scale * penalty

    def _activity(self, t: Transitions) -> np.ndarray:
        p = self.params.activity
        alpha = self._rate_alpha
        traded = (t.trade_units != 0.0).astype(np.float64)
        self.trade_rate = self.trade_rate + alpha * (traded - self.trade_rate)
        delta = t.action - self.action_mean
        self.action_mean = self.action_mean + alpha * delta
        self.action_var = (1.0 - alpha) * (self.action_var + alpha * delta * delta)
        low, high = self._band
        rate = self.trade_rate
        diversity = np.minimum(np.sqrt(self.action_var) / p.diversity_target, 1.0)
        in_band = p.band_bonus + p.diversity_bonus * diversity
        passive = -p.passive_penalty * (low - rate) / low
        overtrading = -p.overtrade_penalty * (rate - high) / max(1.0 - high, 1e-12)
        return np.where(rate < low, passive, np.where(rate > high, overtrading, in_band))

    def _exploration(self, t: Transitions) -> np.ndarray:
        p = self.params.exploration
        counts = self.visit_counts
        counts *= p.decay_rate
        np.add.at(counts, t.cell, 1.0)
        novelty = np.minimum(np.sqrt(p.novelty_threshold / counts[t.cell]), 1.0)
        return p.icm_weight * t.intrinsic + p.novelty_weight * novelty


def novelty_cells(values: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    """Cell index of each row of ``values`` ``(n, k)`` on a grid with per-column bin ``edges``."""
    cell = np.zeros(values.shape[0], dtype=np.int64)
    for column, column_edges in enumerate(edges):
        cell = cell * (len(column_edges) + 1) + np.searchsorted(column_edges, values[:, column], side="right")
    return cell


def n_novelty_cells(edges: list[np.ndarray]) -> int:
    return int(math.prod(len(e) + 1 for e in edges))
