"""Does the new data still look like the data the deployed agent was trained on?

Per feature: the population stability index (PSI) and the two-sample Kolmogorov-Smirnov test
(``scipy.stats.ks_2samp``) of the recent bars against the training split; for the agent: the PSI of
its action-bucket shares (``monitoring.actions``) against its shares on the validation split.

PSI is written here (a dozen lines): bins at the reference's quantiles, so every bin holds the same
share of training bars, and a floor on empty bins so a bin the new bars never reach counts as a
large but finite shift. Evidently computes the same two statistics but pulls in a web-report stack
(~40 packages) the project has no other use for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trading_rl.monitoring.actions import ACTION_BUCKETS, action_histogram

# Share given to an empty bin: a bin never reached counts as ln(share / 1e-4) * share, not infinity.
EMPTY_BIN_SHARE = 1e-4
DRIFT_COLUMNS = ["feature", "psi", "ks_statistic", "ks_pvalue", "drifted", "n_reference", "n_current"]


def psi_from_shares(reference: np.ndarray, current: np.ndarray) -> float:
    """Sum of ``(current - reference) * ln(current / reference)`` over bins (shares, floored)."""
    reference = np.maximum(np.asarray(reference, dtype=np.float64), EMPTY_BIN_SHARE)
    current = np.maximum(np.asarray(current, dtype=np.float64), EMPTY_BIN_SHARE)
    return float(np.sum((current - reference) * np.log(current / reference)))


def population_stability_index(reference, current, bins: int = 10) -> float:
    """PSI of ``current`` against ``reference`` over ``bins`` quantile bins of the reference.

    Repeated quantiles (a feature with many equal values) merge their bins. ``nan`` when either
    sample has no finite value.
    """
    reference = np.asarray(reference, dtype=np.float64)
    current = np.asarray(current, dtype=np.float64)
    reference, current = reference[np.isfinite(reference)], current[np.isfinite(current)]
    if reference.size == 0 or current.size == 0:
        return float("nan")
    inner_edges = np.unique(np.quantile(reference, np.linspace(0.0, 1.0, bins + 1)[1:-1]))
    n_bins = inner_edges.size + 1
    reference_shares = np.bincount(np.searchsorted(inner_edges, reference, side="right"), minlength=n_bins)
    current_shares = np.bincount(np.searchsorted(inner_edges, current, side="right"), minlength=n_bins)
    return psi_from_shares(reference_shares / reference.size, current_shares / current.size)


def feature_drift(
    reference: pd.DataFrame, current: pd.DataFrame, psi_max: float, ks_alpha: float, bins: int = 10
) -> pd.DataFrame:
    """One row per feature (``DRIFT_COLUMNS``): PSI, KS statistic and p-value, and ``drifted``:
    PSI above ``psi_max`` *and* KS p-value below ``ks_alpha``. Both are asked for because on a few
    dozen bars a quantile-binned PSI is noisy and a KS test flags shifts too small to matter."""
    missing = [column for column in reference.columns if column not in current.columns]
    if missing:
        raise ValueError(f"the new bars lack feature column(s) {missing} of the training split")
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    rows = []
    for column in reference.columns:
        ref = reference[column].to_numpy(dtype=np.float64)
        cur = current[column].to_numpy(dtype=np.float64)
        ref, cur = ref[np.isfinite(ref)], cur[np.isfinite(cur)]
        psi = population_stability_index(ref, cur, bins)
        if ref.size and cur.size:
            test = stats.ks_2samp(ref, cur)
            ks_statistic, ks_pvalue = float(test.statistic), float(test.pvalue)
        else:
            ks_statistic = ks_pvalue = float("nan")
        drifted = bool(psi > psi_max and ks_pvalue < ks_alpha)
        rows.append([str(column), psi, ks_statistic, ks_pvalue, drifted, int(ref.size), int(cur.size)])
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


def action_drift(reference_actions, current_actions, hold_threshold: float, psi_max: float) -> dict:
    """Action-bucket shares of the agent on the new bars against its validation shares, their PSI
    and ``drifted`` (PSI above ``psi_max``)."""
    reference = action_histogram(reference_actions, hold_threshold=hold_threshold)
    current = action_histogram(current_actions, hold_threshold=hold_threshold)
    psi = psi_from_shares(
        np.array([reference[b] for b in ACTION_BUCKETS]), np.array([current[b] for b in ACTION_BUCKETS])
    )
    return {
        "reference_shares": reference,
        "current_shares": current,
        "psi": psi,
        "psi_max": psi_max,
        "drifted": bool(psi > psi_max),
    }
