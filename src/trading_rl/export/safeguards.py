"""Risk rules between the policy and the broker: every trade signal passes them or is blocked.

Rules (each ``None`` switches it off):

- ``min_confidence``: a trade needs ``|raw action| >= min_confidence``.
- ``max_trades_per_day``: at most this many approved trades per calendar day of the bar timestamps.
- ``max_position_pct``: a trade that increases exposure may not leave ``|position value| / equity``
  above this (at the expected fill price).
- ``daily_loss_limit``: no exposure-increasing trade once equity is this fraction below the day's
  first equity.
- ``max_drawdown``: no exposure-increasing trade once equity is this fraction below its peak.

Trades that reduce exposure stay allowed under the position, loss and drawdown rules: blocking a
sell while losing would only deepen the loss. Each blocked signal is logged with its rule and kept
in ``Safeguards.blocked``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.config import Section, setting

logger = logging.getLogger(__name__)

MIN_CONFIDENCE = "min_confidence"
MAX_TRADES_PER_DAY = "max_trades_per_day"
MAX_POSITION_PCT = "max_position_pct"
DAILY_LOSS_LIMIT = "daily_loss_limit"
MAX_DRAWDOWN = "max_drawdown"


@dataclass(frozen=True, kw_only=True)
class SafeguardConfig(Section):
    """``export.safeguards`` (also stored in each inference config); ``null`` switches a rule off."""

    max_trades_per_day: int | None = setting(10, interval="[0, inf)")
    # |position value| / equity after an exposure-increasing trade
    max_position_pct: float | None = setting(0.15, interval="[0, inf)")
    # no new exposure once equity is this far below the day's first equity
    daily_loss_limit: float | None = setting(0.02, interval="[0, 1]")
    max_drawdown: float | None = setting(0.10, interval="[0, 1]")  # ... or this far below its peak
    min_confidence: float | None = setting(0.0, interval="[0, 1]")  # a trade needs |raw action| >= this

    @classmethod
    def from_mapping(
        cls,
        values: Mapping[str, Any] | None = None,
        prefix: str = "export.safeguards",
        base: SafeguardConfig | None = None,
    ) -> SafeguardConfig:
        return super().from_mapping(values, prefix, base)


class Safeguards:
    """Stateful rule checker for one account: call :meth:`apply` on every signal, in time order."""

    def __init__(self, config: SafeguardConfig):
        self.config = config
        self.blocked: list[dict[str, Any]] = []
        self._day = None
        self._day_start_equity = 0.0
        self._trades_today = 0
        self._peak_equity = 0.0

    def _roll_day(self, timestamp: Any, equity: float) -> None:
        day = pd.Timestamp(timestamp).date()
        if day != self._day:
            self._day, self._day_start_equity, self._trades_today = day, equity, 0
        self._peak_equity = max(self._peak_equity, equity)

    def _violated_rule(self, signal: Any, position: float) -> tuple[str, str] | None:
        cfg = self.config
        equity = signal.equity
        if cfg.min_confidence is not None and abs(signal.raw_action) < cfg.min_confidence:
            return MIN_CONFIDENCE, f"|raw action| {abs(signal.raw_action):.4f} < {cfg.min_confidence}"
        if cfg.max_trades_per_day is not None and self._trades_today >= cfg.max_trades_per_day:
            return MAX_TRADES_PER_DAY, f"{self._trades_today} trades already on {self._day}"
        after = position + signal.units
        if abs(after) <= abs(position) and after * position >= 0.0:
            return None  # reduces exposure: the remaining rules never block it
        if cfg.max_position_pct is not None:
            fraction = abs(after) * signal.fill_price / equity if equity > 0 else float("inf")
            if fraction > cfg.max_position_pct:
                return MAX_POSITION_PCT, f"position would be {fraction:.4f} of equity > {cfg.max_position_pct}"
        if cfg.daily_loss_limit is not None and self._day_start_equity > 0:
            loss = 1.0 - equity / self._day_start_equity
            if loss >= cfg.daily_loss_limit:
                return DAILY_LOSS_LIMIT, f"down {loss:.4f} since the day's start >= {cfg.daily_loss_limit}"
        if cfg.max_drawdown is not None and self._peak_equity > 0:
            drawdown = 1.0 - equity / self._peak_equity
            if drawdown >= cfg.max_drawdown:
                return MAX_DRAWDOWN, f"drawdown {drawdown:.4f} >= {cfg.max_drawdown}"
        return None

    def verdict(self, signal: Any, portfolio: Any) -> tuple[Any, tuple[str, str] | None]:
        """``(signal, None)`` when every rule passes (and the trade is counted), else the blocked
        signal and ``(rule, reason)``; logs nothing and keeps no record (``apply`` does both).

        ``portfolio`` is the ``PortfolioState`` the signal was computed for.
        """
        self._roll_day(signal.timestamp, signal.equity)
        if not signal.trades:
            return signal, None
        violation = self._violated_rule(signal, portfolio.position)
        if violation is None:
            self._trades_today += 1
            return signal, None
        return signal.blocked(violation[0]), violation

    def apply(self, signal: Any, portfolio: Any) -> Any:
        """``signal`` unchanged when every rule passes (and counted as a trade), else blocked: logged
        at WARNING and appended to ``blocked`` with the rule and the reason.

        ``portfolio`` is the ``PortfolioState`` the signal was computed for.
        """
        checked, violation = self.verdict(signal, portfolio)
        if violation is None:
            return checked
        rule, reason = violation
        record = {
            "timestamp": signal.timestamp,
            "rule": rule,
            "reason": reason,
            "kind": signal.kind,
            "units": signal.units,
            "raw_action": signal.raw_action,
        }
        self.blocked.append(record)
        logger.warning(
            "signal blocked by %s at %s: %s %.6g units (%s)", rule, signal.timestamp, signal.kind, signal.units, reason
        )
        return checked
