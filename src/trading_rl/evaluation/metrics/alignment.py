"""Do an agent's options follow a hidden market regime? Mutual information against a shifted control.

Why: the options layer exists for temporal abstraction (the seeds' gate: "option switches align
with market regime changes"). On a regime family (``data.synthetic.REGIME_FAMILIES``) the oracle's
filtered regime probability says which state the market is in, as far as any causal reader can
know; the active option aligns with it when the two share information.

The control is the same option sequence circularly shifted against the regime: each shift keeps
both series' own persistence (options last several bars, regimes hundreds) and breaks only their
timing. An i.i.d. shuffle would destroy the options' persistence too and make almost any
persistent labelling look aligned with a persistent regime.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def mutual_information(first, second) -> float:
    """Mutual information (nats) of two equally long label sequences, from their contingency table."""
    first, second = np.asarray(first), np.asarray(second)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError(f"label sequences must be 1-d and equally long, got {first.shape} and {second.shape}")
    _, first_codes = np.unique(first, return_inverse=True)
    _, second_codes = np.unique(second, return_inverse=True)
    joint = np.zeros((first_codes.max() + 1, second_codes.max() + 1))
    np.add.at(joint, (first_codes, second_codes), 1.0)
    joint /= joint.sum()
    outer = joint.sum(axis=1, keepdims=True) * joint.sum(axis=0, keepdims=True)
    seen = joint > 0
    return float(np.sum(joint[seen] * np.log(joint[seen] / outer[seen])))


@dataclass(frozen=True)
class RegimeAlignment:
    """``mutual_information`` of the options and the filter's more likely regime, the shifted
    control's median and 95th percentile, the one-sided p-value of the observed value under the
    control, and ``regime_entropy`` (the most any labelling could share; ``share`` = MI / it)."""

    mutual_information: float
    null_median: float
    null_q95: float
    p_value: float
    regime_entropy: float
    n: int

    @property
    def share(self) -> float:
        return self.mutual_information / self.regime_entropy if self.regime_entropy > 0 else 0.0

    @property
    def excess(self) -> float:
        return self.mutual_information - self.null_median


def regime_alignment(
    options, regime_probability, n_shifts: int = 500, min_shift_share: float = 0.1, seed: int = 0
) -> RegimeAlignment:
    """Alignment of ``options`` (the active option per decision) with ``regime_probability`` (the
    filtered ``P(s = +1)`` at the same decisions), against ``n_shifts`` circular shifts drawn at
    least ``min_shift_share`` of the sequence away from the observed timing."""
    options, probability = np.asarray(options), np.asarray(regime_probability, dtype=np.float64)
    n = len(options)
    if len(probability) != n:
        raise ValueError(f"{n} options but {len(probability)} regime probabilities")
    if not 0.0 < min_shift_share < 0.5:
        raise ValueError(f"min_shift_share must be in (0, 0.5), got {min_shift_share}")
    smallest = max(1, int(min_shift_share * n))
    if n - 2 * smallest < 1:
        raise ValueError(f"{n} decisions are too few for shifts of at least {smallest}")
    regime = probability >= 0.5
    observed = mutual_information(options, regime)
    shifts = np.random.default_rng(seed).integers(smallest, n - smallest + 1, size=n_shifts)
    null = np.array([mutual_information(np.roll(options, int(shift)), regime) for shift in shifts])
    return RegimeAlignment(
        mutual_information=observed,
        null_median=float(np.median(null)),
        null_q95=float(np.quantile(null, 0.95)),
        p_value=float((1 + np.sum(null >= observed)) / (1 + n_shifts)),
        regime_entropy=mutual_information(regime, regime),
        n=n,
    )
