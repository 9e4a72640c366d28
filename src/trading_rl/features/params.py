"""The ``feature_extraction`` parameter section: which symbols, how many rows, splits, features, scaler.

Symbols may be given as a list (``{name, source}`` mappings or ``name[:source]`` strings) or as one
string of whitespace-separated ``name[:source]`` entries. The string form exists for the command
line, where Kedro splits ``--params`` values at commas::

    kedro run --params "feature_extraction.symbols=AAPL:file sp500,env_construction.symbol=AAPL"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.config import ConfigError, Section, setting
from trading_rl.data.synthetic import MarketModel
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.scaling import SCALING_METHODS

PARAMS_PREFIX = "feature_extraction"
SOURCES = ("packaged", "file", "synthetic")
DEFAULT_SOURCE = "packaged"
DEFAULT_MIN_ROWS = 250


def symbol_entries(symbols: Any, key: str = f"{PARAMS_PREFIX}.symbols") -> list[dict[str, Any]]:
    """``[{"name", "source"}, ...]`` from any accepted form; errors name ``key`` and the entry.
    A ``synthetic`` entry also carries ``market``: its validated ``MarketModel``."""
    if isinstance(symbols, str):
        symbols = symbols.split()
    if not isinstance(symbols, (list, tuple)) or not symbols:
        raise ConfigError(
            f"parameter '{key}' must list at least one symbol (a list, or 'NAME[:SOURCE] ...'), got {symbols!r}"
        )
    entries = []
    for index, entry in enumerate(symbols):
        where = f"{key}[{index}]"
        if isinstance(entry, str):
            symbol, _, symbol_source = entry.partition(":")
            entry = {"name": symbol, "source": symbol_source or DEFAULT_SOURCE}
        if not isinstance(entry, dict):
            raise ConfigError(f"parameter '{where}' must be 'NAME[:SOURCE]' or {{name, source}}, got {entry!r}")
        unknown = sorted(set(entry) - {"name", "source", "market"})
        if unknown:
            raise ConfigError(f"unknown parameter '{where}.{unknown[0]}'; known: ['market', 'name', 'source']")
        name, source = entry.get("name"), entry.get("source", DEFAULT_SOURCE)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"parameter '{where}.name' must be a non-empty string, got {name!r}")
        if source not in SOURCES:
            raise ConfigError(f"parameter '{where}.source' is {source!r}; expected one of {list(SOURCES)}")
        if (source == "synthetic") != ("market" in entry):
            raise ConfigError(
                f"parameter '{where}.market' is required with source 'synthetic' and only there "
                "(family, strength, n_bars, seed, ...: see docs/controls.md)"
            )
        if source == "synthetic":
            market = MarketModel.from_mapping(entry["market"], f"{where}.market")
            entries.append({"name": name, "source": source, "market": market})
        else:
            entries.append({"name": name, "source": source})
    names = [entry["name"] for entry in entries]
    if len(set(names)) != len(names):
        raise ConfigError(f"parameter '{key}' repeats a symbol: {names}")
    return entries


def _date_problem(value: Any) -> str | None:
    try:
        pd.Timestamp(value)
    except (TypeError, ValueError):
        return "a date such as '2012-12-31'"
    return None


@dataclass(frozen=True, kw_only=True)
class SplitParams(Section):
    """Dates (inclusive ends) or fractions; ``make_splits`` checks them against the data."""

    REFUSED = {"gap_bars": "the purge gap is the longest feature look-back, set by feature_extraction.features"}

    train_end: Any = setting(None, check=_date_problem)
    validation_end: Any = setting(None, check=_date_problem)
    train_fraction: float | None = setting(None, interval="(0, 1)")
    validation_fraction: float | None = setting(None, interval="(0, 1)")
    min_bars: int | None = setting(None, interval="[1, inf)")

    def validate(self, prefix: str) -> None:
        dates = [self.train_end, self.validation_end]
        fractions = [self.train_fraction, self.validation_fraction]
        by_date, by_fraction = any(v is not None for v in dates), any(v is not None for v in fractions)
        if by_date == by_fraction or None in (dates if by_date else fractions):
            raise ConfigError(
                f"parameter '{prefix}' needs either train_end and validation_end, or train_fraction and "
                "validation_fraction"
            )

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in super().to_dict().items() if value is not None}


@dataclass(frozen=True, kw_only=True)
class ScalerParams(Section):
    method: str = setting("robust", choices=SCALING_METHODS)
    clip: float | None = setting(5.0, interval="(0, inf)")  # null: no clipping


@dataclass(frozen=True, kw_only=True)
class FeatureExtractionParams(Section):
    """The ``feature_extraction`` section (symbols and splits have no code default: conf/base is
    their one place)."""

    symbols: Any
    min_rows: int = setting(DEFAULT_MIN_ROWS, interval="[1, inf)")
    splits: SplitParams
    features: FeatureParams = setting(FeatureParams())
    scaler: ScalerParams = setting(ScalerParams())

    def validate(self, prefix: str) -> None:
        symbol_entries(self.symbols, f"{prefix}.symbols")


def market_model(symbol: str, feature_params: Any) -> MarketModel | None:
    """The planted-edge market behind ``symbol`` when ``feature_params`` (the ``feature_extraction``
    section) declares it ``synthetic``; ``None`` for real data (no oracle exists there)."""
    symbols = (feature_params or {}).get("symbols")
    if symbols is None:
        return None
    for entry in symbol_entries(symbols):
        if entry["name"] == symbol and entry["source"] == "synthetic":
            return entry["market"]
    return None
