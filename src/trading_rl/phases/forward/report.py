"""The forward report (the record's metrics next to the baselines, the collapse gates), the drift of
the newest forward bars and of the agent's actions, and the forward tearsheet."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.metrics.baselines import evaluate_baselines
from trading_rl.evaluation.metrics.report import attributed_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.monitoring.collapse import CollapseThresholds, action_stats, collapse_report
from trading_rl.monitoring.drift import action_drift, feature_drift
from trading_rl.phases.forward.data import FORWARD_SPLIT, ForwardData, unless_deployed
from trading_rl.phases.forward.params import DriftParams, ForwardParams


def forward_report(record: pd.DataFrame, data: ForwardData, new_bars: int, seed: int) -> dict[str, Any]:
    """Metrics of the record next to the baselines on the same forward bars and costs, and the
    collapse gates on the forward actions."""
    deployment = data.deployment
    report: dict[str, Any] = {
        "status": "tracked" if len(record) else "no new bars",
        "model_version": deployment.model_version,
        "symbol": deployment.symbol,
        "deployed_data_end": deployment.data_end.isoformat(),
        "periods_per_year": data.spec.periods_per_year,
        "n_bars": len(record),
        "new_bars": new_bars,
        "first_bar": record["timestamp"].iloc[0].isoformat() if len(record) else None,
        "last_bar": record["timestamp"].iloc[-1].isoformat() if len(record) else None,
    }
    if not len(record):
        return report
    hold_threshold = data.spec.env_config().hold_threshold
    ppy = data.spec.periods_per_year
    stats = action_stats(record["action_raw"].to_numpy(), hold_threshold=hold_threshold)
    metrics, attribution = attributed_metrics(record, data.make_env, ppy, seed)
    report.update(
        agent="deployed",
        metrics=metrics,
        attribution_note=attribution.reason,
        baselines=evaluate_baselines(data.make_env, ppy, seed),
        fill_rate=float(np.count_nonzero(record["trade_value"].to_numpy()) / len(record)),
        collapse=collapse_report(stats, CollapseThresholds()),
    )
    return report


def forward_drift(model: Any, data: ForwardData, record: pd.DataFrame, drift: DriftParams) -> dict[str, Any]:
    """Feature drift of the newest forward bars against the training split, and the agent's action
    drift against its own validation-split actions."""
    if not len(record):
        return {"features": [], "drifted_features": [], "actions": None, "window": None}
    window = record if drift.window_bars is None else record.iloc[-drift.window_bars :]
    train = data.deployment.splits["train"]
    reference = data.features.loc[pd.Timestamp(train["start"]) : pd.Timestamp(train["end"])]
    current = data.features.loc[window["timestamp"].to_numpy()]
    table = feature_drift(reference, current, drift.psi_max, drift.ks_alpha, drift.bins)
    validation = run_episode(data.make_env("validation"), policy_from_sb3(model, deterministic=True))
    actions = action_drift(
        validation["action_raw"].to_numpy(),
        window["action_raw"].to_numpy(),
        data.spec.env_config().hold_threshold,
        drift.action_psi_max,
    )
    return {
        "window": {
            "first_bar": window["timestamp"].iloc[0].isoformat(),
            "last_bar": window["timestamp"].iloc[-1].isoformat(),
            "n_bars": len(window),
            "reference": f"training split {train['start']} .. {train['end']}",
        },
        "features": table.to_dict(orient="records"),
        "drifted_features": table.loc[table["drifted"], "feature"].tolist(),
        "actions": actions,
    }


@unless_deployed(
    lambda data, deployment, **_: {"status": "not checked", "reason": data.reason, "deployment": deployment}
)
def report_forward(
    record: pd.DataFrame, data: ForwardData, deployment: dict[str, Any], run_metadata: dict[str, Any], seed: int
) -> dict[str, Any]:
    """The record's metrics next to the baselines on the same bars and costs, and which registry
    version is deployed and why (or why nothing is)."""
    scored_now = int((record["scored_in"] == str(run_metadata["save_version"])).sum()) if len(record) else 0
    return {**forward_report(record, data, scored_now, seed), "deployment": deployment}


@unless_deployed(
    lambda data, **_: {"status": data.reason, "features": [], "drifted_features": [], "actions": None, "window": None}
)
def measure_forward_drift(
    deployed_model: Any, data: ForwardData, record: pd.DataFrame, params: ForwardParams
) -> dict[str, Any]:
    """Feature drift of the newest forward bars against the training split; the agent's action drift."""
    return forward_drift(deployed_model, data, record, params.drift)


@unless_deployed(lambda data, **_: TearsheetInput(f"forward: not checked: {data.reason}", 0.1, []))
def forward_tearsheet(
    record: pd.DataFrame, data: ForwardData, drift: dict[str, Any], seed: int, regime_validation: RegimeValidationParams
) -> TearsheetInput:
    """Equity since deployment against the baselines on the forward bars, and the drift table."""
    if not data.has_new_bars:
        return TearsheetInput(f"forward: not checked: no bars after {data.deployment.data_end.date()} yet", 0.1, [])
    tearsheet = env_tearsheet(
        "forward", {"deployed": record}, data.spec, FORWARD_SPLIT, data.make_env, seed, regime_validation
    )
    rows = sorted(drift["features"], key=lambda row: -(row["psi"] if row["psi"] == row["psi"] else 0.0))
    section = tearsheet.sections[0]
    section.notes.append(
        f"model {data.deployment.model_version}, deployed with bars up to {data.deployment.data_end.date()}; "
        f"drift window {drift['window']['first_bar'][:10]} .. {drift['window']['last_bar'][:10]} "
        f"({drift['window']['n_bars']} bars) against the {drift['window']['reference']}"
    )
    section.notes += [
        f"{row['feature']}: PSI {row['psi']:.3f}, KS {row['ks_statistic']:.3f} (p {row['ks_pvalue']:.3g})"
        + (" DRIFTED" if row["drifted"] else "")
        for row in rows
    ]
    actions = drift["actions"]
    section.notes.append(
        f"actions: PSI {actions['psi']:.3f} against the validation split" + (" DRIFTED" if actions["drifted"] else "")
    )
    return tearsheet
