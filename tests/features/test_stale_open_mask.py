"""co_return on stale opens: masked to 0 exactly there, causal, configurable, left out of scaler fits."""

import numpy as np
import pandas as pd
import pytest

from trading_rl.data import stale_open_mask
from trading_rl.features import (
    FeatureParams,
    compute_features,
    fit_scaler,
    make_splits,
    split_frame,
    without_masked_entries,
)

NO_GARCH = FeatureParams(garch=None)
STALE = [2, 3, 40, 41, 42, 90]


@pytest.fixture
def prices(make_prices):
    frame = make_prices(120, seed=4)
    frame.iloc[STALE, frame.columns.get_loc("open")] = frame["close"].shift(1).iloc[STALE].to_numpy()
    frame["high"] = frame[["open", "high"]].max(axis=1)
    frame["low"] = frame[["open", "low"]].min(axis=1)
    return frame


def test_co_return_is_zero_exactly_on_stale_bars(prices):
    assert np.flatnonzero(stale_open_mask(prices["open"], prices["close"])).tolist() == STALE
    co_return = compute_features(prices, NO_GARCH)["co_return"].to_numpy()
    expected = (prices["close"] / prices["open"] - 1.0).to_numpy()
    expected[STALE] = 0.0
    expected[0] = np.nan  # bar 0 has no previous close to judge its open by: look-back 1
    np.testing.assert_array_equal(co_return, expected)
    assert (expected[[1, 4, 39, 43, 89, 91]] != 0).all()


def test_unmasked_co_return_is_close_over_open_everywhere(prices):
    co_return = compute_features(prices, FeatureParams.from_mapping({"garch": None, "stale_opens": {"mask": False}}))[
        "co_return"
    ]
    np.testing.assert_array_equal(co_return.to_numpy(), (prices["close"] / prices["open"] - 1.0).to_numpy())


def test_mask_is_causal(prices):
    """Row t depends on bars <= t only: altering every later bar, or cutting them off, keeps it."""
    full = compute_features(prices, NO_GARCH)["co_return"]
    for t in (3, 40, 89):
        altered = prices.copy()
        altered.iloc[t + 1 :, :4] *= 1.3
        altered.iloc[t + 1, altered.columns.get_loc("open")] = altered["close"].iloc[t]  # stale after t
        np.testing.assert_array_equal(
            compute_features(altered, NO_GARCH)["co_return"].iloc[: t + 1], full.iloc[: t + 1]
        )
        np.testing.assert_array_equal(compute_features(prices.iloc[: t + 1], NO_GARCH)["co_return"], full.iloc[: t + 1])


def test_tolerance_follows_rtol(prices):
    nudged = prices.copy()
    nudged.iloc[70, nudged.columns.get_loc("open")] = nudged["close"].iloc[69] * (1 + 1e-6)
    nudged["high"] = nudged[["open", "high"]].max(axis=1)
    assert compute_features(nudged, NO_GARCH)["co_return"].iloc[70] != 0.0
    loose = compute_features(nudged, FeatureParams.from_mapping({"garch": None, "stale_opens": {"rtol": 1e-5}}))[
        "co_return"
    ]
    assert loose.iloc[70] == 0.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"stale_opens": {"maks": True}}, "stale_opens.maks"),
        ({"stale_opens": {"mask": "yes"}}, "stale_opens.mask"),
        ({"stale_opens": {"rtol": -1.0}}, "stale_opens.rtol"),
        ({"stale_opens": True}, "stale_opens"),
    ],
)
def test_bad_stale_open_params_name_the_key(prices, params, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        FeatureParams.from_mapping({"garch": None, **params}, "feature_extraction.features")


def test_masked_entries_are_left_out_of_the_scaler_fit(prices):
    features = compute_features(prices, NO_GARCH).dropna()
    unmasked = without_masked_entries(features, prices, NO_GARCH)
    stale = [prices.index[bar] for bar in STALE if prices.index[bar] in features.index]
    assert unmasked.loc[stale, "co_return"].isna().all()
    pd.testing.assert_frame_equal(unmasked.drop(index=stale), features.drop(index=stale))
    pd.testing.assert_frame_equal(unmasked.drop(columns="co_return"), features.drop(columns="co_return"))
    no_mask = FeatureParams.from_mapping({"garch": None, "stale_opens": {"mask": False}})
    assert without_masked_entries(features, prices, no_mask) is features


def test_all_masked_training_rows_keep_their_zeros(sp500_prices):
    """A window with no real open (sp500's 131-bar 2004 run) still fits: centre 0, unit scale."""
    window = sp500_prices.loc["2004-01-01":"2004-12-31"]
    features = compute_features(window, NO_GARCH).loc["2004-05-01":"2004-10-25"]
    assert (features["co_return"] == 0.0).all()
    kept = without_masked_entries(features, window, NO_GARCH)
    assert kept is features
    scaler = fit_scaler(kept)
    assert (scaler["center"]["co_return"], scaler["scale"]["co_return"]) == (0.0, 1.0)


def test_sp500_co_return_scale_survives_its_majority_of_stale_training_bars(sp500_prices):
    """Stale zeros on 55% of the training bars would make the robust IQR (almost) vanish."""
    features = compute_features(sp500_prices, NO_GARCH).dropna()
    splits = make_splits(features.index, {"train_end": "2012-12-31", "validation_end": "2015-12-31"})
    train = split_frame(features, splits, "train")
    collapsed = fit_scaler(train)["scale"]["co_return"]
    scale = fit_scaler(without_masked_entries(train, sp500_prices, NO_GARCH))["scale"]["co_return"]
    assert collapsed < 1e-4 < 1e-3 < scale
