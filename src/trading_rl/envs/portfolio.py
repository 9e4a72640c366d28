"""The accounting core shared by every trading env: from a signal in [-1, 1] to a filled trade.

One class owns cash, units and costs so that the continuous, discrete and hybrid envs cannot
disagree on a fill. It works on plain Python floats: the env calls it once per step and numpy
scalars would make each of its few dozen arithmetic operations several times slower.

Trade rule for a signal ``s`` (already smoothed) and a reference price (the next bar's open):

- ``|s| <= hold_threshold``: hold.
- ``s > hold_threshold`` while flat or long: buy ``s × cash`` of value at ``price × (1 + slippage)``,
  cut down so that cash covers value plus commission and so that the position value after the trade
  is at most ``max_position_pct`` × equity after the trade (both at the fill price).
- ``s > hold_threshold`` while short: cover ``s`` of the short (never flips to long in one step).
- ``s < -hold_threshold`` while long: sell ``|s|`` of the units at ``price × (1 - slippage)``
  (never flips to short in one step).
- ``s < -hold_threshold`` while flat or short: with ``allow_short`` open or add to a short of value
  ``|s| × cash``, capped like a buy in absolute value; without it nothing happens.
- A reduction that would leave a position worth less than ``min_trade_value`` closes it instead,
  so no unsellable remainder is left behind. Any trade whose value is below ``min_trade_value`` is
  skipped. Commission is ``commission_rate × |value|``, paid from cash.
"""

from __future__ import annotations

HOLD = "hold"
BUY = "buy"
SELL = "sell"

SKIP_MIN_TRADE_VALUE = "min_trade_value"
SKIP_POSITION_CAP = "position_cap"
SKIP_NO_POSITION = "no_position"

# (action_type, signed units traded, fill price, commission, skip reason) of trades that did not
# happen; shared constants, so a skipped step allocates nothing.
_HOLD_RESULT = (HOLD, 0.0, 0.0, 0.0, None)
_BUY_MIN_SKIP = (BUY, 0.0, 0.0, 0.0, SKIP_MIN_TRADE_VALUE)
_BUY_CAP_SKIP = (BUY, 0.0, 0.0, 0.0, SKIP_POSITION_CAP)
_SELL_MIN_SKIP = (SELL, 0.0, 0.0, 0.0, SKIP_MIN_TRADE_VALUE)
_SELL_CAP_SKIP = (SELL, 0.0, 0.0, 0.0, SKIP_POSITION_CAP)
_SELL_NO_POSITION = (SELL, 0.0, 0.0, 0.0, SKIP_NO_POSITION)


class Portfolio:
    """Cash and one signed position in a single instrument, with the trade rule above."""

    __slots__ = (
        "initial_cash",
        "commission_rate",
        "slippage_rate",
        "hold_threshold",
        "max_position_pct",
        "min_trade_value",
        "allow_short",
        "cash",
        "units",
        "entry_price",
        "total_fees",
    )

    def __init__(
        self,
        initial_cash: float,
        commission_rate: float,
        slippage_rate: float,
        hold_threshold: float,
        max_position_pct: float,
        min_trade_value: float,
        allow_short: bool,
    ):
        self.initial_cash = float(initial_cash)
        self.commission_rate = float(commission_rate)
        self.slippage_rate = float(slippage_rate)
        self.hold_threshold = float(hold_threshold)
        self.max_position_pct = float(max_position_pct)
        self.min_trade_value = float(min_trade_value)
        self.allow_short = bool(allow_short)
        self.reset()

    def reset(self) -> None:
        self.cash = self.initial_cash
        self.units = 0.0
        self.entry_price = 0.0  # average fill price of the open position, 0 when flat
        self.total_fees = 0.0

    def equity(self, price: float) -> float:
        return self.cash + self.units * price

    def unrealized_pnl(self, price: float) -> float:
        """Gain of the open position as a fraction of its cost basis (0 when flat)."""
        units = self.units
        if units > 0.0:
            return price / self.entry_price - 1.0
        if units < 0.0:
            return 1.0 - price / self.entry_price
        return 0.0

    def execute(self, signal: float, price: float) -> tuple:
        """Apply the trade rule to ``signal`` with reference price ``price``.

        Returns ``(action_type, trade_units, fill_price, commission, skipped)``: ``trade_units`` is
        signed (+ bought, - sold) and 0 when nothing was filled, ``skipped`` is ``None`` or the
        reason a buy/sell decision did not trade.
        """
        threshold = self.hold_threshold
        if -threshold <= signal <= threshold:
            return _HOLD_RESULT
        return self._trade(signal, price)

    def rebalance(self, target: float, price: float) -> tuple:
        """Trade towards a position worth ``target`` x equity (signed; both at reference ``price``):
        the target-exposure action (``EnvConfig.action_mode: target``). Within ``hold_threshold x
        max_position_pct`` of the target it holds; otherwise it trades the difference with
        ``execute``'s rule (cap, cash, costs, minimum trade value, never flipping sides in one step),
        returning what ``execute`` returns."""
        units, cash = self.units, self.cash
        position_value = units * price
        equity = cash + position_value
        if equity <= 0.0:
            return _HOLD_RESULT
        gap = target - position_value / equity
        if -self.hold_threshold * self.max_position_pct <= gap <= self.hold_threshold * self.max_position_pct:
            return _HOLD_RESULT
        if gap > 0.0:  # buy, or cover a short
            fraction = gap * equity / -position_value if units < 0.0 else gap * equity / cash if cash > 0.0 else 0.0
            return self._trade(min(fraction, 1.0), price) if fraction > 0.0 else _BUY_CAP_SKIP
        if units > 0.0:  # sell down (to flat at most)
            return self._trade(-min(-gap * equity / position_value, 1.0), price)
        fraction = -gap * equity / cash if cash > 0.0 else 0.0  # open or add to a short
        return self._trade(-min(fraction, 1.0), price) if fraction > 0.0 else _SELL_CAP_SKIP

    def _trade(self, signal: float, price: float) -> tuple:
        """``execute`` past its hold zone: ``signal`` is a nonzero fraction in [-1, 1]."""
        units = self.units
        cash = self.cash
        commission_rate = self.commission_rate
        min_value = self.min_trade_value
        if signal > 0.0:
            fill = price * (1.0 + self.slippage_rate)
            affordable = cash / (fill * (1.0 + commission_rate))
            if units < 0.0:
                quantity = signal * -units
                if (-units - quantity) * fill < min_value:
                    quantity = -units
                if quantity > affordable:
                    quantity = affordable
                value = quantity * fill
                if value < min_value:
                    return _BUY_MIN_SKIP
                closes = quantity == -units
            else:
                cap = self.max_position_pct
                room = (cap * (cash + units * fill) - units * fill) / (fill * (1.0 + cap * commission_rate))
                if room <= 0.0:
                    return _BUY_CAP_SKIP
                quantity = signal * cash / fill
                if quantity > affordable:
                    quantity = affordable
                capped = room < quantity
                if capped:
                    quantity = room
                value = quantity * fill
                if value < min_value:
                    return _BUY_CAP_SKIP if capped else _BUY_MIN_SKIP
                self.entry_price = (units * self.entry_price + value) / (units + quantity)
                closes = False
            fee = value * commission_rate
            cash -= value + fee
            self.cash = cash if cash > 0.0 else 0.0  # only float rounding can push it below zero
            if closes:
                self.units = 0.0
                self.entry_price = 0.0
            else:
                self.units = units + quantity
            self.total_fees += fee
            return (BUY, quantity, fill, fee, None)

        fill = price * (1.0 - self.slippage_rate)
        if units > 0.0:
            quantity = -signal * units
            if (units - quantity) * fill < min_value:
                quantity = units
            value = quantity * fill
            if value < min_value:
                return _SELL_MIN_SKIP
            if quantity == units:
                self.units = 0.0
                self.entry_price = 0.0
            else:
                self.units = units - quantity
        elif self.allow_short:
            cap = self.max_position_pct
            room = (cap * (cash + units * fill) + units * fill) / (fill * (1.0 + cap * commission_rate))
            if room <= 0.0:
                return _SELL_CAP_SKIP
            quantity = -signal * cash / fill
            capped = room < quantity
            if capped:
                quantity = room
            value = quantity * fill
            if value < min_value:
                return _SELL_CAP_SKIP if capped else _SELL_MIN_SKIP
            self.entry_price = (-units * self.entry_price + value) / (quantity - units)
            self.units = units - quantity
        else:
            return _SELL_NO_POSITION
        fee = value * commission_rate
        self.cash = cash + value - fee
        self.total_fees += fee
        return (SELL, -quantity, fill, fee, None)
