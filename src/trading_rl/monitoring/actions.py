"""Action buckets shared by evaluation metrics and collapse monitoring.

A collapsed agent shows up as one bucket taking nearly all steps; counting buckets once here keeps
the collapse callback, the evaluation report and the gate report in agreement.
"""

from __future__ import annotations

import numpy as np

ACTION_BUCKETS: tuple[str, ...] = ("strong_sell", "weak_sell", "hold", "weak_buy", "strong_buy")


def bucketize(actions, hold_threshold: float, strong_threshold: float = 0.5) -> np.ndarray:
    """Map continuous actions in [-1, 1] to bucket indices into ``ACTION_BUCKETS``.

    ``|a| <= hold_threshold`` is hold; beyond ``strong_threshold`` (exclusive) a trade is strong.
    """
    a = np.asarray(actions, dtype=np.float64).reshape(-1)
    if not 0.0 <= hold_threshold < strong_threshold <= 1.0:
        raise ValueError(f"need 0 <= hold_threshold < strong_threshold <= 1, got {hold_threshold}, {strong_threshold}")
    edges = np.array([-strong_threshold, -hold_threshold, hold_threshold, strong_threshold])
    # right=False puts -strong exactly into weak_sell and +strong into weak_buy; the hold zone is
    # closed on both sides, so fix up the +hold edge explicitly.
    idx = np.searchsorted(edges, a, side="left")
    idx = np.where(a == hold_threshold, 2, idx)
    idx = np.where(a == -strong_threshold, 1, idx)
    return idx.astype(np.int64)


def action_histogram(actions, hold_threshold: float, strong_threshold: float = 0.5) -> dict[str, float]:
    """Share of steps per bucket (sums to 1; all zeros for no actions)."""
    idx = bucketize(actions, hold_threshold, strong_threshold)
    counts = np.bincount(idx, minlength=len(ACTION_BUCKETS)).astype(np.float64)
    total = counts.sum()
    shares = counts / total if total > 0 else counts
    return dict(zip(ACTION_BUCKETS, shares.tolist()))


def histogram_entropy(shares) -> float:
    """Shannon entropy in nats of a share vector (0 for a single bucket, ln 5 ≈ 1.609 for uniform)."""
    p = np.asarray(list(shares.values()) if isinstance(shares, dict) else shares, dtype=np.float64)
    p = p[p > 0]
    # ``+ 0.0`` turns the -0.0 of a single bucket into 0.0 (reports would print "-0.0").
    return float(-(p * np.log(p)).sum()) + 0.0 if p.size else 0.0


def longest_run(labels) -> int:
    """Length of the longest run of identical consecutive labels."""
    x = np.asarray(labels)
    if x.size == 0:
        return 0
    change = np.flatnonzero(x[1:] != x[:-1]) + 1
    bounds = np.concatenate(([0], change, [x.size]))
    return int(np.diff(bounds).max())
