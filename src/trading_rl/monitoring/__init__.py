"""Training-time monitoring: action-collapse statistics, gates and callback."""

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
