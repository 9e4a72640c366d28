"""The one bad-bar rule: a bad tick or an unadjusted split, wherever the bar sits.

A close whose log return lies more than ``SPIKE_ROBUST_Z`` robust standard deviations (1.4826 x MAD)
from the median of the symbol's returns is not a market move: the largest daily moves of the packaged
S&P 500 and NASDAQ score about 14; one bar 10x off scores several hundred, an unadjusted 4:1 split
about 130. The rule is applied to every bar of every split when prices are read (``feature_extraction``
and every ``forward`` rerun, whose new bars are read the same way) and by the GARCH fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trading_rl.data.schemas import format_timestamp

SPIKE_ROBUST_Z = 50.0
MAD_TO_STD = 1.4826
BAD_BAR_FIX = (
    "Fix: repair the bar in its price file (the close of the bar, or split-adjusted prices before a split), "
    "or exclude the symbol (feature_extraction.symbols)"
)


class BadBarError(ValueError):
    """A bar of a price file is a bad tick or an unadjusted split; nothing was written."""


@dataclass(frozen=True)
class BadBar:
    """The first bar whose log return is an outlier of ``SPIKE_ROBUST_Z`` robust z or more."""

    timestamp: pd.Timestamp
    log_return: float
    robust_z: float
    return_out: float | None  # the next bar's log return when it jumps back (a tick), else None

    @property
    def factor(self) -> str:
        return f"about {float(f'{np.exp(abs(self.log_return)):.2g}'):g}x"  # 2 significant digits

    def describe(self) -> str:
        """Why the bar is refused, in the words of a person looking at the file."""
        if self.return_out is not None:
            return (
                f"the bar at {format_timestamp(self.timestamp)} is {self.factor} off its neighbours "
                f"(log returns {self.log_return:+.3g} into it and {self.return_out:+.3g} out of it, robust z "
                f"{self.robust_z:.0f}, over {SPIKE_ROBUST_Z:.0f} robust standard deviations): a bad tick"
            )
        return (
            f"the log return at {format_timestamp(self.timestamp)} is {self.log_return:+.3g}, a jump of "
            f"{self.factor} (robust z {self.robust_z:.0f}, over {SPIKE_ROBUST_Z:.0f} robust standard deviations from "
            "the median): a bad tick or an unadjusted split"
        )


def find_bad_bar(log_returns: pd.Series) -> BadBar | None:
    """The first bad bar of ``log_returns`` (NaNs ignored), or ``None``."""
    values = log_returns.dropna()
    if values.empty:
        return None
    deviation = (values - values.median()).abs()
    scale = MAD_TO_STD * deviation.median() or float(values.std())
    if not scale:
        return None
    robust_z = deviation / scale
    extreme = robust_z > SPIKE_ROBUST_Z
    if not extreme.any():
        return None
    position = int(np.argmax(extreme.to_numpy()))
    jump = float(values.iloc[position])
    back = float(values.iloc[position + 1]) if position + 1 < len(values) else 0.0
    ticks_back = bool(extreme.iloc[position + 1 : position + 2].any()) and np.sign(back) == -np.sign(jump)
    return BadBar(values.index[position], jump, float(robust_z.iloc[position]), back if ticks_back else None)


def check_bad_bars(prices: pd.DataFrame, symbol: str, source_name: str) -> None:
    """Raise :class:`BadBarError` naming the symbol, file, bar, its close and robust z and the fix when
    any bar of ``prices`` is a bad tick or an unadjusted split."""
    close = prices["close"].astype(float)
    bad = find_bad_bar(np.log(close).diff())
    if bad is None:
        return
    position = close.index.get_loc(bad.timestamp)
    previous = close.iloc[position - 1]
    raise BadBarError(
        f"symbol {symbol!r} ({source_name}): {bad.describe()}; close {close.iloc[position]:.6g} after "
        f"{previous:.6g}. Nothing was written. {BAD_BAR_FIX}."
    )
