"""Chronological splits: order, no overlap, purge gap, JSON form, errors that name the key."""

import json

import pandas as pd
import pytest

from trading_rl.features import FeatureParams, make_splits, max_lookback, split_frame

DATES = {"train_end": "2011-12-31", "validation_end": "2014-12-31"}


def _positions(index, splits, name):
    return index.get_loc(pd.Timestamp(splits[name]["start"])), index.get_loc(pd.Timestamp(splits[name]["end"]))


@pytest.mark.parametrize(
    "params",
    [
        {**DATES, "gap_bars": max_lookback(FeatureParams())},
        {"train_fraction": 0.6, "validation_fraction": 0.2, "gap_bars": 10},
        {**DATES},
    ],
)
def test_splits_are_chronological_disjoint_and_purged(sp500_prices, params):
    index = sp500_prices.index
    splits = make_splits(index, params)
    gap = params.get("gap_bars", 0)
    assert splits["gap_bars"] == gap
    train, validation, test = (_positions(index, splits, name) for name in ("train", "validation", "test"))
    assert train[0] == 0 and test[1] == len(index) - 1
    assert validation[0] - train[1] - 1 == gap
    assert test[0] - validation[1] - 1 == gap
    for name, (start, end) in zip(("train", "validation", "test"), (train, validation, test)):
        assert splits[name]["n_bars"] == end - start + 1 == len(split_frame(sp500_prices, splits, name))
    assert json.loads(json.dumps(splits)) == splits


def test_date_splits_end_on_the_last_bar_of_the_given_day(sp500_prices):
    splits = make_splits(sp500_prices.index, DATES)
    assert splits["train"]["end"] == "2011-12-30T00:00:00"  # 2011-12-31 was a Saturday
    assert splits["validation"]["start"] == "2012-01-03T00:00:00"
    assert splits["validation"]["end"] == "2014-12-31T00:00:00"
    assert splits["test"]["start"] == "2015-01-02T00:00:00"


def test_fraction_splits_follow_the_fractions(sp500_prices):
    splits = make_splits(sp500_prices.index, {"train_fraction": 0.6, "validation_fraction": 0.2})
    n = len(sp500_prices)
    assert splits["train"]["n_bars"] == round(0.6 * n)
    assert splits["validation"]["n_bars"] == round(0.8 * n) - round(0.6 * n)
    assert sum(splits[name]["n_bars"] for name in ("train", "validation", "test")) == n


def test_null_dates_give_way_to_fractions(sp500_prices):
    """conf/local switches conf/base's dates off with nulls (parameters merge softly)."""
    fractions = {"train_fraction": 0.6, "validation_fraction": 0.2}
    nulled = make_splits(sp500_prices.index, {"train_end": None, "validation_end": None, **fractions})
    assert nulled == make_splits(sp500_prices.index, fractions)


def test_date_only_bound_covers_the_whole_intraday_day():
    index = pd.date_range("2021-03-01 09:00", periods=24 * 10, freq="h", tz="UTC", name="timestamp")
    splits = make_splits(index, {"train_end": "2021-03-04", "validation_end": "2021-03-07 12:00"})
    assert pd.Timestamp(splits["train"]["end"]) == pd.Timestamp("2021-03-04 23:00", tz="UTC")
    assert pd.Timestamp(splits["validation"]["end"]) == pd.Timestamp("2021-03-07 12:00", tz="UTC")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"train_end": "2015-01-01", "validation_end": "2014-12-31"}, "train_end"),
        ({"train_end": "2011-12-31"}, "validation_end"),
        ({**DATES, "test_end": "2016-01-01"}, "test_end"),
        ({**DATES, "train_fraction": 0.5}, "train_fraction"),
        ({"train_end": "1990-01-01", "validation_end": "2014-12-31"}, "train_end"),
        ({"train_end": "2011-12-31", "validation_end": "2012-01-31", "gap_bars": 60}, "gap_bars"),
        ({"train_end": "2011-12-31", "validation_end": "2030-01-01"}, "validation_end"),
        ({"train_fraction": 0.7, "validation_fraction": 0.3}, "validation_fraction"),
        ({"train_fraction": 0.0, "validation_fraction": 0.3}, "train_fraction"),
        ({**DATES, "gap_bars": -1}, "gap_bars"),
        ({**DATES, "min_bars": 1000}, "min_bars"),
        ({"train_end": "not a date", "validation_end": "2014-12-31"}, "train_end"),
    ],
)
def test_bad_split_params_name_the_key(sp500_prices, params, named):
    with pytest.raises(ValueError, match=named):
        make_splits(sp500_prices.index, params)


def test_bad_index_and_split_name_are_refused(sp500_prices):
    with pytest.raises(ValueError, match="sorted"):
        make_splits(sp500_prices.index[::-1], DATES)
    with pytest.raises(ValueError, match="DatetimeIndex"):
        make_splits(pd.RangeIndex(100), DATES)
    with pytest.raises(ValueError, match="holdout"):
        split_frame(sp500_prices, make_splits(sp500_prices.index, DATES), "holdout")
