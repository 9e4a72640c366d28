"""Options' regime alignment: the mutual information equals scikit-learn's, and the shifted control
tells a labelling that follows the regime from one that only persists as long."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import mutual_info_score

from trading_rl.evaluation.metrics.alignment import mutual_information, regime_alignment


def _persistent_states(n: int, stay: float, rng: np.random.Generator) -> np.ndarray:
    switches = rng.random(n) >= stay
    return np.cumsum(switches) % 2 == 0


def test_mutual_information_equals_scikit_learn():
    rng = np.random.default_rng(0)
    for categories in (2, 3, 5):
        first = rng.integers(0, categories, 400).astype(str)
        second = (rng.random(400) < 0.3) | (first == "1")
        assert mutual_information(first, second) == pytest.approx(mutual_info_score(first, second), rel=1e-12)
    assert mutual_information(np.zeros(50), rng.random(50) < 0.5) == 0.0  # one option: no information


def test_options_that_follow_the_regime_are_aligned_and_persistent_unrelated_ones_are_not():
    rng = np.random.default_rng(1)
    regime = _persistent_states(3000, 0.99, rng)
    probability = np.clip(np.where(regime, 0.8, 0.2) + 0.1 * rng.standard_normal(3000), 0.0, 1.0)
    following = np.where(regime ^ (rng.random(3000) < 0.1), "trend", "reversal")  # right 90% of the time
    aligned = regime_alignment(following, probability, n_shifts=200)
    assert aligned.p_value < 0.01 and aligned.share > 0.3 and aligned.excess > 0.1
    unrelated = np.where(_persistent_states(3000, 0.99, rng), "trend", "reversal")  # as persistent, own timing
    control = regime_alignment(unrelated, probability, n_shifts=200)
    assert control.p_value > 0.05


def test_alignment_refuses_mismatched_or_too_short_input():
    with pytest.raises(ValueError, match="3 options but 2 regime probabilities"):
        regime_alignment(["a", "b", "a"], [0.1, 0.9])
    with pytest.raises(ValueError, match="too few"):
        regime_alignment(["a"], [0.3])
