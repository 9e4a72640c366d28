"""Bootstrap confidence intervals for results pooled over runs (folds × seeds).

A median over a handful of fold × seed runs says little without its uncertainty. The percentile
bootstrap resamples the runs with replacement and reads the interval off the statistic's bootstrap
distribution: no normality assumption, which matters for Sharpe ratios of short windows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def bootstrap_ci(
    values,
    statistic: Callable[[np.ndarray], float] = np.median,
    level: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(statistic, low, high)`` with a percentile bootstrap interval at ``level``.

    NaN/inf values (undefined metrics) are dropped first; with no finite value every entry is NaN,
    with one the interval collapses onto it.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return (float("nan"),) * 3
    point = float(statistic(finite))
    rng = np.random.default_rng(seed)
    samples = finite[rng.integers(0, finite.size, size=(n_resamples, finite.size))]
    replicates = np.apply_along_axis(statistic, 1, samples)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return point, float(low), float(high)


def difference_ci(
    treatment,
    control,
    level: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Median of paired differences ``treatment - control`` with its bootstrap interval: the A/B
    comparison where both arms ran on the same fold × seed pairs."""
    treatment, control = np.asarray(treatment, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if treatment.shape != control.shape:
        raise ValueError(f"paired arms differ in shape: {treatment.shape} vs {control.shape}")
    return bootstrap_ci(treatment - control, np.median, level, n_resamples, seed)
