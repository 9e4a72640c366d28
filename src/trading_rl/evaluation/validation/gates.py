"""Quality gates as data: each gate names a metric, a comparison and a threshold, and the report
lists value, threshold and pass/fail for every one of them.

The gate values summarise the walk-forward windows of the primary agent (all symbols, folds and
seeds pooled: medians, never the best seed) and its per-regime results on the same walk-forward
test steps (``regimes.walk_forward_regime_metrics``). Gates marked ``optional`` apply only when
their metric exists — option usage and option duration only for agents whose rollouts report
options (an ``option`` column); others fail when their value is missing or undefined, because
"could not be measured" must not read as "passed".

No gate passes vacuously on an agent that does not trade. Drawdown, win rate and profitable regimes
(``ACTIVITY_METRICS``) describe trading: in a window where the agent made no trade (``n_trades``
0) they are undefined, not 0, so their values are taken over the windows in which it traded only.
When it traded in fewer than ``MIN_TRADED_WINDOW_SHARE`` (half) of its windows they are undefined
altogether and their gates fail with the reason ("agent never traded in 9 of 9 windows"). A regime
counts as profitable only when, over the agent's symbols × seeds, its median return there is > 0
*and* its median number of trades there is > 0.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.config import Section, setting
from trading_rl.evaluation.metrics.metrics import window_sharpes
from trading_rl.evaluation.validation.regimes import REGIMES
from trading_rl.monitoring.actions import ACTION_BUCKETS
from trading_rl.monitoring.collapse import trading_flags

COMPARISONS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


@dataclass(frozen=True, kw_only=True)
class ValidationGateParams(Section):
    metric: str
    comparison: str = setting(choices=tuple(COMPARISONS))
    threshold: float
    optional: bool = False  # applies only when the agent reports the metric
    # false: judged and reported (``advisory_failed``) but the report passes without it
    blocking: bool = True


@dataclass(frozen=True, kw_only=True)
class ValidationComparisonParams(Section):
    tolerance: float = setting(interval="[0, inf)")  # absolute change that counts as "moved"
    tolerances: dict[str, float] = setting({})  # per-metric overrides


@dataclass(frozen=True, kw_only=True)
class ValidationParams(Section):
    """The ``validation`` section. No code defaults: conf/base is their one place."""

    RENAMED = {"fail_on_gate_failure": "fail_on_gate"}

    primary_agent: str
    gates: dict[str, ValidationGateParams]
    fail_on_gate: bool  # true: the run fails (after saving the report and the comparison)
    comparison: ValidationComparisonParams


# Gate metrics that only mean something over windows in which the agent traded (see module doc).
ACTIVITY_METRICS = ("max_drawdown_median", "win_rate_median", "profitable_regimes")
MIN_TRADED_WINDOW_SHARE = 0.5


# Of the walk-forward summary's stitched attribution, what the flat metrics (and the comparison with
# the previous run) carry.
STITCHED_FLAT_METRICS = ("alpha_annual", "alpha_ci90_low", "alpha_ci90_high", "beta", "mean_exposure")


class GateFailure(RuntimeError):
    """Raised when gates fail and the run is configured to fail on them."""


def _median(values: pd.Series) -> float | None:
    finite = pd.to_numeric(values, errors="coerce").replace([np.inf, -np.inf], np.nan).dropna()
    return float(finite.median()) + 0.0 if len(finite) else None  # + 0.0: no "-0.0" in reports


def option_statistics(options: np.ndarray) -> dict[str, float]:
    """Smallest share of steps any option was active and the mean length of an option's runs."""
    options = np.asarray(options)
    _, counts = np.unique(options, return_counts=True)
    runs = np.diff(np.concatenate(([0], np.flatnonzero(options[1:] != options[:-1]) + 1, [options.size])))
    return {"option_min_usage": float(counts.min() / options.size), "option_mean_duration": float(runs.mean())}


def profitable_regimes(regimes: pd.DataFrame, agent: str) -> float:
    """Regimes in which ``agent``'s median ``total_return`` over its symbol × seed rows is > 0 and
    its median ``n_trades`` there is > 0 (a regime it sat out in cash is not "profitable")."""
    if "n_trades" not in regimes:
        raise ValueError("regime_metrics lacks 'n_trades'; rerun the regime_validation pipeline")
    own = regimes[(regimes["model"] == agent) & regimes["regime"].isin(REGIMES)]
    count = 0
    for _, rows in own.groupby("regime"):
        total_return, trades = _median(rows["total_return"]), _median(rows["n_trades"])
        count += total_return is not None and total_return > 0 and trades is not None and trades > 0
    return float(count)


def es_vs_sac_gate(
    es_metrics: Mapping[str, Any], sac_metrics: Mapping[str, Any], ratio: float = 0.8, metric: str = "sharpe"
) -> dict[str, Any]:
    """The gate "ES within 80% of SAC" (docs/algorithms.md) on one validation metric (default the Sharpe ratio;
    ``"total_return"`` also makes sense), from two ``evaluation.metrics.metrics.compute_metrics`` dicts.

    Passes when ``es >= sac − (1 − ratio)·|sac|``: for a positive SAC value that is ``es >=
    ratio·sac``; for a negative one ES may be worse by at most ``(1 − ratio)·|sac|`` (a plain
    ``ratio·sac`` would then ask ES to be *better* than SAC). A missing or undefined value fails.
    """
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")

    def value(metrics: Mapping[str, Any]) -> float | None:
        raw = metrics.get(metric)
        return float(raw) if isinstance(raw, (int, float)) and math.isfinite(raw) else None

    es_value, sac_value = value(es_metrics), value(sac_metrics)
    threshold = None if sac_value is None else sac_value - (1.0 - ratio) * abs(sac_value)
    return {
        "gate": "es_within_ratio_of_sac",
        "metric": metric,
        "ratio": ratio,
        "es": es_value,
        "sac": sac_value,
        "threshold": threshold,
        "passed": es_value is not None and threshold is not None and es_value >= threshold,
    }


def gate_values(
    folds: pd.DataFrame, regimes: pd.DataFrame, primary_agent: str, returns: pd.DataFrame | None = None
) -> dict[str, float | None]:
    """The numbers the gates judge, for ``primary_agent``, plus ``windows`` and ``idle_windows``
    (its walk-forward windows, and those without a single trade).

    ``folds``: the walk-forward table; ``regimes``: per-regime metrics with ``model`` and
    ``n_trades`` columns (the primary agent's rows count); ``returns``: walk-forward test steps,
    used for option gates when they carry an ``option`` column.
    """
    rows = folds[(folds["kind"] == "agent") & (folds["agent"] == primary_agent)]
    if rows.empty:
        raise ValueError(f"parameter 'validation.primary_agent' is {primary_agent!r}, which has no walk-forward rows")
    sharpe = pd.Series(window_sharpes(rows["sharpe"]), index=rows.index)  # no fill: Sharpe 0
    traded = pd.to_numeric(rows["n_trades"], errors="coerce").fillna(0) > 0
    active = rows[traded]
    bucket_columns = [f"action_share_{bucket}" for bucket in ACTION_BUCKETS]
    values: dict[str, float | None] = {
        "windows": float(len(rows)),
        "idle_windows": float((~traded).sum()),
        "positive_sharpe_window_share": float((sharpe.fillna(-np.inf) > 0).mean()),
        "sharpe_median": _median(sharpe),
        "max_drawdown_median": _median(-pd.to_numeric(active["max_drawdown"], errors="coerce")),
        "win_rate_median": _median(active["win_rate"]),
        "action_entropy_median": _median(rows["action_entropy"]),
        "max_action_share_median": _median(rows[bucket_columns].astype(float).max(axis=1)),
        "trade_rate_median": _median(rows["n_trades"].astype(float) / rows["n_steps"].astype(float)),
    }
    if "trades" in rows:
        # Share of fold x seed agents that trade (fills on >= 2% of steps, no collapse gate failed).
        values["trading_window_share"] = float(trading_flags(rows["trades"]).mean())
    es_rows = folds[(folds["kind"] == "agent") & (folds["agent"] == "es")]
    if primary_agent != "es" and not es_rows.empty:
        # "ES within 80% of SAC" (docs/algorithms.md) on median walk-forward Sharpe, as a margin (>= 0 passes).
        gate = es_vs_sac_gate(
            {"sharpe": _median(pd.to_numeric(es_rows["sharpe"], errors="coerce"))}, {"sharpe": values["sharpe_median"]}
        )
        values["es_vs_sac_margin"] = (
            None if gate["es"] is None or gate["threshold"] is None else gate["es"] - gate["threshold"]
        )
    values["profitable_regimes"] = profitable_regimes(regimes, primary_agent)
    if traded.mean() < MIN_TRADED_WINDOW_SHARE:
        values.update({metric: None for metric in ACTIVITY_METRICS})
    if returns is not None and "option" in returns:
        steps = returns[(returns["kind"] == "agent") & (returns["agent"] == primary_agent)]
        per_window = [
            option_statistics(group["option"].to_numpy()) for _, group in steps.groupby(["symbol", "fold", "seed"])
        ]
        for key in ("option_min_usage", "option_mean_duration"):
            values[key] = _median(pd.Series([stats[key] for stats in per_window]))
    return values


def skill_values(walk_forward_summary: Mapping[str, Any], primary_agent: str) -> dict[str, float | None]:
    """The ``skill`` gate's numbers for ``primary_agent``: ``alpha_ci90_low_median``, the median over
    symbols and seeds' stitched walk-forward series of alpha's lower 90% bound (``folds.
    attribution_summary``), and ``skill_seed_share``, the share of those series whose bound is > 0
    (``None`` when the summary has no attribution, e.g. one written before it existed)."""
    entries = [
        symbol["agents"][primary_agent]
        for symbol in walk_forward_summary.values()
        if primary_agent in symbol["agents"] and "stitched_attribution_median" in symbol["agents"][primary_agent]
    ]
    if not entries:
        return {"alpha_ci90_low_median": None, "skill_seed_share": None}
    lows = pd.Series([entry["stitched_attribution_median"]["alpha_ci90_low"] for entry in entries], dtype=float)
    shares = pd.Series([entry["skill_seed_share"] for entry in entries], dtype=float)
    return {"alpha_ci90_low_median": _median(lows), "skill_seed_share": _median(shares)}


def evaluate_gates(values: Mapping[str, float | None], gates: Mapping[str, ValidationGateParams]) -> dict[str, Any]:
    """Judge every gate; the report passes only when no blocking gate fails (skipped gates do not
    count; a gate with ``blocking: false`` that fails is listed in ``advisory_failed``)."""
    judged: dict[str, dict[str, Any]] = {}
    for name, gate in gates.items():
        metric = gate.metric
        value = values.get(metric)
        entry = {"metric": metric, "value": value, "comparison": gate.comparison, "threshold": gate.threshold}
        if metric not in values and gate.optional:
            entry.update(passed=None, status="skipped", reason=f"no '{metric}' for this agent")
        elif value is None or not math.isfinite(float(value)):
            entry.update(value=None, passed=False, status="fail", reason=_undefined_reason(metric, values))
        else:
            passed = bool(COMPARISONS[gate.comparison](float(value), gate.threshold))
            entry.update(value=float(value), passed=passed, status="pass" if passed else "fail")
        entry["blocking"] = gate.blocking
        judged[name] = entry
    failing = [name for name, entry in judged.items() if entry["status"] == "fail"]
    failed = sorted(name for name in failing if judged[name]["blocking"])
    return {
        "passed": not failed,
        "failed": failed,
        "advisory_failed": sorted(name for name in failing if not judged[name]["blocking"]),
        "n_gates": len(judged),
        "n_skipped": sum(entry["status"] == "skipped" for entry in judged.values()),
        "gates": judged,
    }


def _undefined_reason(metric: str, values: Mapping[str, float | None]) -> str:
    idle, windows = values.get("idle_windows"), values.get("windows")
    if metric in ACTIVITY_METRICS and idle is not None and windows and idle / windows > 1 - MIN_TRADED_WINDOW_SHARE:
        return (
            f"agent never traded in {int(idle)} of {int(windows)} windows; '{metric}' needs trades in at "
            f"least {MIN_TRADED_WINDOW_SHARE:.0%} of them"
        )
    return f"'{metric}' is undefined"


def failure_message(report: Mapping[str, Any]) -> str | None:
    """``"validation gates failed: name (why), ..."``, or ``None`` when the report passed."""
    if report["passed"]:
        return None
    details = []
    for name in report["failed"]:
        gate = report["gates"][name]
        why = gate.get("reason") or f"{gate['value']} {gate['comparison']} {gate['threshold']} is false"
        details.append(f"{name} ({why})")
    return f"validation gates failed: {', '.join(details)}"


def raise_on_failure(report: Mapping[str, Any]) -> None:
    """Fail the run with the failing gates named (used when ``fail_on_gate`` is set)."""
    message = failure_message(report)
    if message is not None:
        raise GateFailure(message)


def flat_validation_metrics(
    values: Mapping[str, float | None], walk_forward_summary: Mapping[str, Any], regimes: pd.DataFrame
) -> dict[str, float | None]:
    """One flat ``name -> number`` view of a validation run, which the next run compares against:
    the gate values, per symbol × agent walk-forward medians with PSR/DSR and the stitched series'
    attribution (``STITCHED_FLAT_METRICS``), and per symbol × model × regime total returns and
    Sharpe ratios (medians over seeds)."""
    metrics: dict[str, float | None] = {f"gate/{name}": value for name, value in values.items()}
    for symbol, entry in walk_forward_summary.items():
        for agent, stats in entry["agents"].items():
            prefix = f"walk_forward/{symbol}/{agent}"
            for name, quartiles in stats["metrics"].items():
                metrics[f"{prefix}/{name}_median"] = quartiles["median"]
            metrics[f"{prefix}/positive_sharpe_share"] = stats["positive_sharpe_share"]
            metrics[f"{prefix}/psr_median"] = stats["psr_median"]
            if stats["kind"] == "agent":
                metrics[f"{prefix}/dsr_median"] = stats["dsr_median"]
            for name, value in (stats.get("stitched_attribution_median") or {}).items():
                if name in STITCHED_FLAT_METRICS:
                    metrics[f"{prefix}/stitched_{name}_median"] = value
    for (symbol, model, regime), rows in regimes.groupby(["symbol", "model", "regime"], sort=False):
        for name in ("total_return", "sharpe"):
            metrics[f"regime/{symbol}/{model}/{regime}/{name}"] = _median(rows[name])
    return metrics


def validation_report(
    values: Mapping[str, float | None],
    gates: Mapping[str, ValidationGateParams],
    walk_forward_summary: Mapping[str, Any],
    regimes: pd.DataFrame,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The gate report plus the flat metrics and the run's provenance (seed, commit, save version)."""
    return {
        **evaluate_gates(values, gates),
        "metrics": flat_validation_metrics(values, walk_forward_summary, regimes),
        "run": dict(run or {}),
    }
