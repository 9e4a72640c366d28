"""Causality: features of a truncated history equal the same rows of the full history.

If any feature at row t looked at bars after t (or at the length of the series), cutting the
series after t would change it. The checker is itself tested on two deliberately leaky features.
"""

import numpy as np
import pandas as pd
import pytest

from trading_rl.features import FeatureParams, compute_features, max_lookback


def prefix_mismatches(feature_fn, prices: pd.DataFrame, cuts) -> list[tuple[int, str]]:
    """(cut, column) pairs where ``feature_fn(prices[:cut+1])`` differs from the full run's rows."""
    full = feature_fn(prices)
    mismatches = []
    for cut in cuts:
        truncated = feature_fn(prices.iloc[: cut + 1])
        reference = full.iloc[: cut + 1]
        assert list(truncated.columns) == list(reference.columns)
        assert truncated.index.equals(reference.index)
        for column in reference.columns:
            expected, actual = reference[column].to_numpy(), truncated[column].to_numpy()
            same_nan = np.array_equal(np.isnan(expected), np.isnan(actual))
            if not same_nan or not np.allclose(actual, expected, rtol=1e-9, atol=0.0, equal_nan=True):
                mismatches.append((cut, column))
    return mismatches


def _cuts(n_bars: int, low: int, count: int = 6, seed: int = 20240611) -> list[int]:
    rng = np.random.default_rng(seed)
    return sorted(int(cut) for cut in rng.choice(np.arange(low, n_bars - 1), size=count, replace=False))


def test_features_are_prefix_invariant_with_given_garch_params(sp500_prices, sp500_garch_params):
    params = FeatureParams.from_mapping({"garch": {"params": sp500_garch_params}})
    cuts = _cuts(len(sp500_prices), low=1000 + 5 * max_lookback(params))
    assert prefix_mismatches(lambda px: compute_features(px, params), sp500_prices, cuts) == []


def test_features_are_prefix_invariant_with_garch_fit_end(nasdaq_prices):
    params = FeatureParams.from_mapping({"garch": {"fit_end": "2003-12-31"}, "sma_windows": [10, 50, 200]})
    fit_rows = int((nasdaq_prices.index <= "2003-12-31").sum())
    cuts = _cuts(len(nasdaq_prices), low=fit_rows + max_lookback(params), count=4, seed=5)
    assert prefix_mismatches(lambda px: compute_features(px, params), nasdaq_prices, cuts) == []


@pytest.mark.parametrize(
    ("leak", "leaky_feature"),
    [
        (
            "centered_mean",
            lambda px: px["close"].rolling(5, center=True).mean() / px["close"] - 1.0,
        ),
        ("full_sample_z", lambda px: (px["close"] - px["close"].mean()) / px["close"].std()),
    ],
)
def test_checker_flags_a_peeking_feature(sp500_prices, sp500_garch_params, leak, leaky_feature):
    params = FeatureParams.from_mapping({"garch": {"params": sp500_garch_params}})

    def with_leak(px):
        return compute_features(px, params).assign(**{leak: leaky_feature(px)})

    cuts = _cuts(len(sp500_prices), low=1200, count=3)
    mismatches = prefix_mismatches(with_leak, sp500_prices, cuts)
    assert {column for _, column in mismatches} == {leak}
    assert {cut for cut, _ in mismatches} == set(cuts)
