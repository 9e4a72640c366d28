"""The configured symbols' prices, read and validated together (the feature_extraction and forward
pipelines' first step)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.config import ConfigError, Section, setting
from trading_rl.data.bad_bars import check_bad_bars
from trading_rl.data.frames import long_frame
from trading_rl.data.schemas import validate_prices
from trading_rl.data.sources import load_prices
from trading_rl.data.synthetic import MarketModel, synthetic_prices

SOURCES = ("packaged", "file", "synthetic")


@dataclass(frozen=True, kw_only=True)
class SymbolEntry(Section):
    """One entry of ``feature_extraction.symbols``: the symbol, where its bars come from, and for a
    ``synthetic`` one (only there) its planted-edge ``MarketModel``."""

    name: str = setting(check=lambda name: None if name else "a non-empty string")
    source: str = setting("packaged", choices=SOURCES)
    market: MarketModel | None = None

    @classmethod
    def from_mapping(cls, mapping: Any = None, prefix: str = "", base: SymbolEntry | None = None) -> SymbolEntry:
        """Also ``"NAME[:SOURCE]"``, the form the command line can pass."""
        if isinstance(mapping, str):
            name, _, source = mapping.partition(":")
            mapping = {"name": name, "source": source} if source else {"name": name}
        elif not isinstance(mapping, (Mapping, SymbolEntry)):
            raise ConfigError(f"parameter '{prefix}' must be 'NAME[:SOURCE]' or {{name, source}}, got {mapping!r}")
        return super().from_mapping(mapping, prefix, base)

    def validate(self, prefix: str) -> None:
        if (self.source == "synthetic") != (self.market is not None):
            raise ConfigError(
                f"parameter '{prefix}.market' is required with source 'synthetic' and only there "
                "(family, strength, n_bars, seed, ...: see docs/controls.md)"
            )


def load_validated_prices(
    entries: Sequence[SymbolEntry], raw_price_files: Mapping[str, Callable[[], pd.DataFrame]], min_rows: int
) -> pd.DataFrame:
    """Every entry's prices as one long frame, all validated before anything is returned: nothing is
    written unless every symbol passes the schema and the bad-bar rule (``data.bad_bars``, every bar
    of every split and every new bar of a forward rerun), so a bad file never leaves half a run
    behind. ``raw_price_files``: the loaders of ``data/01_raw/prices/`` by symbol."""
    validated: dict[str, pd.DataFrame] = {}
    for entry in entries:
        name = entry.name
        if entry.source == "file":
            if name not in raw_price_files:
                raise FileNotFoundError(
                    f"symbol '{name}' has source 'file' but data/01_raw/prices/ has no "
                    f"{name}.csv or {name}.parquet (found: {sorted(raw_price_files) or 'none'})"
                )
            raw = raw_price_files[name]()
            source_name = f"data/01_raw/prices/{name}"
        elif entry.market is not None:
            raw = synthetic_prices(entry.market)
            source_name = f"synthetic:{name}"
        else:
            raw = load_prices(name, source="packaged")
            source_name = f"packaged:{name}"
        validated[name] = validate_prices(raw, name, min_rows=min_rows, source_name=source_name)
        check_bad_bars(validated[name], name, source_name)
    return long_frame(validated)
