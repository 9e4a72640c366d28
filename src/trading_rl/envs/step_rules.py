"""The rules of one env step that live inference reproduces outside the env (``export.inference``):
the action smoothing (``smooth_action``) and the observation's portfolio state block
(``portfolio_state``). ``continuous.TradingEnvBase`` steps with them.
"""

from __future__ import annotations

from trading_rl.envs.portfolio import Portfolio


def smooth_action(raw: float, previous: float | None, alpha: float) -> float:
    """The env's action smoothing: an EMA of clipped raw actions, the first decision unsmoothed."""
    if previous is None:
        return raw
    return alpha * raw + (1.0 - alpha) * previous


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
