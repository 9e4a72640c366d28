"""Hand-computed accounting: every expected number below is written out as arithmetic."""

import math

import numpy as np
import pandas as pd
import pytest

from trading_rl.envs import ContinuousTradingEnv, EnvConfig, Portfolio

OPEN = [100.0, 101.0, 102.0, 104.0, 103.0, 105.0]
CLOSE = [100.5, 101.5, 103.0, 103.5, 104.0, 106.0]
COMMISSION = 0.001
SLIPPAGE = 0.0005


def small_frames(open_=OPEN, close=CLOSE):
    index = pd.date_range("2020-01-01", periods=len(open_), freq="D")
    prices = pd.DataFrame(
        {"open": open_, "high": np.maximum(open_, close), "low": np.minimum(open_, close), "close": close},
        index=index,
    )
    features = pd.DataFrame({"f": np.arange(len(open_), dtype=float)}, index=index)
    return prices, features


def scripted_env(**overrides):
    config = dict(
        initial_cash=10_000.0,
        window_size=2,
        commission_rate=COMMISSION,
        slippage_rate=SLIPPAGE,
        hold_threshold=0.1,
        smoothing_window=1,
        max_position_pct=0.5,
        min_trade_value=25.0,
        evaluation=True,
        action_mode="trade",
    )
    config.update(overrides)
    return ContinuousTradingEnv(*small_frames(), EnvConfig.from_mapping(config))


def test_scripted_buy_hold_partial_sell_sell():
    env = scripted_env()
    _, info = env.reset()
    assert info["bar_index"] == 1 and info["equity"] == 10_000.0

    # Step 1, decided at bar 1: buy 0.8 × cash = 8000 wanted, but the cap binds.
    # Fill at open[2] = 102 plus slippage: 102 × 1.0005 = 102.051.
    # Cap: units × p <= 0.5 × (10000 − units × p × 0.001)  =>  units = 5000 / (p × 1.0005).
    fill_1 = 102.0 * 1.0005
    units_1 = 5000.0 / (fill_1 * (1 + 0.5 * 0.001))
    value_1 = units_1 * fill_1  # = 5000 / 1.0005 = 4997.50125
    fee_1 = value_1 * 0.001
    cash_1 = 10_000.0 - value_1 - fee_1
    _, reward, _, truncated, info = env.step(np.array([0.8], dtype=np.float32))
    assert info["action_type"] == "buy" and info["skipped"] is None
    assert info["fill_price"] == pytest.approx(102.051, abs=1e-12)
    assert value_1 == pytest.approx(4997.501249375312, rel=1e-12)
    assert info["trade_units"] == pytest.approx(units_1, rel=1e-12)
    assert info["trade_value"] == pytest.approx(value_1, rel=1e-12)
    assert info["fees"] == pytest.approx(fee_1, rel=1e-12)
    assert info["cash"] == pytest.approx(cash_1, rel=1e-12)
    assert info["position"] == pytest.approx(units_1, rel=1e-12)
    # The cap holds at the fill price after costs: value / (cash + value) = 0.5 exactly.
    assert value_1 / (cash_1 + value_1) == pytest.approx(0.5, rel=1e-12)
    equity_1 = cash_1 + units_1 * 103.0  # marked at close[2]
    assert info["equity"] == pytest.approx(equity_1, rel=1e-12)
    assert reward == pytest.approx(math.log(equity_1 / 10_000.0), rel=1e-12)
    assert info["bar_index"] == 2 and not truncated

    # Step 2: 0.05 is inside the hold zone; only the mark moves to close[3] = 103.5.
    _, reward, _, _, info = env.step(np.array([0.05], dtype=np.float32))
    equity_2 = cash_1 + units_1 * 103.5
    assert info["action_type"] == "hold" and info["trade_units"] == 0.0 and info["fees"] == 0.0
    assert info["cash"] == pytest.approx(cash_1, rel=1e-12)
    assert info["equity"] == pytest.approx(equity_2, rel=1e-12)
    assert reward == pytest.approx(math.log(equity_2 / equity_1), rel=1e-12)

    # Step 3: sell 0.4 of the units at open[4] = 103 less slippage: 103 × 0.9995 = 102.9485.
    fill_3 = 103.0 * 0.9995
    sold_3 = -float(np.float32(-0.4)) * units_1  # the action arrives as float32
    fee_3 = sold_3 * fill_3 * 0.001
    cash_3 = cash_1 + sold_3 * fill_3 - fee_3
    units_3 = units_1 - sold_3
    _, _, _, _, info = env.step(np.array([-0.4], dtype=np.float32))
    assert info["action_type"] == "sell"
    assert info["fill_price"] == pytest.approx(102.9485, abs=1e-12)
    assert info["trade_units"] == pytest.approx(-sold_3, rel=1e-12)
    assert info["fees"] == pytest.approx(fee_3, rel=1e-12)
    assert info["cash"] == pytest.approx(cash_3, rel=1e-12)
    assert info["position"] == pytest.approx(units_3, rel=1e-12)
    assert info["total_fees"] == pytest.approx(fee_1 + fee_3, rel=1e-12)
    assert info["equity"] == pytest.approx(cash_3 + units_3 * 104.0, rel=1e-12)

    # Step 4: sell everything at open[5] = 105 × 0.9995 = 104.9475; the episode ends at the last bar.
    fill_4 = 105.0 * 0.9995
    fee_4 = units_3 * fill_4 * 0.001
    _, _, terminated, truncated, info = env.step(np.array([-1.0], dtype=np.float32))
    assert info["position"] == 0.0
    assert info["cash"] == pytest.approx(cash_3 + units_3 * fill_4 - fee_4, rel=1e-12)
    assert info["equity"] == info["cash"]
    assert truncated and not terminated
    assert info["total_fees"] == pytest.approx(fee_1 + fee_3 + fee_4, rel=1e-12)


def test_buy_limited_by_cash_leaves_cash_non_negative():
    env = scripted_env(max_position_pct=1.0)
    env.reset()
    _, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
    fill = 102.0 * 1.0005
    units = 10_000.0 / (fill * 1.001)  # all cash, commission included
    assert info["position"] == pytest.approx(units, rel=1e-12)
    assert 0.0 <= info["cash"] < 1e-6
    assert info["fees"] == pytest.approx(units * fill * 0.001, rel=1e-12)


def test_skip_reasons():
    flat = scripted_env()
    flat.reset()
    _, _, _, _, info = flat.step(np.array([-0.7], dtype=np.float32))
    assert (info["action_type"], info["skipped"], info["trade_units"]) == ("sell", "no_position", 0.0)

    capped = scripted_env()
    capped.reset()
    capped.step(np.array([1.0], dtype=np.float32))  # fills up to the 50 % cap at 102.051
    _, _, _, _, info = capped.step(np.array([1.0], dtype=np.float32))
    # The next fill would be at 104 × 1.0005 > 102.051: the position is already above its cap there.
    assert (info["action_type"], info["skipped"], info["trade_units"]) == ("buy", "position_cap", 0.0)

    tiny = scripted_env(initial_cash=100.0)
    tiny.reset()
    _, _, _, _, info = tiny.step(np.array([0.2], dtype=np.float32))  # 0.2 × 100 = 20 < 25
    assert (info["skipped"], info["trade_units"], info["cash"]) == ("min_trade_value", 0.0, 100.0)


def test_short_open_and_cover():
    env = scripted_env(allow_short=True, commission_rate=0.0, slippage_rate=0.0)
    env.reset()
    # Open a short at open[2] = 102: |s| × cash = 6000 wanted, the cap allows 0.5 × 10000 = 5000.
    _, _, _, _, info = env.step(np.array([-0.6], dtype=np.float32))
    units = 5000.0 / 102.0
    assert info["position"] == pytest.approx(-units, rel=1e-12)
    assert info["cash"] == pytest.approx(15_000.0, rel=1e-12)
    assert info["equity"] == pytest.approx(15_000.0 - units * 103.0, rel=1e-12)  # close[2] = 103
    # Cover half at open[3] = 104.
    _, _, _, _, info = env.step(np.array([0.5], dtype=np.float32))
    assert info["action_type"] == "buy"
    assert info["position"] == pytest.approx(-units / 2, rel=1e-12)
    assert info["cash"] == pytest.approx(15_000.0 - units / 2 * 104.0, rel=1e-12)
    assert info["equity"] == pytest.approx(15_000.0 - units / 2 * 104.0 - units / 2 * 103.5, rel=1e-12)


def test_reduction_that_would_leave_dust_closes_the_position():
    portfolio = Portfolio(1_000.0, 0.0, 0.0, 0.1, 1.0, 25.0, False)
    portfolio.execute(1.0, 10.0)  # 100 units
    assert portfolio.units == pytest.approx(100.0)
    # Selling 0.8 would leave 20 units × 10 = 200: a normal partial sell.
    portfolio.execute(-0.8, 10.0)
    assert portfolio.units == pytest.approx(20.0)
    # Selling 0.9 of 20 units would leave 2 × 10 = 20 < 25: the whole position goes.
    action_type, units, fill, fee, skipped = portfolio.execute(-0.9, 10.0)
    assert (action_type, units, skipped, portfolio.units) == ("sell", pytest.approx(-20.0), None, 0.0)
    assert portfolio.entry_price == 0.0 and portfolio.cash == pytest.approx(1_000.0)


def test_entry_price_is_the_average_fill_and_drives_unrealized_pnl():
    portfolio = Portfolio(10_000.0, 0.0, 0.0, 0.1, 1.0, 25.0, False)
    portfolio.execute(0.2, 100.0)  # 2000 / 100 = 20 units
    portfolio.execute(0.25, 80.0)  # 0.25 × 8000 = 2000 / 80 = 25 units
    assert portfolio.units == pytest.approx(45.0)
    assert portfolio.entry_price == pytest.approx(4000.0 / 45.0)
    assert portfolio.unrealized_pnl(100.0) == pytest.approx(100.0 / (4000.0 / 45.0) - 1.0)
