"""Everything needed to rebuild the trading envs of one symbol for any split.

The catalog stores an ``EnvSpec`` as data — a zip of ``spec.json`` and one parquet file per frame
(``EnvSpec.to_bytes``/``from_bytes``), never a pickle, so reading it runs no code; training,
evaluation and export phases rebuild identical envs from it without re-running the feature pipeline.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.archives import checked_zip
from trading_rl.config import ConfigError, stored_section
from trading_rl.data import OHLC_COLUMNS, PRICE_COLUMNS, by_symbol, infer_periods_per_year
from trading_rl.data.synthetic import MarketModel
from trading_rl.envs.compatibility import check_symbol_entry
from trading_rl.envs.continuous import ContinuousTradingEnv, EnvConfig, EnvConstructionParams, TradingEnvBase
from trading_rl.envs.discrete import DiscreteTradingEnv
from trading_rl.envs.hybrid import HybridTradingEnv
from trading_rl.envs.layout import ObservationLayout
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.features.scaling import scaled_value

ENV_KINDS: dict[str, type[TradingEnvBase]] = {
    "continuous": ContinuousTradingEnv,
    "discrete": DiscreteTradingEnv,
    "hybrid": HybridTradingEnv,
}


@dataclass
class EnvSpec:
    """Prices and scaled features per split (each with ``window_size - 1`` context rows in front),
    and ``closes``: the symbol's closes on every bar given to ``build_env_spec``, before the splits'
    context rows included, which the envs hand to look-back baselines (``EnvSpec.close_history``).
    ``config`` and ``market_model`` are typed sections; the archive stores them as plain data and
    ``from_bytes`` reads them back once."""

    symbol: str
    config: EnvConfig
    prices: dict[str, pd.DataFrame]
    features: dict[str, pd.DataFrame]
    periods_per_year: float
    feature_columns: list[str]
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)
    closes: pd.Series | None = None
    # The scaler the features were scaled with (``features.scaling``), for rules that must measure a
    # scaled feature from a raw reference (the options' trend from a zero return).
    feature_scaler: dict[str, Any] | None = None
    # The true process of a planted-edge market: its envs carry it so that the oracle baselines can
    # run; ``None`` for real data.
    market_model: MarketModel | None = None
    # The env settings a read archive stored (``None``: every setting, a spec built now). An archive
    # written before a setting existed reads its default, and keeps its own digest, model signature
    # and records (``config_data``), so models trained on it still fit it.
    stored_config_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def to_bytes(self) -> bytes:
        """A zip of ``spec.json`` (symbol, env config, splits …) and parquet frames: plain data."""
        frames = {f"prices/{name}": frame for name, frame in self.prices.items()}
        frames.update({f"features/{name}": frame for name, frame in self.features.items()})
        if self.closes is not None:
            frames["closes"] = self.closes.to_frame()
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zipped:
            zipped.writestr("spec.json", json.dumps(self._fields(), sort_keys=True))
            for name, frame in frames.items():
                zipped.writestr(f"{name}.parquet", frame.to_parquet())
        return archive.getvalue()

    @classmethod
    def from_bytes(cls, raw: bytes, source: str = "env spec") -> EnvSpec:
        """The spec ``to_bytes`` wrote; ``ValueError`` naming ``source`` when the file is not one, and
        naming ``source`` and the key when its env config or market model is not valid. A spec
        written before an env setting existed reads that setting's default."""
        try:
            with checked_zip(raw, source) as zipped:
                fields = json.loads(zipped.read("spec.json"))
                frames = {
                    name.removesuffix(".parquet"): pd.read_parquet(io.BytesIO(zipped.read(name)))
                    for name in zipped.namelist()
                    if name.endswith(".parquet")
                }
            closes = frames.pop("closes", None)
            config, market = fields.pop("config"), fields.pop("market_model", None)
            spec = cls(
                **fields,
                config=stored_section(EnvConfig, config, "config"),
                market_model=None if market is None else stored_section(MarketModel, market, "market_model"),
                stored_config_keys=tuple(config),
                prices={name.removeprefix("prices/"): f for name, f in frames.items() if name.startswith("prices/")},
                features={
                    name.removeprefix("features/"): f for name, f in frames.items() if name.startswith("features/")
                },
                closes=None if closes is None else closes.iloc[:, 0],
            )
        except ConfigError as exc:
            raise ValueError(
                f"{source}: its spec.json holds no valid env spec: {exc}. Nothing was run. Fix: rerun "
                "`kedro run --pipelines env_construction`"
            ) from exc
        except (zipfile.BadZipFile, KeyError, TypeError, AttributeError, ValueError, OSError) as exc:
            raise ValueError(
                f"{source} is not an env spec archive ({type(exc).__name__}: {exc}); an env spec saved as a "
                "pickle by an older version is not read — rerun `kedro run --pipelines env_construction`"
            ) from exc
        spec.check_frames(source)
        return spec

    def check_frames(self, source: str = "env spec") -> None:
        """``ValueError`` naming ``source`` and the frame when a split's features are not exactly
        ``feature_columns`` (in order) or its prices lack a price column: an edited archive, which
        would otherwise build observations of another size than the spec's layout says."""
        for split, frame in self.features.items():
            if list(frame.columns) != list(self.feature_columns):
                missing = [c for c in self.feature_columns if c not in frame.columns]
                extra = [c for c in frame.columns if c not in self.feature_columns]
                raise ValueError(
                    f"{source}: frame 'features/{split}' has {len(frame.columns)} columns, the spec's "
                    f"feature_columns {len(self.feature_columns)} (missing {missing}, extra {extra}"
                    + ("" if missing or extra else ", same columns in another order")
                    + "): the archive was changed after it was written. Nothing was run. Fix: rerun "
                    "`kedro run --pipelines env_construction`, or pin an intact version with `--load-versions "
                    "env_spec:<version>`"
                )
        for split, frame in self.prices.items():
            missing = [c for c in OHLC_COLUMNS if c not in frame.columns]
            if missing:
                raise ValueError(
                    f"{source}: frame 'prices/{split}' lacks price column(s) {missing}: the archive was changed "
                    "after it was written. Nothing was run. Fix: rerun `kedro run --pipelines env_construction`"
                )

    def _fields(self) -> dict[str, Any]:
        fields = {
            "symbol": self.symbol,
            "config": self.config_data(),
            "periods_per_year": self.periods_per_year,
            "feature_columns": self.feature_columns,
            "splits": self.splits,
            "feature_scaler": self.feature_scaler,
        }
        if self.market_model is not None:  # absent for real data: their archives and digests stay as they were
            fields["market_model"] = self.market_model.to_dict()
        return fields

    def digest(self) -> str:
        """sha256 of the spec's settings and frames: two specs with equal digests build equal envs."""
        digest = hashlib.sha256(json.dumps(self._fields(), sort_keys=True, default=str).encode())
        frames = [*(self.prices[k] for k in sorted(self.prices)), *(self.features[k] for k in sorted(self.features))]
        if self.closes is not None:
            frames.append(self.closes.to_frame())
        for frame in frames:
            digest.update(",".join(map(str, frame.columns)).encode())
            digest.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
        return digest.hexdigest()

    def config_data(self) -> dict[str, Any]:
        """``config`` as plain data, as the archive stores it: what records of the spec (model
        signatures, deployment and inference configs, check reports) hold."""
        data = self.config.to_dict()
        return data if self.stored_config_keys is None else {key: data[key] for key in self.stored_config_keys}

    def env_config(self, **overrides: Any) -> EnvConfig:
        """The env config of ``make_env(..., **overrides)`` (``overrides``: ``EnvConfig`` fields): where
        ``hold_threshold`` and the other env settings are read, without building an env."""
        return dataclasses.replace(self.config, **overrides)

    @property
    def layout(self) -> ObservationLayout:
        return ObservationLayout(self.feature_columns, self.config.window_size)

    def close_history(self, split: str) -> pd.Series:
        """Closes of every bar up to the split's last bar: what a causal look-back may read there."""
        if self.closes is None:
            raise ValueError(
                f"env spec of {self.symbol} has no close history (built before it was stored); "
                "rerun `kedro run --pipelines env_construction`"
            )
        return self.closes.loc[: self.prices[split].index[-1]]

    def scaled_zero(self, column: str) -> float:
        """Where a raw 0 of feature ``column`` lands in the observation's scaled units."""
        if self.feature_scaler is None:
            raise ValueError(
                f"env spec of {self.symbol} has no feature scaler (built before it was stored); "
                "rerun `kedro run --pipelines env_construction`"
            )
        return scaled_value(self.feature_scaler, column, 0.0)

    def make_env(
        self,
        split: str = "train",
        kind: str = "continuous",
        evaluation: bool | None = None,
        seed: int | None = None,
        **overrides: Any,
    ) -> TradingEnvBase:
        """A fresh env on ``split``; evaluation (deterministic, whole split) defaults to ``split != "train"``.

        ``overrides`` replace ``EnvConfig`` fields of the spec's config (typed values: an override
        read from parameters is checked with its section, e.g. ``options_her.env_overrides``).
        ``seed`` seeds the env's episode starts (via a first ``reset``) and its action space.
        """
        if split not in self.prices:
            raise ValueError(f"unknown split {split!r}; this spec has {sorted(self.prices)}")
        if kind not in ENV_KINDS:
            raise ValueError(f"unknown env kind {kind!r}; known: {sorted(ENV_KINDS)}")
        evaluation = (split != "train") if evaluation is None else bool(evaluation)
        config = self.env_config(**{**overrides, "evaluation": evaluation})
        env = ENV_KINDS[kind](self.prices[split], self.features[split], config, self.close_history(split))
        if self.market_model is not None:
            env.market_model = self.market_model
        if seed is not None:
            env.reset(seed=seed)
            env.action_space.seed(seed)
        return env


def _first_finite_row(features: pd.DataFrame) -> int:
    finite_rows = np.isfinite(features.to_numpy(dtype=np.float64)).all(axis=1)
    if not finite_rows.any():
        raise ValueError("scaled features have no row without NaN/inf")
    first = int(np.argmax(finite_rows))
    later_bad = ~finite_rows[first:]
    if later_bad.any():
        row = first + int(np.argmax(later_bad))
        columns = [str(c) for c in features.columns[~np.isfinite(features.iloc[row].to_numpy(dtype=np.float64))]]
        raise ValueError(f"scaled features have NaN/inf after the warm-up, at {features.index[row]} in {columns}")
    return first


def build_env_spec(
    symbol: str,
    prices: pd.DataFrame,
    scaled_features: pd.DataFrame,
    splits: Mapping[str, Any],
    config: EnvConfig,
    periods_per_year: float,
    feature_scaler: Mapping[str, Any] | None = None,
    market_model: MarketModel | None = None,
) -> EnvSpec:
    """Cut prices and features per split, with ``window_size - 1`` context bars before each start.

    ``splits`` maps split names to ``{"start": iso, "end": iso, ...}`` (inclusive); other entries
    (such as ``gap_bars``) are ignored. Leading warm-up rows of ``scaled_features`` with NaN are
    dropped; prices are taken on the features' timestamps. A split left with fewer than two bars to
    trade on (one step) is an error naming it. The spec's config is ``config`` with the symbol's
    ``periods_per_year``.
    """
    env_config = dataclasses.replace(config, periods_per_year=float(periods_per_year))
    window_size = env_config.window_size
    missing = [c for c in ("open", "close") if c not in prices.columns]
    if missing:
        raise ValueError(f"prices for {symbol} lack column(s) {missing}; expected lower-case {OHLC_COLUMNS}")
    features = scaled_features.iloc[_first_finite_row(scaled_features) :]
    absent = features.index.difference(prices.index)
    if len(absent):
        raise ValueError(f"{len(absent)} feature timestamps of {symbol} have no price bar, first {absent[0]}")
    price_columns = [c for c in PRICE_COLUMNS if c in prices.columns]
    aligned_prices = prices.loc[features.index, price_columns]

    split_ranges = {
        name: dict(bounds)
        for name, bounds in splits.items()
        if isinstance(bounds, Mapping) and "start" in bounds and "end" in bounds
    }
    if not split_ranges:
        raise ValueError("splits define no split with 'start' and 'end'")
    index = features.index
    prices_by_split: dict[str, pd.DataFrame] = {}
    features_by_split: dict[str, pd.DataFrame] = {}
    for name, bounds in split_ranges.items():
        start = int(index.searchsorted(pd.Timestamp(bounds["start"]), side="left"))
        stop = int(index.searchsorted(pd.Timestamp(bounds["end"]), side="right"))
        first = max(start - (window_size - 1), 0)
        tradable = stop - max(start, first + window_size - 1)
        if tradable < 2:
            raise ValueError(
                f"split '{name}' ({bounds['start']} .. {bounds['end']}) leaves {max(tradable, 0)} "
                f"tradable bar(s) after dropping NaN warm-up rows (window_size={window_size}); "
                "it needs at least 2"
            )
        prices_by_split[name] = aligned_prices.iloc[first:stop].copy()
        features_by_split[name] = features.iloc[first:stop].copy()

    return EnvSpec(
        symbol=str(symbol),
        config=env_config,
        prices=prices_by_split,
        features=features_by_split,
        periods_per_year=float(periods_per_year),
        feature_columns=[str(c) for c in features.columns],
        splits=split_ranges,
        closes=prices["close"].astype(np.float64),
        feature_scaler=None if feature_scaler is None else dict(feature_scaler),
        market_model=market_model,
    )


def symbol_periods_per_year(configured: float | None, index: pd.DatetimeIndex) -> float:
    """``configured`` (``env_construction.periods_per_year``), or when it is null the bar spacing's
    (``index``): the one rule by which the spec, the walk-forward and the regime tables annualise."""
    return float(configured or infer_periods_per_year(index))


def periods_per_year_by_symbol(configured: float | None, frames: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """``symbol_periods_per_year`` of each symbol's bars (``frames``: ``data.by_symbol``'s)."""
    return {symbol: symbol_periods_per_year(configured, frame.index) for symbol, frame in frames.items()}


def symbol_env_spec(
    prices: pd.DataFrame,
    scaled_features: pd.DataFrame,
    splits: dict[str, Any],
    params: EnvConstructionParams,
    scalers: dict[str, Any] | None = None,
    feature_params: FeatureExtractionParams | None = None,
) -> EnvSpec:
    """The env spec of ``params.symbol`` from the long frames of every extracted symbol; ``params``
    is the ``env_construction`` section (``symbol``, ``env``, ``periods_per_year``: inferred from the
    bars when not given). With ``scalers``, the spec keeps the symbol's feature scaler; with
    ``feature_params`` (the ``feature_extraction`` section), a synthetic symbol's market model."""
    symbol = params.symbol
    price_frames = by_symbol(prices)
    if symbol not in price_frames:
        raise ValueError(
            f"parameter 'env_construction.symbol' is {symbol!r}, which is not among the "
            f"extracted symbols {sorted(price_frames)}"
        )
    feature_frames = by_symbol(scaled_features)
    for dataset, entries in (("splits", splits), ("scaled_features", feature_frames), ("scalers", scalers or None)):
        if entries is not None:
            check_symbol_entry(entries, symbol, dataset=dataset, pipeline="env_construction")
    symbol_prices = price_frames[symbol]
    periods_per_year = symbol_periods_per_year(params.periods_per_year, symbol_prices.index)
    return build_env_spec(
        symbol=symbol,
        prices=symbol_prices,
        scaled_features=feature_frames[symbol],
        splits=splits[symbol],
        config=params.env,
        periods_per_year=periods_per_year,
        feature_scaler=(scalers or {}).get(symbol),
        market_model=None if feature_params is None else feature_params.market_model(symbol),
    )
