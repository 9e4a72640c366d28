"""The deployed agent's forward track record: bars that arrived after it was trained.

A scheduled rerun on a longer price file rebuilds the features with the model's own (frozen)
feature parameters and scaler, both read from its metadata (``deployment_metadata``), runs the
agent deterministically over every bar after its data end, and appends the bars the previous record
did not have.

**Continuity.** Each rerun replays the agent from the deployment start instead of restoring a saved
env state: the evaluation env, the features and the policy are deterministic, so the replay of the
old bars must reproduce the stored record bit for bit, which ``extend_record`` checks before
appending (a revised price, a changed feature or env code, another model: refused, naming the first
differing bar). The stitched record therefore *is* one evaluation over the same bars; no portfolio,
smoothing or position-age state has to be serialised next to the env that owns it. The replay costs
one pass over the forward bars per rerun (three years of daily bars: well under a second).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.config import Section, setting
from trading_rl.data import validate_features
from trading_rl.envs import EnvSpec, build_env_spec
from trading_rl.envs.deployment import Deployment
from trading_rl.evaluation.metrics.baselines import evaluate_baselines
from trading_rl.evaluation.metrics.metrics import probabilistic_sharpe_ratio
from trading_rl.evaluation.metrics.report import attributed_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.features import apply_scaler, compute_features
from trading_rl.monitoring.collapse import CollapseThresholds, action_stats, collapse_report
from trading_rl.monitoring.drift import action_drift, feature_drift

FORWARD_SPLIT = "forward"
# What one scored bar is: compared bit for bit between reruns (``extend_record``).
SCORED_COLUMNS = ["return", "equity", "cash", "position", "trade_value", "fees", "action_raw", "action_smoothed"]
RECORD_COLUMNS = ["timestamp", *SCORED_COLUMNS, "model_version", "scored_in"]


class ForwardRecordError(ValueError):
    """The stored forward record is unreadable, lacks its schema, or disagrees with the replay of the
    same bars; nothing is appended. The message names the record version and the way back."""


def record_way_back(previous: pd.DataFrame) -> str:
    """The commands that continue without the stored record ``previous`` (no file is edited)."""
    earlier = previous.attrs.get("earlier_versions") or []
    older = (
        f"continue an older record (versions before it: {', '.join(earlier[-3:])}) with `kedro run --pipelines "
        f"forward --load-versions previous_forward_record:{earlier[-1]}`, or "
        if earlier
        else ""
    )
    return (
        f"{older}supersede it with a record replayed from the price file as it is now: `kedro run "
        "--pipelines forward --params forward.supersede_record=true` (earlier versions stay on disk)"
    )


def _record_name(previous: pd.DataFrame) -> str:
    version = previous.attrs.get("version")
    return "the stored forward record" + (f" (dataset 'previous_forward_record', version {version})" if version else "")


def check_record(previous: pd.DataFrame) -> None:
    """Raise :class:`ForwardRecordError` naming the record version when ``previous`` lacks a column
    of ``RECORD_COLUMNS``, holds text where numbers or timestamps belong, or its file was unreadable."""
    if "unreadable" in previous.attrs:
        raise ForwardRecordError(
            f"{_record_name(previous)}: {previous.attrs['unreadable']}. Nothing was written. "
            f"Fix: {record_way_back(previous)}"
        )
    missing = [column for column in RECORD_COLUMNS if column not in previous.columns]
    not_numeric = [
        column
        for column in SCORED_COLUMNS
        if column in previous.columns and not pd.api.types.is_numeric_dtype(previous[column])
    ]
    if "timestamp" in previous.columns and not pd.api.types.is_datetime64_any_dtype(previous["timestamp"]):
        not_numeric.append("timestamp")
    problems = ([f"lacks column(s) {missing}"] if missing else []) + (
        [f"holds non-numeric column(s) {not_numeric}"] if not_numeric else []
    )
    if problems:
        raise ForwardRecordError(
            f"{_record_name(previous)} {' and '.join(problems)}: it was edited or written by something else. "
            f"Nothing was written. Fix: {record_way_back(previous)}"
        )


@dataclass(frozen=True, kw_only=True)
class DriftParams(Section):
    window_bars: int | None = setting(63, interval="[2, inf)")  # newest forward bars compared; null: all
    bins: int = setting(10, interval="[2, inf)")  # PSI bins at the training split's quantiles
    psi_max: float = setting(0.25, interval="(0, inf)")  # a feature drifted: PSI above this ...
    ks_alpha: float = setting(0.01, interval="(0, 1)")  # ... and KS p-value below this
    min_drifted_features: int = setting(1, interval="[1, inf)")  # alert from this many drifted features
    action_psi_max: float = setting(0.25, interval="(0, inf)")  # action-bucket PSI vs the validation split


@dataclass(frozen=True, kw_only=True)
class DecayParams(Section):
    min_bars: int = setting(20, interval="[2, inf)")  # forward bars before any check is judged
    psr_min: float = setting(0.05, interval="(0, 1)")  # alert when P(forward Sharpe > walk-forward median) is below
    walk_forward_agent: str = "sac_icm"  # the walk-forward agent whose windows are the reference


@dataclass(frozen=True, kw_only=True)
class ForwardParams(Section):
    """The ``forward`` parameter section."""

    drift: DriftParams = setting(DriftParams())
    decay: DecayParams = setting(DecayParams())
    # true: the previous record of the deployed model is not continued but replaced by a replay of
    # the price file as it is now (after bars it scored were corrected); its versions stay on disk
    supersede_record: bool = False


@dataclass
class ForwardData:
    """The rebuilt env spec (splits ``validation`` and, once new bars exist, ``forward``) and the
    unscaled features of every bar, for drift."""

    deployment: Deployment
    spec: EnvSpec
    features: pd.DataFrame

    @property
    def has_new_bars(self) -> bool:
        return FORWARD_SPLIT in self.spec.prices

    def make_env(self, split: str = FORWARD_SPLIT, **overrides: Any):
        return self.spec.make_env(split, **overrides)


def forward_data(deployment: Deployment, prices: pd.DataFrame, source: str) -> ForwardData:
    """Features of ``prices`` with the deployment's parameters and scaler, cut into the validation
    split and the forward split: from the deployment's last bar (the first forward decision) to the
    newest bar. ``ValueError`` naming ``source`` when the file ends before the deployment's data."""
    end = prices.index[-1]
    if end < deployment.data_end:
        raise ValueError(
            f"{source} ends at {end}, before the deployed model's last training-run bar {deployment.data_end}: "
            "a scheduled rerun needs the file the model was trained on, extended by the new bars"
        )
    if deployment.data_end not in prices.index:
        raise ValueError(f"{source} has no bar at the deployed model's last training-run bar {deployment.data_end}")
    features = validate_features(
        compute_features(prices, deployment.feature_params).dropna(how="any"), f"features of {source}"
    )
    splits: dict[str, Any] = {"validation": deployment.splits["validation"]}
    if end > deployment.data_end:
        splits[FORWARD_SPLIT] = {"start": deployment.data_end.isoformat(), "end": end.isoformat()}
    spec = build_env_spec(
        deployment.symbol,
        prices,
        apply_scaler(features, deployment.feature_scaler),
        splits,
        config=deployment.env_config,
        periods_per_year=deployment.periods_per_year,
        feature_scaler=deployment.feature_scaler,
    )
    return ForwardData(deployment, spec, features)


# ---------------------------------------------------------------- the record


def empty_record() -> pd.DataFrame:
    return pd.DataFrame(
        {column: pd.Series(dtype="datetime64[ns]" if column == "timestamp" else "float64") for column in RECORD_COLUMNS}
    ).astype({"model_version": "object", "scored_in": "object"})


def replay(model: Any, data: ForwardData) -> pd.DataFrame:
    """The agent's deterministic run over every forward bar (one row per bar after the data end)."""
    rollout = run_episode(data.make_env(), policy_from_sb3(model, deterministic=True))
    rollout["timestamp"] = pd.to_datetime(rollout["timestamp"])
    return rollout


def _first_difference(stored: pd.DataFrame, replayed: pd.DataFrame) -> str | None:
    stamps_differ = stored["timestamp"].to_numpy() != replayed["timestamp"].to_numpy()
    if stamps_differ.any():
        row = int(np.argmax(stamps_differ))
        return f"bar {row}: stored {stored['timestamp'].iloc[row]}, replayed {replayed['timestamp'].iloc[row]}"
    for column in SCORED_COLUMNS:
        old = stored[column].to_numpy(dtype=np.float64)
        new = replayed[column].to_numpy(dtype=np.float64)
        differs = ~((old == new) | (np.isnan(old) & np.isnan(new)))
        if differs.any():
            row = int(np.argmax(differs))
            stamp = stored["timestamp"].iloc[row]
            return f"{stamp} column '{column}': stored {float(old[row])!r}, replayed {float(new[row])!r}"
    return None


def extend_record(
    previous: pd.DataFrame | None,
    replayed: pd.DataFrame,
    model_version: str,
    run_version: str,
    supersede: bool = False,
) -> tuple[pd.DataFrame, int]:
    """``previous`` (same model) plus the replayed bars it lacks, each tagged ``scored_in``
    ``run_version``; returns ``(record, new bars)``. A previous record of another model, or any with
    ``supersede``, is not continued: the replay starts a new record. Raises ``ForwardRecordError``
    when ``previous`` fails :func:`check_record`, or the replay of the stored bars differs from them
    in any bit, or has fewer bars."""
    rows = replayed.reindex(columns=["timestamp", *SCORED_COLUMNS]).assign(
        model_version=model_version, scored_in=run_version
    )
    if previous is not None and not supersede:
        check_record(previous)
    if supersede or previous is None or previous.empty or (previous["model_version"] != model_version).any():
        return rows.reset_index(drop=True), len(rows)
    name, way_back = _record_name(previous), record_way_back(previous)
    stored = previous.reset_index(drop=True)
    if len(stored) > len(rows):
        raise ForwardRecordError(
            f"{name} of model {model_version} has {len(stored)} bars up to {stored['timestamp'].iloc[-1]}, the "
            f"price file gives only {len(rows)}: bars were removed from the file. Nothing was written. "
            f"Fix: restore the file, or {way_back}"
        )
    difference = _first_difference(stored, rows.iloc[: len(stored)].reset_index(drop=True))
    if difference is not None:
        raise ForwardRecordError(
            f"replaying model {model_version} does not reproduce {name} at {difference}: the record was edited, or "
            "the price file's past bars, the features or the env changed since they were scored. Nothing was "
            f"written. Fix: if the record is wrong (it scored bars that were later corrected), {way_back}; if the "
            "price file is wrong, restore its bars"
        )
    record = pd.concat([stored, rows.iloc[len(stored) :]], ignore_index=True)
    return record, len(rows) - len(stored)


# ---------------------------------------------------------------- report, drift, alerts


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
    windows = folds[
        (folds["symbol"].astype(str) == report["symbol"])
        & (folds["kind"] == "agent")
        & (folds["agent"] == decay.walk_forward_agent)
    ]
    if windows.empty:
        raise ValueError(
            f"walk_forward_folds has no window of agent '{decay.walk_forward_agent}' on {report['symbol']!r} "
            "(forward.decay.walk_forward_agent): run the validation pipeline for this symbol first"
        )
    pending = report["n_bars"] < decay.min_bars
    metrics = report["metrics"]
    sharpes = windows["sharpe"].astype(float)
    drawdowns = -windows["max_drawdown"].astype(float)  # depth: metrics report drawdowns as negative fractions
    fills = windows["fill_rate"].astype(float)
    sharpe, drawdown = _finite(metrics.get("sharpe")), -_finite(metrics.get("max_drawdown"))
    median_sharpe = float(sharpes.median())
    psr = _finite(psr_against(record["return"].to_numpy(), median_sharpe, float(report["periods_per_year"])))
    drifted = list(drift.get("drifted_features") or [])
    actions = drift.get("actions") or {}
    checks = [
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
        _check(
            "collapse",
            float(report["collapse"]["collapsed"]),
            "not collapsed",
            not report["collapse"]["collapsed"],
            pending,
            "the agent's forward actions fail a collapse gate (dominance, entropy, trade rate)",
        ),
        _check(
            "feature_drift",
            float(len(drifted)),
            f"< {config.drift.min_drifted_features} drifted features",
            len(drifted) < config.drift.min_drifted_features,
            pending,
            "new bars unlike the training split: " + (", ".join(drifted) or "none"),
        ),
        _check(
            "action_drift",
            _finite(actions.get("psi")),
            f"PSI <= {config.drift.action_psi_max}",
            not actions.get("drifted", False),
            pending,
            "the agent's action mix moved away from its validation-split mix",
        ),
    ]
    alerts = [c["check"] for c in checks if c["status"] == "alert"]
    return {
        **result,
        "walk_forward": {"agent": decay.walk_forward_agent, "windows": len(windows), "median_sharpe": median_sharpe},
        "passed": not alerts,
        "alerts": alerts,
        "checks": checks,
    }


def psr_against(returns: Sequence[float], annual_sharpe: float, periods_per_year: float) -> float:
    """PSR of ``returns`` against an annualised benchmark Sharpe (converted to per-period)."""
    per_period = annual_sharpe / math.sqrt(periods_per_year)
    return probabilistic_sharpe_ratio(np.asarray(returns, dtype=np.float64), per_period)
