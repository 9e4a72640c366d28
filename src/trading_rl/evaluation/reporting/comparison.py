"""Compare a validation report with the previous run's: which gates flipped, which metrics moved.

A scheduled re-validation is only useful if someone notices what changed; this turns two reports
into the short list a reader needs. A metric "moved" when ``|current - previous|`` exceeds its
tolerance (``tolerances[name]``, else ``tolerance``); a metric that appears, disappears or turns
undefined is listed too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def compare_reports(
    current: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    tolerance: float = 0.05,
    tolerances: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Differences between two validation reports (``gates`` and flat ``metrics`` sections)."""
    if tolerance < 0:
        raise ValueError(f"parameter 'validation.comparison.tolerance' must be >= 0, got {tolerance}")
    if previous is None:
        return {
            "has_previous": False,
            "previous_run": None,
            "passed_before": None,
            "passed_now": current["passed"],
            "gates_flipped": [],
            "metrics_moved": [],
        }
    tolerances = dict(tolerances or {})
    flipped = []
    for name in sorted(set(current["gates"]) | set(previous["gates"])):
        before = previous["gates"].get(name, {}).get("status", "absent")
        now = current["gates"].get(name, {}).get("status", "absent")
        if before != now:
            flipped.append(
                {
                    "gate": name,
                    "before": before,
                    "now": now,
                    "value_before": previous["gates"].get(name, {}).get("value"),
                    "value_now": current["gates"].get(name, {}).get("value"),
                }
            )
    moved = []
    current_metrics, previous_metrics = current.get("metrics", {}), previous.get("metrics", {})
    for name in sorted(set(current_metrics) | set(previous_metrics)):
        before, now = _number(previous_metrics.get(name)), _number(current_metrics.get(name))
        limit = float(tolerances.get(name, tolerance))
        if before is None and now is None:
            continue
        if before is None or now is None or abs(now - before) > limit:
            moved.append(
                {
                    "metric": name,
                    "before": before,
                    "now": now,
                    "change": None if before is None or now is None else now - before,
                    "tolerance": limit,
                }
            )
    return {
        "has_previous": True,
        "previous_run": previous.get("run"),
        "passed_before": previous["passed"],
        "passed_now": current["passed"],
        "gates_flipped": flipped,
        "metrics_moved": moved,
    }
