"""Each safeguard rule blocks exactly the signals it should, and says so."""

import logging

import pandas as pd
import pytest

from trading_rl.export import PortfolioState, SafeguardConfig, Safeguards, Signal

OFF = {
    "max_trades_per_day": None,
    "max_position_pct": None,
    "daily_loss_limit": None,
    "max_drawdown": None,
    "min_confidence": None,
}


def _signal(timestamp, units=10.0, price=100.0, equity=100_000.0, raw=0.5):
    kind = "buy" if units > 0 else "sell"
    return Signal(pd.Timestamp(timestamp), kind, units, abs(units) * price, price, raw, raw, None, equity, price)


def _guard(**rules):
    return Safeguards(SafeguardConfig(**{**OFF, **rules}))


def test_all_rules_off_pass_everything():
    guard = _guard()
    signal = _signal("2020-01-02 10:00", units=1e6, equity=1.0, raw=0.0)
    assert guard.apply(signal, PortfolioState(cash=1.0)) is signal and guard.blocked == []


def test_confidence_threshold(caplog):
    guard = _guard(min_confidence=0.3)
    state = PortfolioState(cash=1e5)
    assert guard.apply(_signal("2020-01-02", raw=0.3), state).blocked_by is None
    with caplog.at_level(logging.WARNING, logger="trading_rl.export.safeguards"):
        blocked = guard.apply(_signal("2020-01-02", raw=-0.29), state)
    assert blocked.blocked_by == "min_confidence" and blocked.units == 0.0 and not blocked.trades
    assert "blocked by min_confidence" in caplog.text
    assert guard.blocked[0]["rule"] == "min_confidence"


def test_max_trades_per_day_resets_on_a_new_day():
    guard = _guard(max_trades_per_day=2)
    state = PortfolioState(cash=1e5)
    results = [guard.apply(_signal(f"2020-01-02 {hour}:00"), state).blocked_by for hour in (10, 11, 12, 13)]
    assert results == [None, None, "max_trades_per_day", "max_trades_per_day"]
    assert guard.apply(_signal("2020-01-03 10:00"), state).blocked_by is None


def test_max_position_blocks_increases_only():
    guard = _guard(max_position_pct=0.15)
    state = PortfolioState(cash=90_000.0, position=100.0, entry_price=100.0)  # 10% of 100k equity
    assert guard.apply(_signal("2020-01-02", units=50.0), state).blocked_by is None  # 15%: at the cap
    assert guard.apply(_signal("2020-01-02", units=51.0), state).blocked_by == "max_position_pct"
    big = PortfolioState(cash=50_000.0, position=500.0, entry_price=100.0)  # 50%: above the cap
    assert guard.apply(_signal("2020-01-02", units=-100.0), big).blocked_by is None  # a sell reduces


def test_daily_loss_limit_uses_the_days_first_equity():
    guard = _guard(daily_loss_limit=0.02)
    state = PortfolioState(cash=1e5)
    guard.apply(_signal("2020-01-02 09:30", equity=100_000.0), state)
    assert guard.apply(_signal("2020-01-02 12:00", equity=98_100.0), state).blocked_by is None
    assert guard.apply(_signal("2020-01-02 13:00", equity=97_990.0), state).blocked_by == "daily_loss_limit"
    long = PortfolioState(cash=0.0, position=980.0, entry_price=100.0)
    assert guard.apply(_signal("2020-01-02 14:00", units=-980.0, equity=98_000.0), long).blocked_by is None
    # A new day starts from its own first equity.
    assert guard.apply(_signal("2020-01-03 10:00", equity=97_000.0), state).blocked_by is None


def test_drawdown_limit_from_the_peak():
    guard = _guard(max_drawdown=0.10)
    state = PortfolioState(cash=1e5)
    for day, equity in (("2020-01-02", 100_000.0), ("2020-01-03", 120_000.0), ("2020-01-06", 108_100.0)):
        assert guard.apply(_signal(day, equity=equity), state).blocked_by is None
    assert guard.apply(_signal("2020-01-07", equity=107_990.0), state).blocked_by == "max_drawdown"  # >10% off 120k


def test_config_errors_name_the_key():
    with pytest.raises(
        ValueError,
        match=r"unknown parameter 'export\.safeguards\.max_trades' "
        r"\(did you mean 'export\.safeguards\.max_trades_per_day'\?\)",
    ):
        SafeguardConfig.from_mapping({"max_trades": 3})
    with pytest.raises(ValueError, match=r"'export\.safeguards\.daily_loss_limit' must be in \[0, 1\]"):
        SafeguardConfig.from_mapping({"daily_loss_limit": 2})


def test_engine_applies_safeguards_to_its_signals(export_setup, onnx_bytes):
    from trading_rl.export import SignalEngine

    spec = export_setup.spec
    guard = Safeguards(SafeguardConfig(**{**OFF, "max_trades_per_day": 0}))  # every trade is blocked
    engine = SignalEngine(
        onnx_bytes,
        export_setup.feature_params,
        export_setup.scaler,
        spec.config,
        spec.feature_columns,
        safeguards=guard,
    )
    state = PortfolioState(cash=1e5, position=100.0, entry_price=2500.0, time_in_position=3)
    signals = [engine.signal(export_setup.prices.iloc[: -k or None], state) for k in range(0, 40, 4)]
    trading = [s for s in signals if s.blocked_by is not None]
    assert trading and all(s.units == 0.0 and s.blocked_by == "max_trades_per_day" for s in trading)
    assert not any(s.trades for s in signals) and len(guard.blocked) == len(trading)
