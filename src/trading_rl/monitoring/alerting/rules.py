"""The rules: pure functions of what the agent did (equity, returns, its recent decisions, a drift
report, the forward decay checks, a safeguard's verdict) to zero or more :class:`Alert`\\ s.

A threshold rule returns at most one alert per call, at the highest level whose threshold is reached
(``LevelThresholds.level_of``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trading_rl.monitoring.alerting.alert import Alert, Level, finite_or_none, iso_timestamp
from trading_rl.monitoring.alerting.params import (
    CollapseAlertParams,
    DailyLossThresholds,
    DecayAlertParams,
    DrawdownThresholds,
    DriftAlertParams,
    SafeguardAlertParams,
)
from trading_rl.monitoring.collapse import action_stats


def _alert(
    rule: str,
    reached: tuple[Level, float],
    value: float,
    message: str,
    timestamp: Any,
    bar: int | None,
    context: Mapping[str, Any] | None,
    extra: Mapping[str, Any] | None = None,
) -> Alert:
    level, threshold = reached
    return Alert(
        rule=rule,
        level=level,
        message=message,
        value=float(value),
        threshold=threshold,
        timestamp=iso_timestamp(timestamp),
        context={**(context or {}), **(extra or {})},
        bar=bar,
    )


def peak_to_trough(equity: Sequence[float]) -> float:
    """The deepest fall of ``equity`` from a running peak to a later value, as a fraction of that
    peak (0 for a series that never falls; non-finite and non-positive values are skipped)."""
    values = np.asarray(equity, dtype=np.float64).reshape(-1)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return 0.0
    peaks = np.maximum.accumulate(values)
    return float(np.max(1.0 - values / peaks))


def drawdown(
    equity: Sequence[float],
    thresholds: DrawdownThresholds,
    *,
    timestamp: Any,
    bar: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """``drawdown``: the peak-to-trough depth of ``equity`` at or above a level's threshold."""
    depth = peak_to_trough(equity)
    reached = thresholds.level_of(depth)
    if reached is None:
        return []
    return [
        _alert(
            "drawdown",
            reached,
            depth,
            f"peak-to-trough drawdown {depth:.2%} reached the {reached[0].label} threshold {reached[1]:.2%}",
            timestamp,
            bar,
            context,
        )
    ]


def daily_loss(
    returns: Sequence[float],
    thresholds: DailyLossThresholds,
    *,
    timestamp: Any,
    bar: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """``daily_loss``: the last bar's loss (``-return``) at or above a level's threshold."""
    values = np.asarray(returns, dtype=np.float64).reshape(-1)
    if values.size == 0:
        return []
    loss = -float(values[-1])
    reached = thresholds.level_of(loss)
    if reached is None:
        return []
    return [
        _alert(
            "daily_loss",
            reached,
            loss,
            f"last bar lost {loss:.2%} of equity, at or above the {reached[0].label} threshold {reached[1]:.2%}",
            timestamp,
            bar,
            context,
        )
    ]


def collapse(
    actions: Sequence[float],
    config: CollapseAlertParams,
    *,
    hold_threshold: float,
    timestamp: Any,
    bar: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """``collapse``: over the last ``config.window`` decisions (at least ``min_decisions`` of them),
    the largest action bucket's share at or above a dominance threshold or the bucket entropy at or
    below an entropy threshold (``monitoring.collapse.action_stats``: the buckets the collapse gates
    count). One alert, at the higher of the two levels (dominance on a tie)."""
    recent = np.asarray(actions, dtype=np.float64).reshape(-1)[-config.window :]
    if recent.size < config.min_decisions:
        return []
    stats = action_stats(recent, hold_threshold=hold_threshold)
    candidates: list[tuple[tuple[Level, float], str, float]] = []
    for statistic, thresholds in (("dominance", config.dominance), ("entropy", config.entropy)):
        found = thresholds.level_of(stats[statistic])
        if found is not None:
            candidates.append((found, statistic, stats[statistic]))
    if not candidates:
        return []
    reached, statistic, value = max(candidates, key=lambda candidate: candidate[0][0])  # dominance on a tie
    relation = ">=" if statistic == "dominance" else "<="
    return [
        _alert(
            "collapse",
            reached,
            value,
            f"action {statistic} {value:.3f} {relation} {reached[1]:.3f} over the last {recent.size} decisions "
            f"(dominance {stats['dominance']:.3f}, entropy {stats['entropy']:.3f} nats)",
            timestamp,
            bar,
            context,
            {
                "statistic": statistic,
                "decisions": int(recent.size),
                "dominance": stats["dominance"],
                "entropy": stats["entropy"],
            },
        )
    ]


def drift(
    report: Mapping[str, Any],
    config: DriftAlertParams,
    *,
    timestamp: Any,
    bar: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """``feature_drift`` (how many features the drift report marks drifted) and ``action_drift``
    (the PSI of the action-bucket shares) from a drift report (``forward_drift``: its
    ``drifted_features`` and ``actions.psi``)."""
    found = []
    drifted = list(report.get("drifted_features") or [])
    reached = config.features.level_of(float(len(drifted)))
    if reached is not None:
        found.append(
            _alert(
                "feature_drift",
                reached,
                len(drifted),
                f"{len(drifted)} drifted feature(s): {', '.join(drifted)}",
                timestamp,
                bar,
                context,
                {"drifted_features": drifted},
            )
        )
    psi = finite_or_none((report.get("actions") or {}).get("psi"))
    reached = config.action_psi.level_of(psi)
    if reached is not None and psi is not None:
        found.append(
            _alert(
                "action_drift",
                reached,
                psi,
                f"action-bucket PSI {psi:.3f} against the validation split reached the {reached[0].label} "
                f"threshold {reached[1]:.3f}",
                timestamp,
                bar,
                context,
            )
        )
    return found


def decay(
    checks: Mapping[str, Any],
    config: DecayAlertParams,
    *,
    timestamp: Any,
    bar: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """``decay``: one alert naming every failing check of the forward decay checks (``forward_alerts``:
    its ``checks`` whose ``status`` is ``"alert"``; pending checks never alert), at ``config.level``,
    or critical when one of ``config.critical_checks`` fails. ``value``: how many checks fail."""
    failing = [check for check in checks.get("checks") or [] if check.get("status") == "alert"]
    if not failing:
        return []
    names = [str(check["check"]) for check in failing]
    critical = [name for name in names if name in config.critical_checks]
    level = Level.CRITICAL if critical else Level.of(config.level)
    details = "; ".join(
        f"{check['check']} {check.get('value')} (expected {check.get('expected')})" for check in failing
    )
    return [
        _alert(
            "decay",
            (level, 1.0),
            len(failing),
            f"forward decay check(s) failed: {details}",
            timestamp,
            bar,
            context,
            {"checks": names, "critical_checks": critical},
        )
    ]


def safeguard_block(
    verdict: Mapping[str, Any],
    config: SafeguardAlertParams,
    *,
    bar: int | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """``safeguard_block``: a trade a safeguard blocked (``export.safeguards.Safeguards.blocked``:
    ``timestamp``, ``rule``, ``reason``, ``kind``, ``units``); nothing for a verdict without a
    ``rule`` (the trade passed)."""
    if not verdict.get("rule"):
        return []
    level = Level.of(config.level)
    return [
        Alert(
            rule="safeguard_block",
            level=level,
            message=f"{verdict.get('kind', 'trade')} of {verdict.get('units')} units blocked by safeguard "
            f"{verdict['rule']}: {verdict.get('reason', '')}",
            value=finite_or_none(verdict.get("units")),
            threshold=None,
            timestamp=iso_timestamp(verdict.get("timestamp")),
            context={**(context or {}), "safeguard": verdict["rule"], "reason": verdict.get("reason")},
            bar=bar,
        )
    ]
