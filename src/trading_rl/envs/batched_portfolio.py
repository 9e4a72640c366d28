"""``Portfolio``'s trade rule for N portfolios at once, in float64 numpy (``BatchedTradingEnv``).

Every branch of ``Portfolio.execute`` / ``rebalance`` / ``_trade`` is evaluated for every member and
the member's own branch selected with masks, with the same float64 operations in the same order, so
each member's fill, cash, units and fees are bit-equal to its scalar ``Portfolio``'s
(``tests/envs/test_batched_env.py`` holds it to that). ``Portfolio`` stays the reference: a change
of the trade rule goes there first, then here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trading_rl.envs.portfolio import (
    BUY,
    HOLD,
    SELL,
    SKIP_MIN_TRADE_VALUE,
    SKIP_NO_POSITION,
    SKIP_POSITION_CAP,
    Portfolio,
)

# Codes of the outcome arrays; ``ACTION_TYPES[code]`` / ``SKIP_REASONS[code]`` are ``Portfolio``'s values.
HOLD_CODE, BUY_CODE, SELL_CODE = 0, 1, 2
ACTION_TYPES = np.array([HOLD, BUY, SELL], dtype=object)
NO_SKIP, MIN_SKIP, CAP_SKIP, NO_POSITION_SKIP = 0, 1, 2, 3
SKIP_REASONS = np.array([None, SKIP_MIN_TRADE_VALUE, SKIP_POSITION_CAP, SKIP_NO_POSITION], dtype=object)


@dataclass
class TradeOutcome:
    """Per member: action code, signed units traded, fill price, commission, skip code."""

    action: np.ndarray
    units: np.ndarray
    fill: np.ndarray
    fee: np.ndarray
    skip: np.ndarray


class PortfolioBatch:
    """Cash and one signed position per member (float64 arrays), each with its own settings."""

    def __init__(self, portfolios: list[Portfolio]) -> None:
        def column(name: str) -> np.ndarray:
            return np.array([getattr(p, name) for p in portfolios], dtype=np.float64)

        self.initial_cash = column("initial_cash")
        self.commission_rate = column("commission_rate")
        self.slippage_rate = column("slippage_rate")
        self.hold_threshold = column("hold_threshold")
        self.max_position_pct = column("max_position_pct")
        self.min_trade_value = column("min_trade_value")
        self.allow_short = np.array([p.allow_short for p in portfolios], dtype=bool)
        self.cash = column("cash")
        self.units = column("units")
        self.entry_price = column("entry_price")
        self.total_fees = column("total_fees")

    def load(self, i: int, portfolio: Portfolio) -> None:
        """Member ``i`` takes ``portfolio``'s state and (per-episode) cost rates."""
        self.commission_rate[i] = portfolio.commission_rate
        self.slippage_rate[i] = portfolio.slippage_rate
        self.cash[i] = portfolio.cash
        self.units[i] = portfolio.units
        self.entry_price[i] = portfolio.entry_price
        self.total_fees[i] = portfolio.total_fees

    def store(self, i: int, portfolio: Portfolio) -> None:
        """Member ``i``'s state written into ``portfolio`` (the single env continues from it)."""
        portfolio.commission_rate = float(self.commission_rate[i])
        portfolio.slippage_rate = float(self.slippage_rate[i])
        portfolio.cash = float(self.cash[i])
        portfolio.units = float(self.units[i])
        portfolio.entry_price = float(self.entry_price[i])
        portfolio.total_fees = float(self.total_fees[i])

    def reset(self, rows: np.ndarray) -> None:
        self.cash[rows] = self.initial_cash[rows]
        self.units[rows] = 0.0
        self.entry_price[rows] = 0.0
        self.total_fees[rows] = 0.0

    def unrealized_pnl(self, price: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            long_gain = price / self.entry_price - 1.0
            short_gain = 1.0 - price / self.entry_price
        return np.where(self.units > 0.0, long_gain, np.where(self.units < 0.0, short_gain, 0.0))

    def execute(self, signal: np.ndarray, price: np.ndarray) -> TradeOutcome:
        """``Portfolio.execute`` per member."""
        hold = (-self.hold_threshold <= signal) & (signal <= self.hold_threshold)
        return self._trade(signal, price, ~hold)

    def rebalance(self, target: np.ndarray, price: np.ndarray) -> TradeOutcome:
        """``Portfolio.rebalance`` per member: towards a position worth ``target`` x equity."""
        units, cash = self.units, self.cash
        position_value = units * price
        equity = cash + position_value
        band = self.hold_threshold * self.max_position_pct
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = target - position_value / equity
            cover = gap * equity / -position_value
            buy = np.where(cash > 0.0, gap * equity / cash, 0.0)
            sell_down = -gap * equity / position_value
            short = np.where(cash > 0.0, -gap * equity / cash, 0.0)
        active = (equity > 0.0) & ~((-band <= gap) & (gap <= band))
        up = gap > 0.0
        up_fraction = np.where(units < 0.0, cover, buy)
        down_fraction = np.where(units > 0.0, sell_down, short)
        signal = np.where(up, np.minimum(up_fraction, 1.0), -np.minimum(down_fraction, 1.0))
        cap_skip = active & np.where(up, ~(up_fraction > 0.0), (units <= 0.0) & ~(short > 0.0))
        outcome = self._trade(signal, price, active & ~cap_skip)
        outcome.action[cap_skip] = np.where(up[cap_skip], BUY_CODE, SELL_CODE)
        outcome.skip[cap_skip] = CAP_SKIP
        return outcome

    def _trade(self, signal: np.ndarray, price: np.ndarray, trading: np.ndarray) -> TradeOutcome:
        """``Portfolio._trade`` for the members where ``trading``; the others hold (state unchanged)."""
        n = len(signal)
        units, cash, entry, commission = self.units, self.cash, self.entry_price, self.commission_rate
        buying = trading & (signal > 0.0)
        selling = trading & ~(signal > 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            buy_fill = price * (1.0 + self.slippage_rate)
            sell_fill = price * (1.0 - self.slippage_rate)
            fill = np.where(buying, buy_fill, sell_fill)
            buy_quantity, buy_value, buy_skip, new_entry, closes = self._buy(signal, fill, buying)
            sell_quantity, sell_value, sell_skip, short_entry, sell_closes = self._sell(signal, fill, selling)
        quantity = np.where(buying, buy_quantity, sell_quantity)
        value = np.where(buying, buy_value, sell_value)
        skip = np.where(buying, buy_skip, np.where(selling, sell_skip, NO_SKIP))
        filled = trading & (skip == NO_SKIP)
        fee = value * commission
        bought, sold = filled & buying, filled & selling
        buy_cash = cash - (value + fee)
        new_cash = np.where(bought, np.where(buy_cash > 0.0, buy_cash, 0.0), np.where(sold, cash + value - fee, cash))
        long_or_flat_buy = bought & ~(units < 0.0)
        short_sale = sold & ~(units > 0.0)
        new_units = np.where(bought, np.where(closes, 0.0, units + quantity), units)
        new_units = np.where(sold, np.where(sell_closes, 0.0, units - quantity), new_units)
        entry_after = np.where(long_or_flat_buy, new_entry, np.where(short_sale, short_entry, entry))
        entry_after = np.where((bought & closes) | (sold & sell_closes), 0.0, entry_after)
        self.cash = new_cash
        self.units = new_units
        self.entry_price = entry_after
        self.total_fees = np.where(filled, self.total_fees + fee, self.total_fees)
        action = np.where(buying, BUY_CODE, np.where(selling, SELL_CODE, HOLD_CODE))
        zero = np.zeros(n)
        return TradeOutcome(
            action=action,
            units=np.where(bought, quantity, np.where(sold, -quantity, zero)),
            fill=np.where(filled, fill, zero),
            fee=np.where(filled, fee, zero),
            skip=skip,
        )

    def _buy(self, signal, fill, buying):
        """The buy branch for every member: quantity, value, skip code, new entry price, closes."""
        units, cash, commission = self.units, self.cash, self.commission_rate
        min_value, cap = self.min_trade_value, self.max_position_pct
        affordable = cash / (fill * (1.0 + commission))
        # Covering a short.
        cover = signal * -units
        cover = np.where((-units - cover) * fill < min_value, -units, cover)
        cover = np.where(cover > affordable, affordable, cover)
        cover_value = cover * fill
        # Opening or adding to a long.
        room = (cap * (cash + units * fill) - units * fill) / (fill * (1.0 + cap * commission))
        long = signal * cash / fill
        long = np.where(long > affordable, affordable, long)
        capped = room < long
        long = np.where(capped, room, long)
        long_value = long * fill
        short_position = units < 0.0
        quantity = np.where(short_position, cover, long)
        value = np.where(short_position, cover_value, long_value)
        long_skip = np.where(
            ~(room > 0.0), CAP_SKIP, np.where(long_value < min_value, np.where(capped, CAP_SKIP, MIN_SKIP), NO_SKIP)
        )
        cover_skip = np.where(cover_value < min_value, MIN_SKIP, NO_SKIP)
        skip = np.where(buying, np.where(short_position, cover_skip, long_skip), NO_SKIP)
        new_entry = (units * self.entry_price + long_value) / (units + long)
        closes = short_position & (cover == -units)
        return quantity, value, skip, new_entry, closes

    def _sell(self, signal, fill, selling):
        """The sell branch for every member: quantity, value, skip code, new short entry, closes."""
        units, cash, commission = self.units, self.cash, self.commission_rate
        min_value, cap = self.min_trade_value, self.max_position_pct
        # Reducing a long.
        reduce = -signal * units
        reduce = np.where((units - reduce) * fill < min_value, units, reduce)
        reduce_value = reduce * fill
        # Opening or adding to a short.
        room = (cap * (cash + units * fill) + units * fill) / (fill * (1.0 + cap * commission))
        short = -signal * cash / fill
        capped = room < short
        short = np.where(capped, room, short)
        short_value = short * fill
        long_position = units > 0.0
        quantity = np.where(long_position, reduce, short)
        value = np.where(long_position, reduce_value, short_value)
        short_skip = np.where(
            ~self.allow_short,
            NO_POSITION_SKIP,
            np.where(
                ~(room > 0.0),
                CAP_SKIP,
                np.where(short_value < min_value, np.where(capped, CAP_SKIP, MIN_SKIP), NO_SKIP),
            ),
        )
        reduce_skip = np.where(reduce_value < min_value, MIN_SKIP, NO_SKIP)
        skip = np.where(selling, np.where(long_position, reduce_skip, short_skip), NO_SKIP)
        short_entry = (-units * self.entry_price + short_value) / (short - units)
        closes = long_position & (reduce == units)
        return quantity, value, skip, short_entry, closes
