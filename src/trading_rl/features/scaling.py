"""Per-column feature scaling fitted on the training rows only.

The scaler is a plain dict (JSON-serialisable) so it can be versioned in the catalog and reused on
validation, test and live rows without refitting. ``robust`` uses the median and the interquartile
range divided by 1.349 (the IQR of a standard normal), so ``clip`` means roughly the same number of
standard deviations for both methods. A column with zero spread on the training rows gets scale 1:
it is only centred, and no division by zero happens.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SCALING_METHODS = ("robust", "standard")
_NORMAL_IQR = 1.3489795003921634


def fit_scaler(train_features: pd.DataFrame, method: str = "robust", clip: float | None = 5.0) -> dict:
    """Per-column ``center`` and ``scale`` from the training rows (NaN rows ignored)."""
    if method not in SCALING_METHODS:
        raise ValueError(f"unknown scaling method {method!r}; known: {list(SCALING_METHODS)}")
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or clip <= 0):
        raise ValueError(f"clip must be a positive number or None, got {clip!r}")
    values = train_features.to_numpy(np.float64)
    empty = [column for column, count in zip(train_features.columns, np.isfinite(values).sum(axis=0)) if count == 0]
    if empty:
        raise ValueError(f"feature column(s) {empty} have no finite training values")
    values = np.where(np.isfinite(values), values, np.nan)
    if method == "robust":
        lower, center, upper = np.nanquantile(values, [0.25, 0.5, 0.75], axis=0)
        scale = (upper - lower) / _NORMAL_IQR
    else:
        center = np.nanmean(values, axis=0)
        scale = np.nanstd(values, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    columns = [str(column) for column in train_features.columns]
    return {
        "method": method,
        "clip": None if clip is None else float(clip),
        "columns": columns,
        "center": dict(zip(columns, center.astype(float).tolist())),
        "scale": dict(zip(columns, scale.astype(float).tolist())),
    }


def apply_scaler(features: pd.DataFrame, scaler: dict) -> pd.DataFrame:
    """``(x - center) / scale`` clipped to ``±clip``, in the scaler's column order; NaN kept."""
    columns = scaler["columns"]
    missing = [column for column in columns if column not in features.columns]
    extra = [column for column in features.columns if column not in columns]
    if missing or extra:
        raise ValueError(f"features do not match the scaler: missing {missing}, extra {extra}")
    center = np.array([scaler["center"][column] for column in columns])
    scale = np.array([scaler["scale"][column] for column in columns])
    scaled = (features[columns].to_numpy(np.float64) - center) / scale
    if scaler["clip"] is not None:
        scaled = np.clip(scaled, -scaler["clip"], scaler["clip"])
    return pd.DataFrame(scaled, index=features.index, columns=columns)


def scaled_value(scaler: dict, column: str, raw: float) -> float:
    """Where the raw value ``raw`` of ``column`` lands in scaled units (clipped like the data).

    Rules on scaled features need it to measure from a raw reference such as a zero return instead
    of from the training median the scaler centred on."""
    if column not in scaler["center"]:
        raise ValueError(f"scaler has no column {column!r}; columns: {scaler['columns']}")
    value = (float(raw) - scaler["center"][column]) / scaler["scale"][column]
    clip = scaler["clip"]
    return float(value if clip is None else np.clip(value, -clip, clip))
