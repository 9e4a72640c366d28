"""Stale opens (open == previous close): the mask, the quality report per split, packaged and user data."""

import numpy as np
import pandas as pd
import pytest
from helpers.synthetic_prices import ohlcv_frame

from trading_rl.data import load_prices, quality_report, stale_open_mask, validate_prices
from trading_rl.features import make_splits

N_BARS = 60
STALE = [3, 4, 5, 9, 30, 36, 37, 52]  # 30 lies in the purge gap between train and validation
NEAR_STALE = 20  # open = previous close x (1 + 1e-12): stale up to float round-off
OFF_BY_PPM = 40  # open = previous close x (1 + 1e-6): a real, if tiny, gap
SPLIT_PARAMS = {"train_fraction": 0.5, "validation_fraction": 0.25, "gap_bars": 2}  # 0-29, 32-44, 47-59


def stale_frame(n_bars: int = N_BARS, seed: int = 3) -> pd.DataFrame:
    """Daily OHLCV whose opens gap away from the previous close except on ``STALE`` and ``NEAR_STALE``."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n_bars)))
    gap = np.exp(rng.choice([-1.0, 1.0], n_bars) * rng.uniform(0.001, 0.005, n_bars))
    open_ = np.r_[100.0, close[:-1]] * gap
    for bar in STALE:
        open_[bar] = close[bar - 1]
    open_[NEAR_STALE] = close[NEAR_STALE - 1] * (1 + 1e-12)
    open_[OFF_BY_PPM] = close[OFF_BY_PPM - 1] * (1 + 1e-6)
    return ohlcv_frame(close, open_, start="2021-01-04")


def _day(prices: pd.DataFrame, bar: int) -> str:
    return prices.index[bar].isoformat()


def test_mask_flags_exactly_the_stale_bars_within_the_tolerance():
    prices = stale_frame()
    mask = stale_open_mask(prices["open"], prices["close"])
    assert np.flatnonzero(mask).tolist() == sorted([*STALE, NEAR_STALE])
    loose = stale_open_mask(prices["open"], prices["close"], rtol=1e-5)
    assert np.flatnonzero(loose).tolist() == sorted([*STALE, NEAR_STALE, OFF_BY_PPM])
    exact = stale_open_mask(prices["open"], prices["close"], rtol=0.0)
    assert np.flatnonzero(exact).tolist() == STALE
    with pytest.raises(ValueError, match="tolerance"):
        stale_open_mask(prices["open"], prices["close"], rtol=-1e-9)


def test_mask_is_causal_and_never_flags_the_first_bar():
    prices = stale_frame()
    prices.iloc[0, prices.columns.get_loc("open")] = 1.0  # nothing before it to compare with
    full = stale_open_mask(prices["open"], prices["close"])
    assert not full[0]
    for cut in (5, 20, 37):
        head = prices.iloc[: cut + 1]
        np.testing.assert_array_equal(stale_open_mask(head["open"], head["close"]), full[: cut + 1])


def test_report_counts_stale_opens_per_split_with_their_dates():
    prices = stale_frame()
    splits = make_splits(prices.index, SPLIT_PARAMS)
    assert (splits["train"]["n_bars"], splits["validation"]["n_bars"], splits["test"]["n_bars"]) == (30, 13, 13)
    report = quality_report(prices, "synthetic", splits=splits)["stale_opens"]

    assert report["rule"] == "|open - previous close| <= 1e-09 x previous close"
    assert report["n_bars"] == N_BARS
    assert report["count"] == len(STALE) + 1
    assert report["share"] == pytest.approx((len(STALE) + 1) / N_BARS)
    assert (report["first"], report["last"]) == (_day(prices, 3), _day(prices, 52))
    assert report["longest_run"] == {"bars": 3, "start": _day(prices, 3), "end": _day(prices, 5)}

    by_split = report["by_split"]
    assert set(by_split) == {"train", "validation", "test"}  # gap_bars is not a split
    train, validation, test = by_split["train"], by_split["validation"], by_split["test"]
    assert (train["n_bars"], train["count"]) == (30, 5)  # 3, 4, 5, 9, 20
    assert train["share"] == pytest.approx(5 / 30)
    assert (train["first"], train["last"]) == (_day(prices, 3), _day(prices, NEAR_STALE))
    assert train["longest_run"] == {"bars": 3, "start": _day(prices, 3), "end": _day(prices, 5)}
    assert (validation["count"], validation["first"], validation["last"]) == (2, _day(prices, 36), _day(prices, 37))
    assert validation["longest_run"] == {"bars": 2, "start": _day(prices, 36), "end": _day(prices, 37)}
    assert (test["count"], test["first"], test["last"]) == (1, _day(prices, 52), _day(prices, 52))
    assert test["longest_run"] == {"bars": 1, "start": _day(prices, 52), "end": _day(prices, 52)}


def test_report_without_stale_opens_or_splits():
    prices = stale_frame()
    prices["open"] = prices["close"] * 1.001  # every open gaps away from the previous close
    report = quality_report(prices, "clean")["stale_opens"]
    assert "by_split" not in report
    assert (report["count"], report["share"], report["first"], report["last"], report["longest_run"]) == (
        0,
        0.0,
        None,
        None,
        None,
    )
    loose = quality_report(stale_frame(), "x", stale_open_rtol=1e-5)["stale_opens"]
    assert loose["count"] == len(STALE) + 2


def test_user_csv_gets_the_same_check_through_the_loader(tmp_path):
    prices = stale_frame()
    path = tmp_path / "USER.csv"
    prices.rename(columns=str.title).to_csv(path, index_label="Date")
    loaded = validate_prices(load_prices("USER", source="file", path=path), "USER", min_rows=50)
    report = quality_report(loaded, "USER", splits=make_splits(loaded.index, SPLIT_PARAMS))["stale_opens"]
    assert report == quality_report(prices, "USER", splits=make_splits(prices.index, SPLIT_PARAMS))["stale_opens"]
    assert report["count"] == len(STALE) + 1


def test_packaged_indices_stale_shares_per_split():
    """Pins the facts docs/pipelines.md quotes: the sp500 opens are stale on most pre-2006 bars."""
    params = {"train_end": "2012-12-31", "validation_end": "2015-12-31", "gap_bars": 60}
    sp500 = load_prices("sp500")
    report = quality_report(sp500, "sp500", splits=make_splits(sp500.index, params))["stale_opens"]
    counts = {name: (split["count"], split["n_bars"]) for name, split in report["by_split"].items()}
    assert counts == {"train": (1936, 3521), "validation": (16, 696), "test": (0, 694)}
    assert report["longest_run"] == {"bars": 131, "start": "2004-04-20T00:00:00", "end": "2004-10-25T00:00:00"}
    early = stale_open_mask(sp500["open"], sp500["close"])[sp500.index <= "2005-12-31"]
    assert early.mean() > 0.95

    nasdaq = load_prices("nasdaq")
    report = quality_report(nasdaq, "nasdaq", splits=make_splits(nasdaq.index, params))["stale_opens"]
    assert report["count"] == 8
    assert report["longest_run"]["bars"] == 1
    assert [report["by_split"][name]["count"] for name in ("train", "validation", "test")] == [8, 0, 0]
