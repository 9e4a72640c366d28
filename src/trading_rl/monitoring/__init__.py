"""Training-time monitoring: action-collapse statistics, gates and callback."""

from trading_rl.monitoring.collapse import (
    DEFAULT_THRESHOLDS,
    CollapseError,
    CollapseMonitorCallback,
    action_stats,
    collapse_report,
    enforce,
    merge_thresholds,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "CollapseError",
    "CollapseMonitorCallback",
    "action_stats",
    "collapse_report",
    "enforce",
    "merge_thresholds",
]
