"""infer_periods_per_year on synthetic calendars; quality_report finds injected defects."""

import json

import numpy as np
import pandas as pd
import pytest

from trading_rl.data import infer_periods_per_year, load_prices, quality_report, validate_prices


def _session_minutes(days: pd.DatetimeIndex, freq="1min", tz=None) -> pd.DatetimeIndex:
    """Regular-session bars 09:30 .. 16:00 (exclusive) on each of ``days``."""
    bars = [pd.date_range(f"{day.date()} 09:30", f"{day.date()} 15:59", freq=freq, tz=tz) for day in days]
    return bars[0].append(bars[1:])


PERIODS = {
    "daily weekdays": (pd.bdate_range("2020-01-01", "2021-12-31"), 252),
    "daily weekdays with holidays": (pd.bdate_range("2020-01-01", "2021-12-31").delete([5, 40, 41, 200]), 252),
    "daily 24/7": (pd.date_range("2020-01-01", "2020-12-31", freq="D"), 365),
    "1-minute session": (_session_minutes(pd.bdate_range("2024-01-08", periods=10)), 390 * 252),
    "5-minute session, new york": (
        _session_minutes(pd.bdate_range("2024-03-04", periods=10), "5min", "America/New_York"),
        78 * 252,
    ),
    "hourly 24/7": (pd.date_range("2024-01-01", periods=24 * 30, freq="h", tz="UTC"), 24 * 365),
    # FX: Sunday 17:00 to Friday 17:00 New York, no Saturday bars.
    "hourly 24/5": (
        pd.date_range("2024-01-07 17:00", "2024-01-12 16:00", freq="h").append(
            pd.date_range("2024-01-14 17:00", "2024-01-19 16:00", freq="h")
        ),
        24 * 252,
    ),
    "weekly": (pd.date_range("2015-01-02", periods=200, freq="W-FRI"), 52),
    "monthly": (pd.date_range("2000-01-31", periods=120, freq="ME"), 12),
}


@pytest.mark.parametrize("index, expected", PERIODS.values(), ids=PERIODS.keys())
def test_infer_periods_per_year(index, expected):
    assert infer_periods_per_year(index) == expected


def test_infer_periods_per_year_on_real_daily_data():
    assert infer_periods_per_year(load_prices("sp500").index) == 252


def test_infer_periods_per_year_needs_two_timestamps():
    with pytest.raises(ValueError, match="at least two distinct timestamps"):
        infer_periods_per_year(pd.DatetimeIndex(["2020-01-01"]))


def _prices(index: pd.DatetimeIndex, seed=7) -> pd.DataFrame:
    returns = np.random.default_rng(seed).normal(0, 0.01, len(index))
    close = 100 * np.exp(np.cumsum(returns))
    return pd.DataFrame(
        {"open": close, "high": close * 1.01, "low": close * 0.99, "close": close, "volume": 1e6},
        index=index.rename("timestamp"),
    )


def test_clean_daily_data_reports_nothing():
    report = quality_report(_prices(pd.bdate_range("2020-01-01", periods=500)), "clean")
    assert json.loads(json.dumps(report)) == report
    assert report["n_rows"] == 500
    assert report["start"] == "2020-01-01T00:00:00"
    assert report["bar_frequency"] == "D" and report["periods_per_year"] == 252
    assert report["trades_weekends"] is False
    assert report["gaps"]["count"] == 0
    assert report["zero_volume"] == {"count": 0, "share": 0.0, "first": []}
    assert report["extreme_moves"]["count"] == 0
    assert report["repeated_closes"] == {"count": 0, "longest_run": None}


def test_injected_defects_are_found():
    days = pd.bdate_range("2020-01-01", periods=500)
    missing = days[100:110]  # two trading weeks absent
    prices = _prices(days.difference(missing))
    prices.loc[prices.index[[30, 31, 300]], "volume"] = 0.0
    jump_at = prices.index[200]
    prices.loc[jump_at:, ["open", "high", "low", "close"]] *= 1.2
    stale = prices.index[400:404]
    prices.loc[stale, ["open", "high", "low", "close"]] = prices.loc[stale[0], "close"]  # frozen feed
    validate_prices(prices, "defects")

    report = quality_report(prices, "defects")

    gaps = report["gaps"]
    assert gaps["count"] == 1
    assert gaps["largest"] == [
        {
            "from": days[99].isoformat(),
            "to": days[110].isoformat(),
            "days": float((days[110] - days[99]).days),
        }
    ]
    assert report["zero_volume"]["count"] == 3
    assert report["zero_volume"]["share"] == pytest.approx(3 / len(prices))
    assert report["zero_volume"]["first"] == [prices.index[i].isoformat() for i in (30, 31, 300)]
    moves = report["extreme_moves"]
    top = moves["largest"][0]
    assert top["timestamp"] == jump_at.isoformat()
    expected_return = np.log(prices["close"].iloc[200] / prices["close"].iloc[199])
    assert top["log_return"] == pytest.approx(expected_return)
    assert top["log_return"] == pytest.approx(np.log(1.2), abs=0.05)
    assert top["sigmas"] > 5
    assert report["repeated_closes"]["count"] == 3
    assert report["repeated_closes"]["longest_run"] == {
        "bars": 4,
        "start": stale[0].isoformat(),
        "end": stale[-1].isoformat(),
    }


def test_sigma_rule_flags_a_move_below_the_absolute_threshold():
    prices = _prices(pd.bdate_range("2020-01-01", periods=100))
    prices.loc[prices.index[60] :, ["open", "high", "low", "close"]] *= 1.06  # about 6 sigma of 1% noise
    moves = quality_report(prices, "x")["extreme_moves"]
    assert moves["count"] == 1
    assert moves["largest"][0]["timestamp"] == prices.index[60].isoformat()
    assert quality_report(prices, "x", sigma_threshold=10)["extreme_moves"]["count"] == 0


def test_intraday_nights_and_weekends_are_not_gaps_but_missing_bars_are():
    index = _session_minutes(pd.bdate_range("2024-01-08", periods=10), tz="America/New_York")
    assert quality_report(_prices(index), "es")["gaps"]["count"] == 0

    lunch = index[(index.date == index[0].date()) & (index.hour == 12)]
    report = quality_report(_prices(index.difference(lunch)), "es")
    assert report["gaps"]["count"] == 1
    assert report["gaps"]["largest"][0]["from"] == "2024-01-08T11:59:00-05:00"
    assert report["gaps"]["largest"][0]["to"] == "2024-01-08T13:00:00-05:00"
    assert report["bar_frequency"] == "min"
    assert report["periods_per_year"] == 390 * 252


def test_24_7_gaps_include_nights():
    index = pd.date_range("2024-01-01", periods=24 * 14, freq="h", tz="UTC")
    outage = index[50:55]  # 01:00-06:00 on Jan 3
    report = quality_report(_prices(index.difference(outage)), "btc")
    assert report["trades_weekends"] is True
    assert report["gaps"]["count"] == 1
    assert report["gaps"]["largest"][0]["days"] == pytest.approx(6 / 24, abs=1e-4)


def test_real_sp500_gaps_include_the_september_2001_closure():
    report = quality_report(load_prices("sp500"), "sp500")
    closures = {(gap["from"][:10], gap["to"][:10]) for gap in report["gaps"]["largest"]}
    assert ("2001-09-10", "2001-09-17") in closures  # NYSE closed after 9/11
    assert ("2012-10-26", "2012-10-31") in closures  # hurricane Sandy


def test_long_frame_and_by_symbol_are_inverse():
    from trading_rl.data import by_symbol, long_frame

    index = pd.date_range("2020-01-01", periods=3, name="timestamp")
    frames = {
        "AAA": pd.DataFrame({"close": [1.0, 2.0, 3.0]}, index=index),
        "BBB": pd.DataFrame({"close": [4.0, 5.0, 6.0]}, index=index),
    }
    long = long_frame(frames)
    assert list(long.columns) == ["close", "symbol"] and len(long) == 6
    back = by_symbol(long)
    assert list(back) == ["AAA", "BBB"]
    for symbol, frame in frames.items():
        pd.testing.assert_frame_equal(back[symbol], frame, check_freq=False)
