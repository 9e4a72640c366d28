"""The dashboard's tables and figures: buy-and-hold from the prices, drawdown and Sharpe equal to
``evaluation.metrics`` on the same returns, the trades, the newest alert of each rule most severe
first, the decision line, and a figure per panel holding the record's series."""

import math

import numpy as np
import pandas as pd
import pytest
from helpers.dashboard_sources import decision, forward_record
from helpers.synthetic_prices import random_walk_prices

from trading_rl.evaluation.metrics.metrics import max_drawdown, sharpe_ratio
from trading_rl.monitoring.alerting import Alert, Level
from trading_rl.monitoring.dashboard import panels
from trading_rl.monitoring.dashboard.sources import Champion


@pytest.fixture
def prices():
    return random_walk_prices(120, seed=3)


@pytest.fixture
def record(prices):
    return forward_record(prices, n_bars=60)


def test_buy_and_hold_is_an_all_in_position_from_the_equity_before_the_first_bar(prices):
    close = prices["close"]
    bars = close.iloc[-30:]
    start_equity = 1_000.0
    all_in = start_equity * bars / close.iloc[-31]  # the equity of holding from the close before
    record = pd.DataFrame(
        {"timestamp": bars.index, "equity": all_in.to_numpy(), "return": all_in.pct_change().to_numpy()}
    )
    record.loc[0, "return"] = all_in.iloc[0] / start_equity - 1.0
    assert panels.buy_and_hold_equity(record, close).to_numpy() == pytest.approx(all_in.to_numpy())


def test_buy_and_hold_from_the_first_bar_when_the_prices_start_there_and_nan_where_none_is_known(prices):
    close = prices["close"].iloc[-20:]
    stamps = list(prices.index[-22:-20]) + list(prices.index[-20:])  # two bars before the first close
    record = pd.DataFrame({"timestamp": stamps, "equity": 500.0, "return": 0.0})
    line = panels.buy_and_hold_equity(record, close)
    assert np.isnan(line.iloc[:2]).all()
    # no close before the first bar: the line starts at the first bar's equity on its first close
    on_prices = panels.buy_and_hold_equity(record.iloc[2:].reset_index(drop=True), close)
    assert on_prices.to_numpy() == pytest.approx(500.0 * close.to_numpy() / close.iloc[0])
    assert panels.buy_and_hold_equity(record.iloc[:0], close).empty


def test_drawdown_and_sharpe_equal_the_evaluation_metrics_on_the_same_returns(record):
    returns = record["return"]
    numbers = panels.headline(record, 252.0)
    assert numbers["max_drawdown"] == pytest.approx(max_drawdown(returns.to_numpy()))
    assert numbers["sharpe"] == pytest.approx(sharpe_ratio(returns.to_numpy(), 252.0))
    assert numbers["total_return"] == pytest.approx(record["equity"].iloc[-1] / 100_000.0 - 1.0)
    rolling = panels.rolling_sharpe_ratio(returns, 20, 252.0)
    assert rolling.iloc[:19].isna().all()
    assert rolling.iloc[-1] == pytest.approx(sharpe_ratio(returns.iloc[-20:].to_numpy(), 252.0))
    flat = record.assign(**{"return": 0.0})
    assert math.isnan(panels.headline(flat, 252.0)["sharpe"])
    assert panels.drawdown_from_peak(pd.Series([-0.1, 0.05])).to_numpy() == pytest.approx([-0.1, -0.055])


def test_recent_trades_are_the_bars_with_a_trade_newest_first(record):
    trades = panels.recent_trades(record, 5)
    traded = record.loc[record["trade_value"] != 0]
    assert len(trades) == min(5, len(traded))
    assert list(trades["timestamp"]) == list(traded["timestamp"].iloc[::-1].iloc[:5])


def alert(rule, level, timestamp):
    return Alert(rule, level, f"{rule} at {level.label}", 1.0, 1.0, timestamp).to_dict()


def test_active_alerts_are_the_newest_of_each_rule_most_severe_first():
    alerts = [
        alert("drawdown", Level.CRITICAL, "2024-01-01T00:00:00"),
        alert("drift", Level.WARNING, "2024-01-02T00:00:00"),
        alert("drawdown", Level.INFO, "2024-01-03T00:00:00"),  # drawdown recovered to info
        alert("collapse", Level.WARNING, "2024-01-04T00:00:00"),
    ]
    active = panels.active_alerts(alerts)
    assert list(zip(active["rule"], active["level"])) == [
        ("collapse", "warning"),
        ("drift", "warning"),
        ("drawdown", "info"),
    ]
    assert list(panels.recent_alerts(alerts, 2)["rule"]) == ["collapse", "drawdown"]
    assert panels.active_alerts([]).empty and panels.recent_alerts([], 5).empty


def test_the_decision_line_says_what_was_decided_and_what_the_safeguards_said():
    line = panels.decision_summary(
        decision("2024-01-02T21:00:00", 0.0, safeguard_verdict="blocked", safeguard_rule="max_daily_loss"), 4
    )
    assert line == (
        "**Latest decision** 2024-01-02T21:00:00 · AAA · target position 0 · hold 0 units · "
        "safeguard blocked (max_daily_loss) · confidence 0.80 · model 3 · 4 decision(s) in the log"
    )
    bare = {"timestamp": "2024-01-02T21:00:00", "symbol": "AAA", "target_position": 0.5, "units": float("nan")}
    assert "no signal logged · safeguard not logged · model ?" in panels.decision_summary(bare, 1)


def test_every_figure_holds_the_record_s_series(record, prices):
    buy_and_hold = panels.buy_and_hold_equity(record, prices["close"])
    equity = panels.equity_figure(record, buy_and_hold)
    assert [trace.name for trace in equity.data] == ["agent", "buy and hold"]
    assert np.asarray(equity.data[1].y) == pytest.approx(buy_and_hold.to_numpy())
    assert np.asarray(panels.drawdown_figure(record).data[0].y).min() == pytest.approx(
        max_drawdown(record["return"].to_numpy())
    )
    assert len(panels.rolling_sharpe_figure(record, 20, 252.0).data[0].y) == len(record)
    assert np.asarray(panels.position_figure(record).data[0].y) == pytest.approx(record["position"].to_numpy())
    shares = panels.action_figure([-0.9, -0.2, 0.0, 0.05, 0.3, 0.8], 0.1, "actions").data[0]
    assert list(shares.x) == ["strong_sell", "weak_sell", "hold", "weak_buy", "strong_buy"]
    assert np.asarray(shares.y) == pytest.approx([1 / 6, 1 / 6, 2 / 6, 1 / 6, 1 / 6])


def test_the_drift_table_puts_the_largest_psi_first_and_drifted_features_in_red():
    drift = {
        "features": [
            {"feature": "a", "psi": 0.1, "drifted": False},
            {"feature": "b", "psi": None, "drifted": False},
            {"feature": "c", "psi": 0.7, "drifted": True},
        ]
    }
    table = panels.drift_table(drift)
    assert list(table["feature"]) == ["c", "a", "b"]
    assert list(panels.drift_figure(table).data[0].marker.color) == ["#d62728", "#1f77b4", "#1f77b4"]
    assert panels.drift_table({"features": []}).empty


def test_the_champion_line_and_its_gates():
    champion = Champion("m", "champion", version=4, gates={"collapse": "not collapsed"}, promoted_by="lead")
    assert panels.champion_summary(champion) == (
        "**m@champion → version 4**, model file version ?, promoted by lead at ?"
    )
    assert panels.gates_table(champion.gates).to_dict("records") == [{"gate": "collapse", "verdict": "not collapsed"}]
