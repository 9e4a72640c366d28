"""Live signals from an exported actor: latest bars + current portfolio -> HOLD / BUY / SELL.

The observation is rebuilt the way the pipeline and the env build it: the features of
``compute_features`` (``feature_values``: the same floats, no DataFrame) with the stored
(train-fitted) feature parameters, ``apply_scaler``'s arithmetic with the stored scaler on the last
``window_size`` rows, time-major as float32 (``ObservationLayout``), then the portfolio state block
marked at the latest close. The action goes through the env's clip and EMA smoothing and the trade
decision is the env's own ``Portfolio.execute`` (``Portfolio.rebalance`` towards the target exposure
under ``action_mode: target``), so a signal is what the env would have done.

Recursive features (EMA, Wilder averages, GARCH) start at the first bar they are given: pass the
same history the pipeline computed features on (from its first bar), extended with the new bars,
to get identical features. A shorter history gives slightly different values until those
recursions have forgotten their start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.envs.continuous import EnvConfig
from trading_rl.envs.deployment import stored_sections
from trading_rl.envs.layout import STATE_FIELDS, ObservationLayout
from trading_rl.envs.portfolio import Portfolio
from trading_rl.envs.step_rules import portfolio_state, smooth_action, trade_on_action
from trading_rl.export.onnx_export import INPUT_NAME, OUTPUT_NAME, inference_session
from trading_rl.features import feature_values, max_lookback
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.splits import check_time_index

BAR_COLUMNS = ("open", "high", "low", "close", "volume")
CLOSE = BAR_COLUMNS.index("close")


@dataclass(frozen=True)
class PortfolioState:
    """The live account as the env tracks it.

    ``position`` is signed units, ``entry_price`` the average fill price of the open position (0
    when flat), ``time_in_position`` the number of decisions since the position was opened and
    ``last_action`` the smoothed action of the previous decision (``None`` before the first one:
    the env does not smooth its first action).
    """

    cash: float
    position: float = 0.0
    entry_price: float = 0.0
    time_in_position: int = 0
    last_action: float | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> PortfolioState:
        """A broker's account as a dict (``cash``, and the other fields by name); an unknown key is
        a ``ValueError`` naming it, where ``PortfolioState(**values)`` would say less."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown portfolio key(s) {unknown}; known: {sorted(known)}")
        if "cash" not in values:
            raise ValueError("portfolio needs 'cash'")
        return cls(**values)

    def __post_init__(self) -> None:
        for name in ("cash", "position", "entry_price"):
            value = getattr(self, name)
            if not np.isfinite(value):
                raise ValueError(f"portfolio '{name}' must be finite, got {value!r}")
        if self.position != 0.0 and self.entry_price <= 0.0:
            raise ValueError("portfolio 'entry_price' must be > 0 while a position is open")
        if self.time_in_position < 0:
            raise ValueError(f"portfolio 'time_in_position' must be >= 0, got {self.time_in_position}")
        if self.last_action is not None and not -1.0 <= self.last_action <= 1.0:
            raise ValueError(f"portfolio 'last_action' must lie in [-1, 1] or be None, got {self.last_action!r}")


@dataclass(frozen=True)
class Signal:
    """One decision. ``kind`` is the env's action type (``"hold"``, ``"buy"``, ``"sell"``);
    ``units`` is signed (+ buy, - sell) and 0 when nothing trades (a hold, a decision the trade
    rule skipped — ``skipped`` names why — or one a safeguard blocked — ``blocked_by`` names the
    rule). ``fill_price`` and ``value`` are estimated at the reference price. Pass
    ``smoothed_action`` back as the next ``last_action``, blocked or not: the env's smoothing
    state does not depend on fills."""

    timestamp: Any
    kind: str
    units: float
    value: float
    fill_price: float
    raw_action: float
    smoothed_action: float
    skipped: str | None
    equity: float
    reference_price: float
    blocked_by: str | None = None
    fee: float = 0.0  # the commission of the fill, estimated at the reference price

    @property
    def trades(self) -> bool:
        return self.units != 0.0

    def blocked(self, rule: str) -> Signal:
        return replace(self, units=0.0, value=0.0, fill_price=0.0, fee=0.0, blocked_by=rule)


class SignalEngine:
    """Runs an exported actor on live bars.

    ``model``: ONNX bytes or a path. ``feature_params``: one symbol's entry of the ``feature_params``
    dataset, as a ``FeatureParams``; ``scaler``: its entry of ``scalers``; ``env_config`` (an
    ``EnvConfig``) and ``feature_columns``: from the ``EnvSpec`` the model was trained on. ``safeguards``: an optional
    ``Safeguards`` applied to every signal.
    """

    def __init__(
        self,
        model: bytes | str | Path,
        feature_params: FeatureParams,
        scaler: Mapping[str, Any],
        env_config: EnvConfig,
        feature_columns: list[str],
        safeguards: Any = None,
        intra_op_threads: int = 1,
    ):
        self.config = env_config
        self.layout = ObservationLayout(feature_columns, self.config.window_size)
        self.feature_params = feature_params
        self.scaler = dict(scaler)
        self.safeguards = safeguards
        scaler_columns = list(self.scaler["columns"])
        if sorted(scaler_columns) != sorted(self.layout.feature_columns):
            raise ValueError(
                f"wrong feature count or names: the model takes {self.layout.n_features} feature "
                f"columns {list(self.layout.feature_columns)}, the scaler has {len(scaler_columns)} "
                f"{scaler_columns}"
            )
        # the scaler as arrays in the observation's column order: what apply_scaler computes, per bar
        self._feature_columns = list(self.layout.feature_columns)
        self._center = np.array([self.scaler["center"][column] for column in self._feature_columns])
        self._scale = np.array([self.scaler["scale"][column] for column in self._feature_columns])
        self.warmup_bars = max_lookback(self.feature_params)
        self.min_bars = self.warmup_bars + self.config.window_size
        self._alpha = 2.0 / (self.config.smoothing_window + 1.0)
        self._session = inference_session(str(model) if isinstance(model, Path) else model, intra_op_threads)
        model_dim = self._session.get_inputs()[0].shape[-1]
        if model_dim != self.layout.dim:
            raise ValueError(
                f"wrong feature count: the ONNX model takes observations of {model_dim} values, but "
                f"window_size {self.config.window_size} x {self.layout.n_features} features + "
                f"{len(STATE_FIELDS)} state fields = {self.layout.dim}"
            )

    @classmethod
    def from_inference_config(cls, model: bytes | str | Path, config: Mapping[str, Any], **kwargs) -> SignalEngine:
        """From the ``<agent>_inference_config`` the export pipeline writes next to the ONNX file: its
        plain data read into typed sections here, once (``ConfigError`` naming the stored key)."""
        env_config, feature_params = stored_sections(config, "inference_config")
        return cls(model, feature_params, config["scaler"], env_config, config["feature_columns"], **kwargs)

    def _checked_bars(self, bars: pd.DataFrame) -> np.ndarray:
        """``bars``' OHLCV as float64, after the checks ``compute_features`` would make."""
        if not isinstance(bars, pd.DataFrame):
            raise ValueError(f"bars must be a pandas DataFrame, got {type(bars).__name__}")
        missing = [column for column in BAR_COLUMNS if column not in bars.columns]
        if missing:
            raise ValueError(f"bars lack column(s) {missing}; need lower-case {list(BAR_COLUMNS)}")
        if len(bars) < self.min_bars:
            raise ValueError(
                f"missing bars: {len(bars)} given, the observation needs at least {self.min_bars} "
                f"({self.warmup_bars} warm-up bars of the longest feature + window_size "
                f"{self.config.window_size})"
            )
        check_time_index(bars.index, "bars index")
        values = bars[list(BAR_COLUMNS)].to_numpy(np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            row, column = np.argwhere(bad)[0]
            columns = [c for c, flag in zip(BAR_COLUMNS, bad.any(axis=0)) if flag]
            raise ValueError(
                f"bars contain NaN/inf in column(s) {columns}, first in '{BAR_COLUMNS[column]}' at {bars.index[row]}"
            )
        bad = values[:, :4] <= 0.0
        if bad.any():
            row, column = np.argwhere(bad)[0]
            raise ValueError(f"bars column '{BAR_COLUMNS[column]}' must be > 0 at {bars.index[row]}")
        return values

    def feature_window(self, bars: pd.DataFrame) -> np.ndarray:
        """Scaled features of the last ``window_size`` bars, float32, oldest first: the features
        over every bar given (the recursions start at the first), the scaler on the window only."""
        return self._feature_window(bars.index, self._checked_bars(bars))

    def _feature_window(self, index: pd.DatetimeIndex, ohlcv: np.ndarray) -> np.ndarray:
        features = feature_values(index, ohlcv, self.feature_params)
        columns = self._feature_columns
        if sorted(features) != sorted(columns):
            missing = sorted(set(columns) - set(features))
            extra = sorted(set(features) - set(columns))
            raise ValueError(
                f"wrong feature count: feature_params produce {len(features)} columns, the model "
                f"takes {len(columns)}; missing {missing}, extra {extra}"
            )
        window = self.config.window_size
        values = np.column_stack([features[column][-window:] for column in columns])
        scaled = (values - self._center) / self._scale
        if self.scaler["clip"] is not None:
            scaled = np.clip(scaled, -self.scaler["clip"], self.scaler["clip"])
        if not np.isfinite(scaled).all():
            bad_rows = index[-window:][~np.isfinite(scaled).all(axis=1)]
            raise ValueError(
                f"missing bars: features are NaN at {list(bad_rows)} (still in the warm-up); pass a longer history"
            )
        return scaled.astype(np.float32)

    def _portfolio(self, state: PortfolioState) -> Portfolio:
        cfg = self.config
        portfolio = Portfolio(
            cfg.initial_cash,
            cfg.commission_rate,
            cfg.slippage_rate,
            cfg.hold_threshold,
            cfg.max_position_pct,
            cfg.min_trade_value,
            cfg.allow_short,
        )
        portfolio.cash, portfolio.units, portfolio.entry_price = state.cash, state.position, state.entry_price
        return portfolio

    def observation(self, bars: pd.DataFrame, state: PortfolioState) -> np.ndarray:
        """The env's observation at the latest bar for the portfolio ``state``."""
        return self._observation(bars.index, self._checked_bars(bars), state)

    def _observation(self, index: pd.DatetimeIndex, ohlcv: np.ndarray, state: PortfolioState) -> np.ndarray:
        observation = np.empty(self.layout.dim, dtype=np.float32)
        observation[self.layout["features"]] = self._feature_window(index, ohlcv).reshape(-1)
        close = float(ohlcv[-1, CLOSE])
        last_action = 0.0 if state.last_action is None else state.last_action
        observation[self.layout["state"]] = portfolio_state(
            self._portfolio(state), close, state.time_in_position, self.config.episode_length, last_action
        )
        return observation

    def action(self, observation: np.ndarray) -> float:
        """The actor's raw action for one observation."""
        observation = np.asarray(observation, dtype=np.float32)
        if observation.shape != (self.layout.dim,):
            raise ValueError(
                f"wrong feature count: observation has shape {observation.shape}, the model takes ({self.layout.dim},)"
            )
        if not np.isfinite(observation).all():
            bad = np.flatnonzero(~np.isfinite(observation)).tolist()
            raise ValueError(f"observation contains NaN/inf at index {bad}")
        (action,) = self._session.run([OUTPUT_NAME], {INPUT_NAME: observation[None, :]})
        return float(action[0, 0])

    def signal(
        self,
        bars: pd.DataFrame,
        state: PortfolioState,
        reference_price: float | None = None,
    ) -> Signal:
        """Decision at the latest bar's close for the portfolio ``state``; sizes are estimated at
        ``reference_price`` (the expected fill reference, i.e. the next open; default: the latest
        close)."""
        return self.checked_signal(bars.index, self._checked_bars(bars), state, reference_price)

    def checked_signal(
        self,
        index: pd.DatetimeIndex,
        ohlcv: np.ndarray,
        state: PortfolioState,
        reference_price: float | None = None,
    ) -> Signal:
        """:meth:`signal` on bars the caller checked as it checks them (``serving.request``: a sorted,
        duplicate-free ``index``; ``ohlcv`` float64 open, high, low, close, volume, finite, prices
        > 0, at least ``min_bars`` rows), without checking them again."""
        raw = min(max(self.action(self._observation(index, ohlcv, state)), -1.0), 1.0)
        smoothed = smooth_action(raw, state.last_action, self._alpha)
        close = float(ohlcv[-1, CLOSE])
        price = close if reference_price is None else float(reference_price)
        if not (np.isfinite(price) and price > 0.0):
            raise ValueError(f"reference_price must be finite and > 0, got {reference_price!r}")
        account, cfg = self._portfolio(state), self.config
        kind, units, fill_price, fee, skipped = trade_on_action(
            account, smoothed, price, cfg.action_mode, cfg.max_position_pct, cfg.allow_short
        )
        signal = Signal(
            timestamp=index[-1],
            kind=kind,
            units=float(units),
            value=abs(float(units)) * fill_price,
            fill_price=float(fill_price),
            raw_action=raw,
            smoothed_action=smoothed,
            skipped=skipped,
            equity=state.cash + state.position * close,
            reference_price=price,
            fee=float(fee),
        )
        if self.safeguards is not None:
            signal = self.safeguards.apply(signal, state)
        return signal
