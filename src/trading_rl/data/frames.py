"""Long frames of several symbols: a ``timestamp`` index plus a ``symbol`` column (how the pipelines
store prices and features of every configured symbol in one dataset), and per-symbol frames."""

from __future__ import annotations

import pandas as pd


def by_symbol(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Split a long frame into ``{symbol: frame without the symbol column}``."""
    return {str(symbol): part.drop(columns="symbol") for symbol, part in frame.groupby("symbol", sort=False)}


def long_frame(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The per-symbol frames as one long frame (``by_symbol``'s inverse)."""
    return pd.concat([frame.assign(symbol=symbol) for symbol, frame in frames.items()], axis=0)
