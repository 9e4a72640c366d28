"""Quality gates as data: each gate names a metric, a comparison and a threshold, and the report
lists value, threshold and pass/fail for every one of them.

The gate values summarise the walk-forward windows of the primary agent (all symbols, folds and
seeds pooled: medians, never the best seed) and its per-regime results on the test split. Gates
marked ``optional`` apply only when their metric exists — option usage and option duration only
for agents whose rollouts report options (an ``option`` column); others fail when their value is
missing or undefined, because "could not be measured" must not read as "passed".
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.actions import ACTION_BUCKETS
from trading_rl.evaluation.regimes import REGIMES

COMPARISONS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
PARAMS_PREFIX = "validation.gates"


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


def gate_values(
    folds: pd.DataFrame, regimes: pd.DataFrame, primary_agent: str, returns: pd.DataFrame | None = None
) -> dict[str, float | None]:
    """The numbers the gates judge, for ``primary_agent``.

    ``folds``: the walk-forward table; ``regimes``: per-regime metrics with a ``model`` column (the
    primary agent's rows count); ``returns``: walk-forward test steps, used for option gates when
    they carry an ``option`` column.
    """
    rows = folds[(folds["kind"] == "agent") & (folds["agent"] == primary_agent)]
    if rows.empty:
        raise ValueError(f"parameter 'validation.primary_agent' is {primary_agent!r}, which has no walk-forward rows")
    sharpe = pd.to_numeric(rows["sharpe"], errors="coerce")
    bucket_columns = [f"action_share_{bucket}" for bucket in ACTION_BUCKETS]
    values: dict[str, float | None] = {
        "positive_sharpe_window_share": float((sharpe.fillna(-np.inf) > 0).mean()),
        "sharpe_median": _median(sharpe),
        "max_drawdown_median": _median(-pd.to_numeric(rows["max_drawdown"], errors="coerce")),
        "win_rate_median": _median(rows["win_rate"]),
        "action_entropy_median": _median(rows["action_entropy"]),
        "max_action_share_median": _median(rows[bucket_columns].astype(float).max(axis=1)),
        "trade_rate_median": _median(rows["n_trades"].astype(float) / rows["n_steps"].astype(float)),
    }
    es_rows = folds[(folds["kind"] == "agent") & (folds["agent"] == "es")]
    if primary_agent != "es" and not es_rows.empty:
        # The seeds' "ES within 80% of SAC" on median walk-forward Sharpe, as a margin (>= 0 passes).
        from trading_rl.algorithms.es import es_vs_sac_gate

        gate = es_vs_sac_gate(
            {"sharpe": _median(pd.to_numeric(es_rows["sharpe"], errors="coerce"))}, {"sharpe": values["sharpe_median"]}
        )
        values["es_vs_sac_margin"] = None if gate["es"] is None or gate["threshold"] is None else gate["es"] - gate["threshold"]
    own = regimes[(regimes["model"] == primary_agent) & regimes["regime"].isin(REGIMES)]
    values["profitable_regimes"] = float((pd.to_numeric(own["total_return"], errors="coerce") > 0).sum())
    if returns is not None and "option" in returns:
        steps = returns[(returns["kind"] == "agent") & (returns["agent"] == primary_agent)]
        per_window = [
            option_statistics(group["option"].to_numpy())
            for _, group in steps.groupby(["symbol", "fold", "seed"])
        ]
        for key in ("option_min_usage", "option_mean_duration"):
            values[key] = _median(pd.Series([stats[key] for stats in per_window]))
    return values


def evaluate_gates(values: Mapping[str, float | None], gates: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Judge every gate; the report passes only when no gate fails (skipped gates do not count)."""
    judged: dict[str, dict[str, Any]] = {}
    for name, gate in gates.items():
        for key in ("metric", "comparison", "threshold"):
            if key not in gate:
                raise ValueError(f"parameter '{PARAMS_PREFIX}.{name}' has no '{key}'")
        if gate["comparison"] not in COMPARISONS:
            raise ValueError(
                f"parameter '{PARAMS_PREFIX}.{name}.comparison' is {gate['comparison']!r}; "
                f"expected one of {sorted(COMPARISONS)}"
            )
        metric = gate["metric"]
        value = values.get(metric)
        entry = {
            "metric": metric,
            "value": value,
            "comparison": gate["comparison"],
            "threshold": float(gate["threshold"]),
        }
        if metric not in values and gate.get("optional", False):
            entry.update(passed=None, status="skipped", reason=f"no '{metric}' for this agent")
        elif value is None or not math.isfinite(float(value)):
            entry.update(value=None, passed=False, status="fail", reason=f"'{metric}' is undefined")
        else:
            passed = bool(COMPARISONS[gate["comparison"]](float(value), float(gate["threshold"])))
            entry.update(value=float(value), passed=passed, status="pass" if passed else "fail")
        judged[name] = entry
    failed = sorted(name for name, entry in judged.items() if entry["status"] == "fail")
    return {
        "passed": not failed,
        "failed": failed,
        "n_gates": len(judged),
        "n_skipped": sum(entry["status"] == "skipped" for entry in judged.values()),
        "gates": judged,
    }


def raise_on_failure(report: Mapping[str, Any]) -> None:
    """Fail the run with the failing gates named (used when ``fail_on_gate_failure`` is set)."""
    if not report["passed"]:
        details = ", ".join(
            f"{name} ({report['gates'][name]['value']} {report['gates'][name]['comparison']} "
            f"{report['gates'][name]['threshold']} is false)"
            for name in report["failed"]
        )
        raise GateFailure(f"validation gates failed: {details}")


def flat_metrics(
    values: Mapping[str, float | None], walk_forward_summary: Mapping[str, Any], regimes: pd.DataFrame
) -> dict[str, float | None]:
    """One flat ``name -> number`` view of a validation run, which the next run compares against:
    the gate values, per symbol × agent walk-forward medians with PSR/DSR, and per model × regime
    total returns and Sharpe ratios."""
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
    for row in regimes.to_dict("records"):
        prefix = f"regime/{row['symbol']}/{row['model']}/{row['regime']}"
        for name in ("total_return", "sharpe"):
            value = row.get(name)
            metrics[f"{prefix}/{name}"] = None if value is None or pd.isna(value) else float(value)
    return metrics


def validation_report(
    values: Mapping[str, float | None],
    gates: Mapping[str, Mapping[str, Any]],
    walk_forward_summary: Mapping[str, Any],
    regimes: pd.DataFrame,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The gate report plus the flat metrics and the run's provenance (seed, commit, save version)."""
    return {
        **evaluate_gates(values, gates),
        "metrics": flat_metrics(values, walk_forward_summary, regimes),
        "run": dict(run or {}),
    }
