"""Single-instrument trading env with a continuous action in [-1, 1] (see ``docs/env.md``).

Timing: the observation at bar ``t`` holds features of bars ``<= t`` and the portfolio marked at
``close[t]``; the action decided on it fills at ``open[t+1]`` (or ``close[t]`` with
``fill="close"``, for comparison only); the step then marks the portfolio at ``close[t+1]``. The
reward is ``log(equity[t+1] / equity[t])``, costs included, so an episode's rewards sum to the log of
its net return.

Stale opens: where ``open[t+1]`` equals ``close[t]`` (within ``stale_open_rtol``) the feed did not
record the open, and a next-open fill would be a fill at the decision bar's close. With
``stale_open_policy="close_fill"`` (default) such an order fills at ``close[t+1]``, the first price
actually traded after the decision; ``"keep"`` fills at the recorded open as before.

Everything the step needs is precomputed in ``__init__`` (price lists, the float32 windows of
features), so ``step`` does no pandas work and only a handful of small allocations.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from trading_rl.config import Section, setting
from trading_rl.data.quality import STALE_OPEN_RTOL, stale_open_mask
from trading_rl.data.sources import OHLC_COLUMNS
from trading_rl.data.synthetic import MarketModel
from trading_rl.envs.layout import STATE_FIELDS, ObservationLayout
from trading_rl.envs.portfolio import HOLD, Portfolio
from trading_rl.envs.step_rules import portfolio_state, smooth_action, target_exposure, trade_on_action

# Writes the five float32 state values (STATE_FIELDS order) into an observation's buffer.
_pack_state = struct.Struct(f"={len(STATE_FIELDS)}f").pack_into

# A terminal step whose equity hits zero or below still needs a finite reward: use this fraction of
# the initial cash as the floor of the final equity.
_EQUITY_FLOOR_FRACTION = 1e-9


@dataclass(frozen=True, kw_only=True)
class EnvConfig(Section):
    """Validated env configuration (``env_construction.env``; these defaults are its one home, conf/
    states only what differs); ``EnvConfig.from_mapping`` rejects unknown keys and out-of-range
    values by their dotted key."""

    initial_cash: float = setting(100_000.0, interval="(0, inf)")
    # One bar of features (they already summarise the look-back): the validated learner's window
    # (docs/results.md "Controls"); conf/seeds keeps the seeds' 10.
    window_size: int = setting(1, interval="[1, inf)")
    commission_rate: float = setting(0.0002, interval="[0, 1)")  # 2 bp on every fill
    slippage_rate: float = setting(0.0001, interval="[0, 1)")  # 1 bp against us on every fill
    hold_threshold: float = setting(0.1, interval="[0, 1)")
    smoothing_window: int = setting(1, interval="[1, inf)")  # no EMA smoothing of the action (conf/seeds: 3)
    max_position_pct: float = setting(0.15, interval="(0, 1]")
    min_trade_value: float = setting(25.0, interval="[0, inf)")
    allow_short: bool = False
    episode_length: int = setting(500, interval="[1, inf)")
    random_start: bool = True
    evaluation: bool = False
    fill: Literal["next_open", "close"] = "next_open"
    # trade: the smoothed action is a trade (buy that fraction of cash / sell that fraction of the
    # position; docs/env.md). target: it is the position to hold, as a share of the cap:
    # max_position_pct x (a + 1) / 2 long-only, max_position_pct x a with allow_short; the portfolio
    # trades to it unless it is within hold_threshold x max_position_pct of it. A/B on the
    # planted-edge controls: docs/results.md#controls (conf/seeds: trade).
    action_mode: Literal["trade", "target"] = "target"
    # Bars whose open equals the previous close (the feed wrote the close for a missing open; 55% of
    # sp500 training bars): close_fill fills such an order at that bar's close, keep at the fake open.
    stale_open_policy: Literal["close_fill", "keep"] = "close_fill"
    # |open - previous close| <= rtol x previous close counts as stale
    stale_open_rtol: float = setting(STALE_OPEN_RTOL, interval="[0, 1)")
    periods_per_year: float = setting(252.0, interval="(0, inf)")
    # Training reward only: g - risk_aversion / 2 x g^2 for the step's log growth g (a per-step
    # mean-variance utility, for edges in risk rather than in mean); evaluation envs (and 0, the
    # default) give g itself, so reported P&L never changes.
    risk_aversion: float = setting(0.0, interval="[0, inf)", omitted_at_default=True)

    @classmethod
    def from_mapping(cls, config: Any = None, prefix: str = "env", base: EnvConfig | None = None) -> EnvConfig:
        return super().from_mapping(config, prefix, base)


@dataclass(frozen=True, kw_only=True)
class EnvConstructionParams(Section):
    """The ``env_construction`` section; ``symbol`` has no code default (conf/base is its one place)."""

    symbol: str  # one of feature_extraction.symbols
    periods_per_year: float | None = setting(None, interval="(0, inf)")  # null: from the bar spacing
    env: EnvConfig = setting(EnvConfig())


def _check_frames(prices: pd.DataFrame, features: pd.DataFrame, window_size: int) -> None:
    if not isinstance(prices, pd.DataFrame) or not isinstance(features, pd.DataFrame):
        raise ValueError("prices and features must be pandas DataFrames")
    missing = [column for column in ("open", "close") if column not in prices.columns]
    if missing:
        raise ValueError(f"prices lack column(s) {missing}; expected lower-case {OHLC_COLUMNS}")
    if not prices.index.equals(features.index):
        raise ValueError(
            f"prices and features must share the same index: prices has {len(prices)} rows "
            f"({prices.index[:1].tolist()}..{prices.index[-1:].tolist()}), features has "
            f"{len(features)} rows ({features.index[:1].tolist()}..{features.index[-1:].tolist()})"
        )
    if features.shape[1] == 0:
        raise ValueError("features has no columns")
    values = features.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        columns = [str(c) for c, flag in zip(features.columns, bad.any(axis=0)) if flag]
        first_row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(
            f"features contain NaN/inf in column(s) {columns}, first at {features.index[first_row]}; "
            "drop warm-up rows before building the env"
        )
    for column in ("open", "close"):
        column_values = prices[column].to_numpy(dtype=np.float64)
        if not (np.isfinite(column_values).all() and (column_values > 0).all()):
            raise ValueError(f"prices column '{column}' must be finite and > 0")
    if len(prices) < window_size + 1:
        raise ValueError(
            f"env config 'window_size'={window_size} needs at least {window_size + 1} bars, the data has {len(prices)}"
        )


def _close_history(prices: pd.DataFrame, close_history: pd.Series | None) -> tuple[np.ndarray, np.ndarray]:
    """Closes of every bar up to the env's bars (float64) and the position of each env bar in them.

    ``close_history`` (closes by timestamp, in time order) may reach back before the frame: look-back
    statistics of evaluation code (the SMA baseline) then start warm. ``None``: the frame's closes.
    """
    if close_history is None:
        return prices["close"].to_numpy(dtype=np.float64).copy(), np.arange(len(prices))
    if not close_history.index.is_monotonic_increasing:
        raise ValueError("close_history must be sorted by timestamp")
    positions = close_history.index.get_indexer(prices.index)
    if (positions < 0).any():
        missing = prices.index[positions < 0]
        raise ValueError(f"close_history lacks {len(missing)} bar(s) of the env's prices, first {missing[0]}")
    history = close_history.to_numpy(dtype=np.float64).copy()
    if not np.array_equal(history[positions], prices["close"].to_numpy(dtype=np.float64)):
        raise ValueError("close_history disagrees with the env's close prices on their common bars")
    return history, positions


class TradingEnvBase(gym.Env):
    """Episode handling, observation and accounting shared by the continuous, discrete and hybrid envs.

    Subclasses only decode their action into a raw signal in [-1, 1] and call :meth:`_act`. The env
    takes its configuration typed (``config``): it is resolved once where it is read (a node, or
    ``EnvSpec.from_bytes`` for a stored spec), never again per env.
    """

    metadata = {"render_modes": []}

    #: EMA weight of the newest raw action; ``None`` means ``2 / (smoothing_window + 1)``.
    smoothing_alpha: float | None = None
    #: The true process of a planted-edge market (set by ``EnvSpec.make_env``), read by the oracle
    #: baselines only, never by the observation; ``None`` for real data.
    market_model: MarketModel | None = None

    def __init__(
        self,
        prices: pd.DataFrame,
        features: pd.DataFrame,
        config: EnvConfig,
        close_history: pd.Series | None = None,
    ):
        super().__init__()
        self.config = config
        cfg = config
        _check_frames(prices, features, cfg.window_size)

        self.feature_columns = [str(c) for c in features.columns]
        self.layout = ObservationLayout(self.feature_columns, cfg.window_size)
        self.n_bars = len(prices)
        self.first_tradable_bar = cfg.window_size - 1
        self.periods_per_year = cfg.periods_per_year

        self.open_prices = prices["open"].to_numpy(dtype=np.float64).copy()
        self.close_prices = prices["close"].to_numpy(dtype=np.float64).copy()
        if cfg.fill == "close":
            fill_prices = self.close_prices[:-1]
        elif cfg.stale_open_policy == "close_fill":
            stale = stale_open_mask(self.open_prices, self.close_prices, cfg.stale_open_rtol)[1:]
            fill_prices = np.where(stale, self.close_prices[1:], self.open_prices[1:])
        else:
            fill_prices = self.open_prices[1:]
        # Plain Python lists: indexing them yields Python floats, the fastest scalars to compute with.
        self._fill_price_list = fill_prices.tolist()
        self._close_list = self.close_prices.tolist()
        self._timestamp_list = list(prices.index)
        self.close_history, self.history_positions = _close_history(prices, close_history)
        # Read by label and curriculum wrappers (never by the observation); None without a volume column.
        self.volumes = prices["volume"].to_numpy(dtype=np.float64).copy() if "volume" in prices.columns else None

        feature_matrix = np.ascontiguousarray(features.to_numpy(dtype=np.float32))
        window_dim = cfg.window_size * len(self.feature_columns)
        windows = sliding_window_view(feature_matrix, cfg.window_size, axis=0)  # (n-w+1, F, w)
        # One ready-made observation row per bar (state block left at zero): a step copies its row
        # and writes five state values. Rows before the first tradable bar are never used.
        self._obs_rows = np.zeros((self.n_bars, self.layout.dim), dtype=np.float32)
        self._obs_rows[self.first_tradable_bar :, :window_dim] = windows.transpose(0, 2, 1).reshape(-1, window_dim)
        # Views of the rows in a list: a list lookup is cheaper than numpy's indexing in step().
        self._obs_row_list = list(self._obs_rows)
        self._state_offset = window_dim
        self._state_byte_offset = window_dim * np.dtype(np.float32).itemsize

        # Any finite float32: scaled features have no natural bound, and infinite bounds only
        # trigger checker warnings.
        bound = np.finfo(np.float32).max
        self.observation_space = gym.spaces.Box(-bound, bound, shape=(self.layout.dim,), dtype=np.float32)
        alpha = self.smoothing_alpha
        self._alpha = 2.0 / (cfg.smoothing_window + 1.0) if alpha is None else float(alpha)
        self._episode_length = cfg.episode_length
        self._portfolio = Portfolio(
            initial_cash=cfg.initial_cash,
            commission_rate=cfg.commission_rate,
            slippage_rate=cfg.slippage_rate,
            hold_threshold=cfg.hold_threshold,
            max_position_pct=cfg.max_position_pct,
            min_trade_value=cfg.min_trade_value,
            allow_short=cfg.allow_short,
        )
        self._start = self._t = self._end = self.first_tradable_bar
        self._obs: np.ndarray | None = None
        self._target_mode = cfg.action_mode == "target"
        self._risk_aversion = 0.0 if cfg.evaluation else cfg.risk_aversion

    def target_exposure(self, signal: float) -> float:
        """``action_mode: target``: the position (share of equity, signed) a smoothed signal asks for."""
        return target_exposure(signal, self.config.max_position_pct, self.config.allow_short)

    @property
    def flat_signal(self) -> float:
        """The signal that holds no position: 0, or -1 for a long-only target-exposure action."""
        return -1.0 if self._target_mode and not self.config.allow_short else 0.0

    @property
    def action_smoothing_weight(self) -> float:
        """The EMA weight of the newest raw action (1: no smoothing)."""
        return self._alpha

    @property
    def bar_index(self) -> int:
        """Bar of the latest observation; the next action is decided at its close."""
        return self._t

    @property
    def episode_bounds(self) -> tuple[int, int]:
        """First and last bar of the current episode (set by ``reset``)."""
        return self._start, self._end

    def _draw_episode_bounds(self, start_bar: int | None = None) -> tuple[int, int]:
        cfg = self.config
        first, last = self.first_tradable_bar, self.n_bars - 1
        if start_bar is not None:
            if cfg.evaluation:
                raise ValueError(
                    "reset option 'start_bar' is for training envs; an evaluation env runs the whole split"
                )
            if (
                isinstance(start_bar, bool)
                or not isinstance(start_bar, (int, np.integer))
                or not first <= start_bar < last
            ):
                raise ValueError(f"reset option 'start_bar' must be an integer in [{first}, {last}), got {start_bar!r}")
            return int(start_bar), min(int(start_bar) + cfg.episode_length, last)
        if cfg.evaluation:
            return first, last
        start = first
        latest_start = last - cfg.episode_length
        if cfg.random_start and latest_start > first:
            start = int(self.np_random.integers(first, latest_start + 1))
        return start, min(start + cfg.episode_length, last)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """``options`` (training curricula): ``start_bar`` fixes the episode's first bar;
        ``cost_multiplier`` scales commission and slippage for this episode (default 1)."""
        super().reset(seed=seed)
        options = options or {}
        unknown = sorted(set(options) - {"start_bar", "cost_multiplier"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; known: ['cost_multiplier', 'start_bar']")
        self._start, self._end = self._draw_episode_bounds(options.get("start_bar"))
        self._t = self._start
        multiplier = float(options.get("cost_multiplier", 1.0))
        if not (math.isfinite(multiplier) and multiplier >= 0.0):
            raise ValueError(f"reset option 'cost_multiplier' must be a finite number >= 0, got {multiplier!r}")
        self._portfolio.commission_rate = self.config.commission_rate * multiplier
        self._portfolio.slippage_rate = self.config.slippage_rate * multiplier
        self._portfolio.reset()
        self._equity = self._portfolio.cash
        self._smoothed = 0.0
        self._steps = 0
        self._time_in_position = 0
        obs = self._obs_rows[self._t].copy()
        obs[self._state_offset + STATE_FIELDS.index("cash_fraction")] = 1.0
        self._obs = obs
        info = {
            "equity": self._equity,
            "cash": self._equity,
            "position": 0.0,
            "position_value": 0.0,
            "fees": 0.0,
            "total_fees": 0.0,
            "trade_value": 0.0,
            "trade_units": 0.0,
            "fill_price": 0.0,
            "action_raw": 0.0,
            "action_smoothed": 0.0,
            "action_type": HOLD,
            "skipped": None,
            "timestamp": self._timestamp_list[self._t],
            "bar_index": self._t,
            "step": 0,
        }
        return obs, info

    def _act(self, raw: float):
        """One step for raw signal ``raw``: smooth, trade at the fill price, advance, mark, observe."""
        t = self._t
        if t >= self._end:
            raise RuntimeError("the episode is over; call reset() before step()")
        if raw > 1.0:
            raw = 1.0
        elif raw < -1.0:
            raw = -1.0
        elif raw != raw:
            raise ValueError("action is NaN")
        steps = self._steps
        smoothed = smooth_action(raw, self._smoothed if steps else None, self._alpha)

        portfolio = self._portfolio
        units_before = portfolio.units
        cfg = self.config
        action_type, trade_units, fill_price, fee, skipped = trade_on_action(
            portfolio, smoothed, self._fill_price_list[t], cfg.action_mode, cfg.max_position_pct, cfg.allow_short
        )
        t += 1
        close = self._close_list[t]
        units = portfolio.units
        cash = portfolio.cash
        position_value = units * close
        equity = cash + position_value
        if equity > 0.0:
            reward = math.log(equity / self._equity)
            terminated = False
        else:
            reward = math.log(_EQUITY_FLOOR_FRACTION * portfolio.initial_cash / self._equity)
            terminated = True
        if self._risk_aversion:
            reward -= 0.5 * self._risk_aversion * reward * reward

        if units == 0.0:
            time_in_position = 0
        elif units * units_before > 0.0:
            time_in_position = self._time_in_position + 1
        else:
            time_in_position = 1
        steps += 1

        obs = self._obs_row_list[t].copy()
        state = portfolio_state(portfolio, close, time_in_position, self._episode_length, smoothed)
        try:
            # One call instead of five setitems. numpy's stubs declare ndarray.__buffer__ for Python >= 3.12 only.
            _pack_state(obs, self._state_byte_offset, *state)  # type: ignore[arg-type]
        except OverflowError:  # beyond float32 range: let numpy store it as +-inf
            obs[self._state_offset :] = state

        self._t = t
        self._equity = equity
        self._smoothed = smoothed
        self._steps = steps
        self._time_in_position = time_in_position
        self._obs = obs
        info = {
            "equity": equity,
            "cash": cash,
            "position": units,
            "position_value": position_value,
            "fees": fee,
            "total_fees": portfolio.total_fees,
            "trade_value": trade_units * fill_price,
            "trade_units": trade_units,
            "fill_price": fill_price,
            "action_raw": raw,
            "action_smoothed": smoothed,
            "action_type": action_type,
            "skipped": skipped,
            "timestamp": self._timestamp_list[t],
            "bar_index": t,
            "step": steps,
        }
        return obs, reward, terminated, t >= self._end, info


def trading_env(env: gym.Env, user: str) -> TradingEnvBase:
    """The ``TradingEnvBase`` under ``env``'s wrappers (typed for its bars, config and layout); ``user``
    names what needs it in the error for any other env."""
    base = env.unwrapped
    if not isinstance(base, TradingEnvBase):
        raise ValueError(
            f"{user}: expected a trading env (TradingEnvBase) under the wrappers, got {type(base).__name__}"
        )
    return base


class ContinuousTradingEnv(TradingEnvBase):
    """Action ``Box(-1, 1, (1,))``: smoothed by an EMA, then traded by the portfolio's rule."""

    def __init__(
        self,
        prices: pd.DataFrame,
        features: pd.DataFrame,
        config: EnvConfig,
        close_history: pd.Series | None = None,
    ):
        super().__init__(prices, features, config, close_history)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def step(self, action):
        try:
            raw = action.item()  # the usual (1,) float32 array; raises for more than one value
        except AttributeError:  # a plain number or a sequence
            raw = np.asarray(action, dtype=np.float64).item()
        return self._act(raw)
