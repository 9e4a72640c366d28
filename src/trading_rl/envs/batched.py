"""N ``ContinuousTradingEnv`` members stepped as one gymnasium ``VectorEnv`` (numpy over members).

A population of agents (``algorithms.population``) steps one env per member per step; stepping them
one by one costs N Python env steps and N ``VecEnv`` round trips. ``BatchedTradingEnv`` steps all
members in one call: each keeps its own bars (window), random stream (its env's ``np_random``: the
same episode starts as the single env), portfolio, settings and episode boundary, and every array
operation runs over the member axis. The members are ordinary ``ContinuousTradingEnv`` instances and
stay the reference: the batched env reads their precomputed bars, draws their episode starts with
their own ``_draw_episode_bounds``, and ``store_members`` writes its state back into them, so a single
env can continue where the batched one stopped. ``tests/envs/test_batched_env.py`` drives both with
the same actions and asserts identical observations, rewards, fills, equity and ``info``.

Autoreset: ``AutoresetMode.SAME_STEP`` (SB3's ``DummyVecEnv`` convention, what the replay needs): a
member whose episode ends is reset within the same ``step``; the returned observation and ``info``
are the new episode's first, and ``info["final_obs"]`` / ``info["final_info"]`` (masks
``_final_obs`` / ``_final_info``) hold the last ones. Infos are gymnasium's dict of arrays (one entry
per member, ``_key`` masks); ``member_info`` turns one member's entries back into the single env's dict.
Reset ``options`` (curricula) are not supported: wrap-free training envs only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from trading_rl.envs.batched_portfolio import ACTION_TYPES, SKIP_REASONS, PortfolioBatch
from trading_rl.envs.continuous import _EQUITY_FLOOR_FRACTION, ContinuousTradingEnv
from trading_rl.envs.layout import STATE_FIELDS

_CASH_FRACTION = STATE_FIELDS.index("cash_fraction")
_FLOAT_INFO = (
    "equity",
    "cash",
    "position",
    "position_value",
    "fees",
    "total_fees",
    "trade_value",
    "trade_units",
    "fill_price",
    "action_raw",
    "action_smoothed",
)


class BatchedTradingEnv(VectorEnv):
    """``members`` (plain ``ContinuousTradingEnv``, one observation size) stepped together; starts from
    their current state (reset them, or call ``reset`` here, before the first ``step``)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, members: Sequence[ContinuousTradingEnv]) -> None:
        members = list(members)
        if not members:
            raise ValueError("BatchedTradingEnv needs at least one member env")
        for i, member in enumerate(members):
            if type(member) is not ContinuousTradingEnv:
                raise ValueError(
                    f"member {i} is a {type(member).__name__}; BatchedTradingEnv steps plain ContinuousTradingEnv "
                    "members (no wrappers, no subclasses)"
                )
            if member.layout.dim != members[0].layout.dim:
                raise ValueError(
                    f"member {i}'s observation has {member.layout.dim} values, member 0's {members[0].layout.dim}"
                )
        self.members = members
        self.num_envs = n = len(members)
        self.single_observation_space = members[0].observation_space
        self.single_action_space = members[0].action_space
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self._rows = np.arange(n)
        bars = max(member.n_bars for member in members)
        self._obs_rows = np.zeros((n, bars, members[0].layout.dim), dtype=np.float32)
        self._fill_prices = np.ones((n, bars))
        self._closes = np.ones((n, bars))
        self._timestamps = np.full((n, bars), None, dtype=object)
        for i, member in enumerate(members):
            self._obs_rows[i, : member.n_bars] = member._obs_rows
            self._fill_prices[i, : member.n_bars - 1] = member._fill_price_list
            self._closes[i, : member.n_bars] = member._close_list
            self._timestamps[i, : member.n_bars] = member._timestamp_list
        self._state_offset = np.array([m._state_offset for m in members])
        if (self._state_offset != self._state_offset[0]).any():
            raise ValueError("members' observations place the portfolio state at different offsets")

        def column(values, dtype=np.float64) -> np.ndarray:
            return np.array(list(values), dtype=dtype)

        self._alpha = column(m._alpha for m in members)
        self._episode_length = column(m._episode_length for m in members)
        modes = {m.config.action_mode for m in members}
        if len(modes) > 1:
            raise ValueError(f"members mix env action_mode values {sorted(modes)}; batch one action_mode at a time")
        self._target_mode = members[0]._target_mode
        self._allow_short = column((m.config.allow_short for m in members), bool)
        self._cap = column(m.config.max_position_pct for m in members)
        self._risk_aversion = column(m._risk_aversion for m in members)
        self._base_commission = column(m.config.commission_rate for m in members)
        self._base_slippage = column(m.config.slippage_rate for m in members)
        self.portfolio = PortfolioBatch([m._portfolio for m in members])
        self._t = np.zeros(n, dtype=np.int64)
        self._end = np.zeros(n, dtype=np.int64)
        self._start = np.zeros(n, dtype=np.int64)
        self._steps = np.zeros(n, dtype=np.int64)
        self._time_in_position = np.zeros(n, dtype=np.int64)
        self._equity = np.zeros(n)
        self._smoothed = np.zeros(n)
        self._obs = np.zeros((n, members[0].layout.dim), dtype=np.float32)
        self._ready = np.zeros(n, dtype=bool)
        for i in range(n):
            self._load_member(i)

    # ------------------------------------------------------------------ state exchange with the members

    def _load_member(self, i: int) -> None:
        member = self.members[i]
        if member._obs is None:  # never reset: ``reset`` here first
            return
        self._t[i], (self._start[i], self._end[i]) = member._t, member.episode_bounds
        self._steps[i], self._time_in_position[i] = member._steps, member._time_in_position
        self._equity[i], self._smoothed[i] = member._equity, member._smoothed
        self._obs[i] = member._obs
        self.portfolio.load(i, member._portfolio)
        self._ready[i] = True

    def store_members(self) -> None:
        """Write every member's state back into its ``ContinuousTradingEnv`` (which then steps on
        from there exactly as the batched env would)."""
        for i, member in enumerate(self.members):
            if not self._ready[i]:
                continue
            member._t, member._start, member._end = int(self._t[i]), int(self._start[i]), int(self._end[i])
            member._steps, member._time_in_position = int(self._steps[i]), int(self._time_in_position[i])
            member._equity, member._smoothed = float(self._equity[i]), float(self._smoothed[i])
            member._obs = self._obs[i].copy()
            self.portfolio.store(i, member._portfolio)

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None):
        """Every member's ``reset(seed=...)``: an int seeds member ``i`` with ``seed + i``, a list
        member by member (gymnasium's convention)."""
        if options:
            raise ValueError("BatchedTradingEnv.reset takes no options (curricula need the single env)")
        seeds = (
            [None if seed is None else seed + i for i in range(self.num_envs)]
            if not isinstance(seed, Sequence)
            else list(seed)
        )
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset got {len(seeds)} seeds for {self.num_envs} members")
        for member, member_seed in zip(self.members, seeds):
            gym.Env.reset(member, seed=member_seed)
        infos = _with_masks(self._reset_rows(self._rows), self.num_envs)
        return self._obs.copy(), infos

    def _reset_rows(self, rows: np.ndarray) -> dict[str, Any]:
        """Start a new episode for the members ``rows`` (their own random starts); their reset infos."""
        for i in rows.tolist():
            self._start[i], self._end[i] = self.members[i]._draw_episode_bounds(None)
        t = self._start[rows]
        self._t[rows] = t
        portfolio = self.portfolio
        portfolio.commission_rate[rows] = self._base_commission[rows] * 1.0
        portfolio.slippage_rate[rows] = self._base_slippage[rows] * 1.0
        portfolio.reset(rows)
        self._equity[rows] = portfolio.cash[rows]
        self._smoothed[rows] = 0.0
        self._steps[rows] = 0
        self._time_in_position[rows] = 0
        obs = self._obs_rows[rows, t]
        obs[:, self._state_offset[0] + _CASH_FRACTION] = 1.0
        self._obs[rows] = obs
        self._ready[rows] = True
        zeros = np.zeros(len(rows))
        info: dict[str, Any] = {key: zeros for key in _FLOAT_INFO}
        info.update(
            equity=self._equity[rows].copy(),
            cash=self._equity[rows].copy(),
            action_type=ACTION_TYPES[np.zeros(len(rows), dtype=np.int64)],
            skipped=np.full(len(rows), None, dtype=object),
            timestamp=self._timestamps[rows, t],
            bar_index=t.copy(),
            step=np.zeros(len(rows), dtype=np.int64),
        )
        return info

    def step(self, actions):
        """One step of every member with ``actions`` ``[N, 1]`` (or ``[N]``)."""
        if not self._ready.all():
            raise RuntimeError("call reset() before step(): some members have no episode yet")
        raw = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1)
        if raw.shape[1] != 1:
            raise ValueError(f"actions must be one value per member, got shape {np.shape(actions)}")
        raw = raw[:, 0]
        if np.isnan(raw).any():
            raise ValueError(f"action is NaN for member(s) {np.flatnonzero(np.isnan(raw)).tolist()}")
        raw = np.where(raw > 1.0, 1.0, np.where(raw < -1.0, -1.0, raw))
        smoothed = np.where(self._steps > 0, self._alpha * raw + (1.0 - self._alpha) * self._smoothed, raw)
        portfolio, rows, t = self.portfolio, self._rows, self._t
        units_before = portfolio.units
        price = self._fill_prices[rows, t]
        if self._target_mode:  # TradingEnvBase.target_exposure per member
            target = np.where(self._allow_short, self._cap * smoothed, self._cap * (smoothed + 1.0) / 2.0)
            outcome = portfolio.rebalance(target, price)
        else:
            outcome = portfolio.execute(smoothed, price)
        t = t + 1
        close = self._closes[rows, t]
        units, cash = portfolio.units, portfolio.cash
        position_value = units * close
        equity = cash + position_value
        reward, terminated = self._rewards(equity)
        tip = np.where(units == 0.0, 0, np.where(units * units_before > 0.0, self._time_in_position + 1, 1))
        steps = self._steps + 1
        obs = self._obs_rows[rows, t]
        obs[:, self._state_offset[0] :] = self._state_block(close, tip, smoothed)
        self._t, self._equity, self._smoothed, self._steps, self._time_in_position = t, equity, smoothed, steps, tip
        self._obs = obs
        truncated = t >= self._end
        info = {
            "equity": equity,
            "cash": cash,
            "position": units,
            "position_value": position_value,
            "fees": outcome.fee,
            "total_fees": portfolio.total_fees,
            "trade_value": outcome.units * outcome.fill,
            "trade_units": outcome.units,
            "fill_price": outcome.fill,
            "action_raw": raw,
            "action_smoothed": smoothed,
            "action_type": ACTION_TYPES[outcome.action],
            "skipped": SKIP_REASONS[outcome.skip],
            "timestamp": self._timestamps[rows, t],
            "bar_index": t,
            "step": steps,
        }
        infos = _with_masks(info, self.num_envs)
        done = terminated | truncated
        if done.any():
            infos = self._autoreset(np.flatnonzero(done), obs, infos)
        return self._obs.copy(), reward, terminated, truncated, infos

    def _rewards(self, equity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``log(equity / previous equity)`` per member (``math.log``, the single env's), the floor
        and termination for equity at or below zero, and the risk-aversion penalty."""
        alive = equity > 0.0
        floor = _EQUITY_FLOOR_FRACTION * self.portfolio.initial_cash
        ratio = np.where(alive, equity, floor) / self._equity
        reward = np.array([math.log(value) for value in ratio.tolist()])
        penalised = reward - 0.5 * self._risk_aversion * reward * reward
        return np.where(self._risk_aversion != 0.0, penalised, reward), ~alive

    def _state_block(self, close: np.ndarray, time_in_position: np.ndarray, smoothed: np.ndarray) -> np.ndarray:
        """``step_rules.portfolio_state`` per member, as float32 (``STATE_FIELDS`` order)."""
        portfolio = self.portfolio
        cash = portfolio.cash
        position_value = portfolio.units * close
        equity = cash + position_value
        with np.errstate(divide="ignore"):
            inverse = np.where(equity > 0.0, 1.0 / equity, 0.0)
        fraction = time_in_position / self._episode_length
        with np.errstate(over="ignore"):
            return np.stack(
                [
                    position_value * inverse,
                    portfolio.unrealized_pnl(close),
                    cash * inverse,
                    np.where(fraction < 1.0, fraction, 1.0),
                    smoothed,
                ],
                axis=1,
            ).astype(np.float32)

    def _autoreset(self, rows: np.ndarray, obs: np.ndarray, infos: dict[str, Any]) -> dict[str, Any]:
        """SAME_STEP autoreset of ``rows``: their final observation and info aside, a new episode."""
        final_obs = np.full(self.num_envs, None, dtype=object)
        for i in rows.tolist():
            final_obs[i] = obs[i].copy()
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[rows] = True
        # Copies: the step's arrays are the members' state, which the reset below overwrites in place.
        final_info = {key: value.copy() for key, value in infos.items() if not key.startswith("_")}
        final_info = {**_with_masks(final_info, self.num_envs, mask)}
        reset_info = self._reset_rows(rows)
        infos = {key: value.copy() for key, value in infos.items()}
        for key, value in reset_info.items():
            infos[key][rows] = value
        infos.update(final_obs=final_obs, _final_obs=mask, final_info=final_info, _final_info=mask.copy())
        return infos

    def member_info(self, infos: dict[str, Any], i: int) -> dict[str, Any]:
        """Member ``i``'s entries of a vector ``infos`` as the single env's ``info`` dict (the
        autoreset's ``final_obs`` / ``final_info`` left out: ``member_info(infos["final_info"], i)``)."""
        result: dict[str, Any] = {}
        for key, value in infos.items():
            if key.startswith("_") or key in ("final_obs", "final_info") or not infos[f"_{key}"][i]:
                continue
            result[key] = _scalar(value[i])
        return result


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _with_masks(info: dict[str, Any], n: int, mask: np.ndarray | None = None) -> dict[str, Any]:
    present = np.ones(n, dtype=bool) if mask is None else mask
    result = dict(info)
    for key in info:
        result[f"_{key}"] = present
    return result
