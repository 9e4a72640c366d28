"""The quant statistics of a tearsheet, computed from the rollouts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trading_rl.evaluation.reporting.tearsheet_statistics import exposure, period_returns, trade_list, worst_drawdowns


def _rollout(returns, start="2020-01-01", **columns):
    stamps = pd.bdate_range(start, periods=len(returns))
    return pd.DataFrame({"timestamp": stamps, "return": returns, **columns})


def test_exposure_is_the_share_of_bars_holding_a_position():
    assert exposure(_rollout([0.0] * 4, position=[0.0, 1.0, 2.0, 0.0])) == 0.5
    assert math.isnan(exposure(_rollout([0.0] * 4)))  # the market line has no position


def test_monthly_and_yearly_returns_compound():
    rollout = pd.DataFrame(
        {
            "timestamp": pd.to_datetime(["2020-01-02", "2020-01-03", "2020-02-03", "2021-03-01"]),
            "return": [0.1, 0.1, -0.5, 0.2],
        }
    )
    table = period_returns(rollout)
    assert table.loc[2020, "Jan"] == pytest.approx(0.21) and table.loc[2020, "Feb"] == pytest.approx(-0.5)
    assert table.loc[2020, "year"] == pytest.approx(1.21 * 0.5 - 1) and table.loc[2021, "Mar"] == pytest.approx(0.2)
    assert np.isnan(table.loc[2020, "Mar"]) and list(table.columns)[-1] == "year"


def test_worst_drawdowns_from_peak_to_trough_to_recovery_deepest_first():
    rollout = _rollout([0.1, -0.5, 0.0, 1.0, -0.1, 0.2, -0.05])
    stamps = rollout["timestamp"]
    first, second, third = worst_drawdowns(rollout)
    assert (first.peak, first.trough, first.recovery, first.bars) == (stamps[0], stamps[1], stamps[3], 3)
    assert first.depth == pytest.approx(-0.5)
    assert (second.peak, second.trough, second.recovery) == (stamps[3], stamps[4], stamps[5])
    assert second.depth == pytest.approx(-0.1)
    assert third.recovery is None and third.depth == pytest.approx(-0.05)  # still under water at the end


def test_trade_list_has_one_row_per_fill():
    rollout = _rollout(
        [0.0] * 3,
        trade_value=[1000.0, 0.0, -400.0],
        trade_units=[10.0, 0.0, -4.0],
        fill_price=[100.0, np.nan, 100.0],
        fees=[0.3, 0.0, 0.12],
    )
    trades = trade_list(rollout)
    assert trades["side"].tolist() == ["buy", "sell"] and trades["units"].tolist() == [10.0, 4.0]
    assert trades["value"].tolist() == [1000.0, 400.0] and trades["timestamp"].tolist() == ["2020-01-01", "2020-01-03"]
    assert trade_list(_rollout([0.0])).empty
