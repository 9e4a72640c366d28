import numpy as np
import pandas as pd
import pytest
from scipy import stats

from trading_rl.monitoring.drift import action_drift, feature_drift, population_stability_index, psi_from_shares


def test_psi_is_zero_for_the_same_distribution_and_grows_with_the_shift():
    rng = np.random.default_rng(0)
    reference = rng.normal(0, 1, 5000)
    assert population_stability_index(reference, reference) == pytest.approx(0.0, abs=1e-12)
    small = population_stability_index(reference, rng.normal(0.1, 1, 5000))
    large = population_stability_index(reference, rng.normal(0, 4, 5000))
    assert small < 0.1 < 0.25 < large


def test_psi_by_hand_on_two_bins_and_an_empty_bin_stays_finite():
    # deciles of 0..9 put one value per bin; all current values in the top bin
    value = population_stability_index(np.arange(10.0), np.full(5, 100.0), bins=10)
    expected = psi_from_shares(np.full(10, 0.1), np.r_[np.zeros(9), 1.0])
    assert np.isfinite(value) and value == pytest.approx(expected)
    assert psi_from_shares([0.5, 0.5], [0.25, 0.75]) == pytest.approx(-0.25 * np.log(0.5) + 0.25 * np.log(1.5))


def test_feature_drift_needs_both_psi_and_ks_and_uses_scipys_ks():
    rng = np.random.default_rng(1)
    reference = pd.DataFrame({"calm": rng.normal(0, 1, 2000), "wild": rng.normal(0, 1, 2000)})
    current = pd.DataFrame({"calm": rng.normal(0, 1, 60), "wild": rng.normal(0, 4, 60)})
    table = feature_drift(reference, current, psi_max=0.25, ks_alpha=0.01).set_index("feature")
    assert table.loc["wild", "drifted"] and not table.loc["calm", "drifted"]
    assert table.loc["wild", "ks_pvalue"] == pytest.approx(stats.ks_2samp(reference["wild"], current["wild"]).pvalue)
    strict_psi = feature_drift(reference, current, psi_max=1e9, ks_alpha=0.01)
    assert not strict_psi["drifted"].any()


def test_feature_drift_names_a_missing_column():
    with pytest.raises(ValueError, match=r"lack feature column\(s\) \['b'\]"):
        feature_drift(pd.DataFrame({"a": [1.0], "b": [2.0]}), pd.DataFrame({"a": [1.0]}), 0.25, 0.01)


def test_action_drift_compares_bucket_shares():
    validation = np.r_[np.zeros(50), np.full(50, 0.3)]
    same = action_drift(validation, validation[::-1], hold_threshold=0.1, psi_max=0.25)
    moved = action_drift(validation, np.full(40, 0.9), hold_threshold=0.1, psi_max=0.25)
    assert same["psi"] == pytest.approx(0.0) and not same["drifted"]
    assert moved["drifted"] and moved["current_shares"]["strong_buy"] == 1.0
