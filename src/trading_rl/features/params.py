"""The ``feature_extraction`` parameter section: which symbols, how many rows, splits, features, scaler.

Symbols (``data.selection.SymbolEntry``) may be given as a list (``{name, source}`` mappings or
``name[:source]`` strings) or as one string of whitespace-separated ``name[:source]`` entries. The
string form exists for the command line, where Kedro splits ``--params`` values at commas::

    kedro run --params "feature_extraction.symbols=AAPL:file sp500,env_construction.symbol=AAPL"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.config import ConfigError, Section, setting
from trading_rl.data.selection import SymbolEntry
from trading_rl.data.synthetic import MarketModel
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.scaling import SCALING_METHODS
from trading_rl.features.splits import check_split_params

PARAMS_PREFIX = "feature_extraction"


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
        try:  # dates in order, fractions that leave a test split: refused when parsed, before a file is read
            check_split_params(self.to_dict())
        except ValueError as error:
            raise ConfigError(
                f"parameter '{prefix}': {error}. Nothing was read or written. Fix: set '{prefix}' in "
                "conf/<env>/parameters_feature_extraction.yml (or --params) so that train_end is before "
                "validation_end, or train_fraction + validation_fraction < 1"
            ) from error

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

    symbols: list[SymbolEntry]
    min_rows: int = setting(250, interval="[1, inf)")
    splits: SplitParams
    features: FeatureParams = setting(FeatureParams())
    scaler: ScalerParams = setting(ScalerParams())

    @classmethod
    def from_mapping(
        cls, mapping: Any = None, prefix: str = PARAMS_PREFIX, base: FeatureExtractionParams | None = None
    ) -> FeatureExtractionParams:
        """``symbols`` may also be one string of whitespace-separated ``NAME[:SOURCE]`` entries."""
        if isinstance(mapping, Mapping) and "symbols" in mapping:
            symbols = mapping["symbols"]
            if isinstance(symbols, str):
                symbols = symbols.split()
            if not isinstance(symbols, (list, tuple)) or not symbols:
                raise ConfigError(
                    f"parameter '{prefix}.symbols' must list at least one symbol (a list, or 'NAME[:SOURCE] ...'), "
                    f"got {mapping['symbols']!r}"
                )
            mapping = {**mapping, "symbols": symbols}
        return super().from_mapping(mapping, prefix, base)

    def validate(self, prefix: str) -> None:
        names = [entry.name for entry in self.symbols]
        if len(set(names)) != len(names):
            raise ConfigError(f"parameter '{prefix}.symbols' repeats a symbol: {names}")

    def market_model(self, symbol: str) -> MarketModel | None:
        """The planted-edge market behind ``symbol`` when it is ``synthetic``; ``None`` for real data
        (no oracle exists there)."""
        return next((entry.market for entry in self.symbols if entry.name == symbol), None)
