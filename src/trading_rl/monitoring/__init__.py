"""Monitoring: action-collapse statistics, gates and callback; drift (``drift``); alerts (``alerting``)."""

from trading_rl.monitoring.collapse import (
    CollapseError,
    CollapseMonitorCallback,
    CollapseThresholds,
    action_stats,
    collapse_report,
    enforce,
)

__all__ = [
    "CollapseError",
    "CollapseMonitorCallback",
    "CollapseThresholds",
    "action_stats",
    "collapse_report",
    "enforce",
]
