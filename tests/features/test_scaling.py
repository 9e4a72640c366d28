"""Scaler: train-only statistics, exact transform and clipping, column checks, JSON round trip."""

import json

import numpy as np
import pandas as pd
import pytest

from trading_rl.features import (
    FeatureParams,
    apply_scaler,
    compute_features,
    fit_scaler,
    make_splits,
    max_lookback,
    split_frame,
)


@pytest.fixture
def frame():
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {"a": rng.normal(3.0, 2.0, 400), "b": rng.standard_t(3, 400), "flat": np.full(400, 7.0)},
        index=pd.date_range("2020-01-01", periods=400, freq="D", name="timestamp"),
    )


def test_robust_scaler_uses_median_and_normal_iqr(frame):
    scaler = fit_scaler(frame, method="robust")
    for column in ("a", "b"):
        q1, median, q3 = np.percentile(frame[column], [25, 50, 75])
        assert scaler["center"][column] == pytest.approx(median, rel=1e-12)
        assert scaler["scale"][column] == pytest.approx((q3 - q1) / 1.3489795003921634, rel=1e-12)


def test_standard_scaler_and_exact_transform_with_clipping(frame):
    scaler = fit_scaler(frame, method="standard", clip=2.5)
    scaled = apply_scaler(frame, scaler)
    for column in ("a", "b"):
        expected = (frame[column] - frame[column].mean()) / frame[column].std(ddof=0)
        np.testing.assert_allclose(scaled[column], expected.clip(-2.5, 2.5), rtol=1e-12, atol=1e-12)
    assert scaled[["a", "b"]].abs().max().max() == 2.5


def test_zero_scale_column_is_centred_without_division_by_zero(frame):
    scaler = fit_scaler(frame)
    assert scaler["scale"]["flat"] == 1.0
    shifted = frame.assign(flat=np.r_[np.full(200, 7.0), np.full(200, 8.0)])
    scaled = apply_scaler(shifted, scaler)["flat"]
    assert (scaled.iloc[:200] == 0.0).all() and (scaled.iloc[200:] == 1.0).all()


def test_columns_must_match_and_are_named(frame):
    scaler = fit_scaler(frame)
    with pytest.raises(ValueError, match="missing \\['b'\\]"):
        apply_scaler(frame.drop(columns="b"), scaler)
    with pytest.raises(ValueError, match="extra \\['c'\\]"):
        apply_scaler(frame.assign(c=1.0), scaler)
    reordered = apply_scaler(frame[["flat", "b", "a"]], scaler)
    assert list(reordered.columns) == ["a", "b", "flat"]


def test_scaler_round_trips_through_json_and_keeps_nan(frame):
    scaler = fit_scaler(frame)
    restored = json.loads(json.dumps(scaler))
    with_nan = frame.copy()
    with_nan.iloc[:5, 0] = np.nan
    pd.testing.assert_frame_equal(apply_scaler(with_nan, restored), apply_scaler(with_nan, scaler))
    assert apply_scaler(with_nan, scaler)["a"].iloc[:5].isna().all()


def test_bad_scaler_arguments_are_refused(frame):
    with pytest.raises(ValueError, match="minmax"):
        fit_scaler(frame, method="minmax")
    with pytest.raises(ValueError, match="clip"):
        fit_scaler(frame, clip=0)
    with pytest.raises(ValueError, match="empty"):
        fit_scaler(frame.assign(empty=np.nan))


def test_scaler_depends_on_training_rows_only(sp500_prices, sp500_garch_params):
    features = compute_features(
        sp500_prices, FeatureParams.from_mapping({"garch": {"params": sp500_garch_params}})
    ).dropna()
    splits = make_splits(
        features.index,
        {"train_end": "2011-12-31", "validation_end": "2014-12-31", "gap_bars": max_lookback(FeatureParams())},
    )
    scaler = fit_scaler(split_frame(features, splits, "train"))

    tampered = features.copy()
    later = tampered.index > pd.Timestamp(splits["train"]["end"])
    tampered.loc[later] = tampered.loc[later] * 100.0 + 3.0
    assert fit_scaler(split_frame(tampered, splits, "train")) == scaler

    scaled_train = apply_scaler(split_frame(features, splits, "train"), scaler)
    assert scaled_train.median().abs().max() < 1e-12
    assert scaled_train.abs().max().max() <= 5.0
