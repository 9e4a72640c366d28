"""The forward rerun's alerts: its drawdown, last bar's loss, collapse on the recent decisions, drift
and decay checks turned into ``monitoring.alerting`` alerts and sent through the channels of the
``alerting`` section. What ``forward_alerts`` holds is unchanged; the channels' output is new."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from trading_rl.monitoring import alerting
from trading_rl.monitoring.alerting import Alert, AlertingParams, Dispatched

# ``context.source`` of the forward alerts: the cooldown reads back these only (not the served model's).
FORWARD_SOURCE = "forward"


def forward_rule_alerts(
    report: Mapping[str, Any],
    record: pd.DataFrame,
    drift: Mapping[str, Any],
    checks: Mapping[str, Any],
    hold_threshold: float,
    config: AlertingParams,
) -> list[Alert]:
    """Every rule on the forward record (nothing unless the report is ``tracked``): ``drawdown`` of
    the record's equity, ``daily_loss`` of its last bar, ``collapse`` of its last decisions,
    ``feature_drift`` / ``action_drift`` of ``drift`` and ``decay`` of the checks in ``checks``
    (``forward_alerts``). Each alert is stamped with the record's last bar and its length."""
    if report.get("status") != "tracked" or not len(record):
        return []
    stamp = report.get("last_bar") or record["timestamp"].iloc[-1]
    bar = int(report["n_bars"])
    context = {"source": FORWARD_SOURCE, "model_version": report.get("model_version"), "symbol": report.get("symbol")}
    return [
        *alerting.drawdown(record["equity"].to_numpy(), config.drawdown, timestamp=stamp, bar=bar, context=context),
        *alerting.daily_loss(record["return"].to_numpy(), config.daily_loss, timestamp=stamp, bar=bar, context=context),
        *alerting.collapse(
            record["action_raw"].to_numpy(),
            config.collapse,
            hold_threshold=hold_threshold,
            timestamp=stamp,
            bar=bar,
            context=context,
        ),
        *alerting.drift(drift, config.drift, timestamp=stamp, bar=bar, context=context),
        *alerting.decay(checks, config.decay, timestamp=stamp, bar=bar, context=context),
    ]


def send_forward_alerts(
    report: Mapping[str, Any],
    record: pd.DataFrame,
    drift: Mapping[str, Any],
    checks: Mapping[str, Any],
    hold_threshold: float,
    config: AlertingParams,
    root: Path | None = None,
) -> Dispatched:
    """The forward alerts dispatched through the configured channels under the configured cooldown
    (its state read back from the JSON-lines file's forward alerts); a failing channel is logged,
    never raised."""
    alerts = forward_rule_alerts(report, record, drift, checks, hold_threshold, config)
    if not alerts:
        return Dispatched()
    channels, cooldown = alerting.configured_channels(config, root, source=FORWARD_SOURCE)
    return alerting.dispatch(alerts, channels, cooldown)
