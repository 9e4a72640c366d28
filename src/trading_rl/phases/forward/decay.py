"""Decay alerts: the forward record against what the walk-forward predicted, collapse on the forward
bars, and drift; and ``check_forward_decay``, the alerts with this rerun's MLflow metrics."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.metrics.metrics import probabilistic_sharpe_ratio
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.phases.forward.alerts import send_forward_alerts
from trading_rl.phases.forward.data import ForwardData, Inputs
from trading_rl.phases.forward.params import DecayParams, DriftParams, ForwardParams

logger = logging.getLogger(__name__)


def _finite(value: Any) -> float:
    return float(value) if value is not None and math.isfinite(float(value)) else math.nan


def _check(name: str, value: float, expected: str, ok: bool, pending: bool, meaning: str) -> dict[str, Any]:
    status = "pending" if pending else "ok" if ok else "alert"
    return {
        "check": name,
        "value": None if math.isnan(value) else value,
        "expected": expected,
        "status": status,
        "meaning": meaning,
    }


def decay_alerts(
    report: Mapping[str, Any],
    record: pd.DataFrame,
    drift: Mapping[str, Any],
    folds: pd.DataFrame,
    config: ForwardParams,
) -> dict[str, Any]:
    """The forward record against what the walk-forward predicted (its windows' range of Sharpe,
    drawdown and fill rate, PSR against its median Sharpe), collapse on the forward bars, and drift.
    Checks wait (``pending``) until the record holds ``decay.min_bars`` bars."""
    decay = config.decay
    result: dict[str, Any] = {key: report.get(key) for key in ("status", "model_version", "symbol", "n_bars")}
    if report.get("status") != "tracked":  # nothing promoted, or no bar after the deployed model's data yet
        reason = report.get("reason") or f"no bar after the deployed model's data end {report.get('deployed_data_end')}"
        return {**result, "status": "not checked", "reason": reason, "passed": None, "alerts": [], "checks": []}
    windows = reference_windows(folds, report["symbol"], decay)
    pending = report["n_bars"] < decay.min_bars
    median_sharpe = float(windows["sharpe"].astype(float).median())
    checks = [
        *walk_forward_checks(report, record, windows, decay, pending),
        collapse_check(report, pending),
        *drift_checks(drift, config.drift, pending),
    ]
    alerts = [c["check"] for c in checks if c["status"] == "alert"]
    return {
        **result,
        "walk_forward": {"agent": decay.walk_forward_agent, "windows": len(windows), "median_sharpe": median_sharpe},
        "passed": not alerts,
        "alerts": alerts,
        "checks": checks,
    }


def reference_windows(folds: pd.DataFrame, symbol: str, decay: DecayParams) -> pd.DataFrame:
    """The walk-forward windows of ``decay.walk_forward_agent`` on ``symbol``: what the forward record
    is compared with; ``ValueError`` when there is none."""
    windows = folds[
        (folds["symbol"].astype(str) == symbol)
        & (folds["kind"] == "agent")
        & (folds["agent"] == decay.walk_forward_agent)
    ]
    if windows.empty:
        raise ValueError(
            f"walk_forward_folds has no window of agent '{decay.walk_forward_agent}' on {symbol!r} "
            "(forward.decay.walk_forward_agent): run the validation pipeline for this symbol first"
        )
    return windows


def walk_forward_checks(
    report: Mapping[str, Any], record: pd.DataFrame, windows: pd.DataFrame, decay: DecayParams, pending: bool
) -> list[dict[str, Any]]:
    """``sharpe_range``, ``drawdown``, ``trade_rate`` (the forward value within the walk-forward
    windows' range) and ``psr`` (against the windows' median Sharpe)."""
    metrics = report["metrics"]
    sharpes = windows["sharpe"].astype(float)
    drawdowns = -windows["max_drawdown"].astype(float)  # depth: metrics report drawdowns as negative fractions
    fills = windows["fill_rate"].astype(float)
    sharpe, drawdown = _finite(metrics.get("sharpe")), -_finite(metrics.get("max_drawdown"))
    median_sharpe = float(sharpes.median())
    psr = _finite(psr_against(record["return"].to_numpy(), median_sharpe, float(report["periods_per_year"])))
    return [
        _check(
            "sharpe_range",
            sharpe,
            f"[{sharpes.min():.3g}, {sharpes.max():.3g}]",
            sharpes.min() <= sharpe <= sharpes.max(),
            pending,
            "forward Sharpe outside the walk-forward windows' range",
        ),
        _check(
            "drawdown",
            drawdown,
            f"<= {drawdowns.max():.3g}",
            drawdown <= drawdowns.max(),
            pending,
            "forward max drawdown deeper than any walk-forward window's",
        ),
        _check(
            "trade_rate",
            float(report["fill_rate"]),
            f"[{fills.min():.3g}, {fills.max():.3g}]",
            fills.min() <= report["fill_rate"] <= fills.max(),
            pending,
            "forward fill rate outside the walk-forward windows' range",
        ),
        _check(
            "psr",
            psr,
            f">= {decay.psr_min} (benchmark: walk-forward median Sharpe {median_sharpe:.3g})",
            psr >= decay.psr_min,
            pending,
            "the forward record makes a true Sharpe at the walk-forward median improbable",
        ),
    ]


def collapse_check(report: Mapping[str, Any], pending: bool) -> dict[str, Any]:
    """``collapse``: the forward actions pass the collapse gates."""
    return _check(
        "collapse",
        float(report["collapse"]["collapsed"]),
        "not collapsed",
        not report["collapse"]["collapsed"],
        pending,
        "the agent's forward actions fail a collapse gate (dominance, entropy, trade rate)",
    )


def drift_checks(drift: Mapping[str, Any], config: DriftParams, pending: bool) -> list[dict[str, Any]]:
    """``feature_drift`` (fewer than ``min_drifted_features`` drifted features) and ``action_drift``."""
    drifted = list(drift.get("drifted_features") or [])
    actions = drift.get("actions") or {}
    return [
        _check(
            "feature_drift",
            float(len(drifted)),
            f"< {config.min_drifted_features} drifted features",
            len(drifted) < config.min_drifted_features,
            pending,
            "new bars unlike the training split: " + (", ".join(drifted) or "none"),
        ),
        _check(
            "action_drift",
            _finite(actions.get("psi")),
            f"PSI <= {config.action_psi_max}",
            not actions.get("drifted", False),
            pending,
            "the agent's action mix moved away from its validation-split mix",
        ),
    ]


def psr_against(returns: Sequence[float], annual_sharpe: float, periods_per_year: float) -> float:
    """PSR of ``returns`` against an annualised benchmark Sharpe (converted to per-period)."""
    per_period = annual_sharpe / math.sqrt(periods_per_year)
    return probabilistic_sharpe_ratio(np.asarray(returns, dtype=np.float64), per_period)


def check_forward_decay(
    report: dict[str, Any],
    record: pd.DataFrame,
    drift: dict[str, Any],
    walk_forward_folds: pd.DataFrame,
    params: ForwardParams,
    data: Inputs | None = None,
    alerting: AlertingParams | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``forward_alerts`` and this rerun's MLflow metrics (``forward_metrics``); every alert is
    logged at WARNING (and again by the end-of-run summary). With ``alerting`` (and the deployed
    model's ``data``, for its hold threshold) the checks, the record's drawdown and last loss, its
    recent decisions and the drift also go out as alerts through the configured channels
    (``phases.forward.alerts``); ``forward_alerts`` is the same either way."""
    alerts = decay_alerts(report, record, drift, walk_forward_folds, params)
    if alerting is not None and isinstance(data, ForwardData):
        hold_threshold = data.spec.env_config().hold_threshold
        send_forward_alerts(report, record, drift, alerts, hold_threshold, alerting)
    for check in alerts["checks"]:
        if check["status"] == "alert":
            logger.warning(
                "forward alert %s on model %s: %s (value %s, expected %s)",
                check["check"],
                alerts["model_version"],
                check["meaning"],
                check["value"],
                check["expected"],
            )
    return alerts, forward_metrics(report, alerts)


def forward_metrics(report: dict[str, Any], alerts: dict[str, Any]) -> dict[str, Any]:
    """One point per rerun at the record's length: the deployed agent's Sharpe, return and drawdown
    on every forward bar so far, the bars, and the alert / pending counts (nothing when not checked)."""
    if alerts.get("passed") is None:
        return {}
    step = int(report["n_bars"])
    values = {key: report["metrics"].get(key) for key in ("sharpe", "total_return", "max_drawdown")}
    values.update(
        n_bars=report["n_bars"],
        new_bars=report["new_bars"],
        alerts=len(alerts["alerts"]),
        pending=sum(check["status"] == "pending" for check in alerts["checks"]),
    )
    return {key: {"value": value, "step": step} for key, value in values.items()}
