"""Thin nodes around ``trading_rl.evaluation.validation.gates`` and ``comparison``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from trading_rl.evaluation.reporting.comparison import compare_reports
from trading_rl.evaluation.validation.gates import (
    ValidationParams,
    failure_message,
    gate_values,
    raise_on_failure,
    skill_values,
    validation_report,
)

logger = logging.getLogger(__name__)


def build_validation_report(
    folds: pd.DataFrame,
    returns: pd.DataFrame,
    summary: dict[str, Any],
    regimes: pd.DataFrame,
    params: ValidationParams,
    run_metadata: dict[str, Any],
) -> dict[str, Any]:
    """Every gate with value, threshold, comparison and pass/fail, plus flat metrics and provenance;
    the ``skill`` gate reads the walk-forward summary's stitched attribution."""
    values = {
        **gate_values(folds, regimes, params.primary_agent, returns),
        **skill_values(summary, params.primary_agent),
    }
    return validation_report(values, params.gates, summary, regimes, run_metadata)


def compare_with_previous(
    report: dict[str, Any], previous_report: dict[str, Any] | None, params: ValidationParams
) -> dict[str, Any]:
    """Gates that flipped and metrics that moved beyond tolerance since the previous report."""
    comparison = params.comparison
    return compare_reports(report, previous_report, comparison.tolerance, comparison.tolerances)


def enforce_gates(report: dict[str, Any], comparison: dict[str, Any], params: ValidationParams) -> None:
    """Warn, naming the failed gates, and fail the run (after both reports are saved) when
    ``fail_on_gate`` asks for it."""
    message = failure_message(report)
    if message is not None:
        logger.warning(message)
    if params.fail_on_gate:
        raise_on_failure(report)
