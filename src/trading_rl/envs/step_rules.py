"""The rules of one env step that live inference reproduces outside the env (``export.inference``):
the action smoothing (``smooth_action``), what the smoothed action does to the portfolio
(``trade_on_action``: a trade fraction or a target position) and the observation's portfolio state
block (``portfolio_state``). ``continuous.TradingEnvBase`` steps with them.
"""

from __future__ import annotations

from trading_rl.envs.portfolio import Portfolio


def smooth_action(raw: float, previous: float | None, alpha: float) -> float:
    """The env's action smoothing: an EMA of clipped raw actions, the first decision unsmoothed."""
    if previous is None:
        return raw
    return alpha * raw + (1.0 - alpha) * previous


def target_exposure(signal: float, cap: float, allow_short: bool) -> float:
    """``action_mode: target``: the position (share of equity, signed) a smoothed signal asks for:
    ``cap x signal`` with shorting, ``cap x (signal + 1) / 2`` long-only."""
    return cap * signal if allow_short else cap * (signal + 1.0) / 2.0


def trade_on_action(
    portfolio: Portfolio, smoothed: float, price: float, action_mode: str, cap: float, allow_short: bool
) -> tuple[str, float, float, float, str | None]:
    """The smoothed action applied to ``portfolio`` at ``price``: a trade fraction
    (``Portfolio.execute``) or, with ``action_mode: target``, the position to hold
    (``Portfolio.rebalance``). Returns (kind, units, fill price, fee, skip reason)."""
    if action_mode == "target":
        return portfolio.rebalance(target_exposure(smoothed, cap, allow_short), price)
    return portfolio.execute(smoothed, price)


def portfolio_state(
    portfolio: Portfolio, close: float, time_in_position: int, episode_length: int, last_action: float
) -> tuple[float, float, float, float, float]:
    """The observation's state block (``STATE_FIELDS`` order) for ``portfolio`` marked at ``close``."""
    cash = portfolio.cash
    position_value = portfolio.units * close
    equity = cash + position_value
    inverse_equity = 1.0 / equity if equity > 0.0 else 0.0
    time_fraction = time_in_position / episode_length
    return (
        position_value * inverse_equity,
        portfolio.unrealized_pnl(close),
        cash * inverse_equity,
        time_fraction if time_fraction < 1.0 else 1.0,
        last_action,
    )
