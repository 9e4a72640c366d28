"""The served model's alerts: the ``monitoring.alerting`` rules on the served account's decisions
(``drawdown`` from its peak equity, ``daily_loss`` of the last bar, ``collapse`` of the recent raw
actions, ``safeguard_block`` of a blocked trade), sent through the channels of the ``alerting``
section stored with the model, by one background thread so that a slow channel (a webhook's
timeout) never holds a response.

**Where.** The rules, levels and cooldown are the ``alerting`` section the export pipeline packaged
(``serving_config.alerting``). The channels are resolved when the server starts: the log; the
JSON-lines file the environment variable ``TRADING_RL_ALERTS`` names (set but empty: none), else the
section's ``channels.jsonl`` under the server's working directory (the project root: the file
``forward`` and ``trading-rl dashboard`` use); the webhook ``TRADING_RL_ALERT_WEBHOOK`` names (its URL
is not stored in the model: it often holds a token).

**Bars and the cooldown.** A served alert's ``bar`` counts the distinct bars this server decided (a
retry of the latest bar keeps its number, so the cooldown suppresses the retry's alerts); its
``context.source`` is ``"served"``. The cooldown is the served model's own: in seconds it reads the
served alerts back from the JSON-lines file; in bars it starts empty with the server, whose bar count
starts again.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trading_rl.config import ConfigError
from trading_rl.monitoring import alerting
from trading_rl.monitoring.alerting import Alert, AlertingParams, Channel, Cooldown

logger = logging.getLogger(__name__)

ALERTS_FILE_ENV = "TRADING_RL_ALERTS"
ALERT_WEBHOOK_ENV = "TRADING_RL_ALERT_WEBHOOK"
SERVED_SOURCE = "served"
# How long a stopping server waits for its queued alerts.
EXIT_FLUSH_S = 10.0


def packaged_alerting(section: AlertingParams) -> dict[str, Any]:
    """``section`` as the serving config stores it: without the webhook's URL (a model's artifacts are
    readable by everyone with access to the registry; the server takes the URL from its environment)."""
    data = section.to_dict()
    data["channels"]["webhook"]["url"] = None
    return data


@dataclass(frozen=True)
class AccountTrack:
    """What the rules remember of the served account: the distinct bars decided, the peak and the
    latest equity, the latest raw actions (at most the collapse window). Immutable: a retried bar is
    judged again from the track before that bar's first decision."""

    bars: int = 0
    peak: float = 0.0
    equity: float | None = None
    actions: tuple[float, ...] = ()

    def after(self, equity: float, raw_action: float, window: int) -> AccountTrack:
        return AccountTrack(self.bars + 1, max(self.peak, equity), equity, (*self.actions, raw_action)[-window:])


def decision_alerts(
    before: AccountTrack,
    track: AccountTrack,
    blocked: Mapping[str, Any] | None,
    config: AlertingParams,
    hold_threshold: float,
    *,
    timestamp: Any,
    context: Mapping[str, Any],
) -> list[Alert]:
    """Every rule on one decision: ``track`` is the account after it, ``before`` before it, ``blocked``
    the safeguard's verdict on a blocked trade (``timestamp``, ``rule``, ``reason``, ``kind``,
    ``units``; ``None`` when none was blocked)."""
    context = {"source": SERVED_SOURCE, **context}
    bar, equity = track.bars, track.equity
    if equity is None:
        return []
    returns = [equity / before.equity - 1.0] if before.equity else []
    found = [
        *alerting.drawdown([track.peak, equity], config.drawdown, timestamp=timestamp, bar=bar, context=context),
        *alerting.daily_loss(returns, config.daily_loss, timestamp=timestamp, bar=bar, context=context),
        *alerting.collapse(
            track.actions, config.collapse, hold_threshold=hold_threshold, timestamp=timestamp, bar=bar, context=context
        ),
    ]
    if blocked is not None:
        found += alerting.safeguard_block(blocked, config.safeguard_block, bar=bar, context=context)
    return found


class AlertQueue:
    """Alerts dispatched (``alerting.dispatch``: the cooldown, then every channel, each isolated) in
    order by one daemon thread, started with the first alert; :meth:`put` returns at once."""

    def __init__(self, channels: Sequence[Channel], cooldown: Cooldown):
        self.channels = list(channels)
        self.cooldown = cooldown
        self._pending: list[list[Alert]] = []
        self._unfinished = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        with self._changed:
            self._pending.append(alerts)
            self._unfinished += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="served-alerts", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every alert put so far was dispatched; whether they were within ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: self._unfinished == 0, timeout)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending))
                alerts = self._pending.pop(0)
            try:
                alerting.dispatch(alerts, self.channels, self.cooldown)
            except Exception:  # a failure here must not end the thread: later alerts still go out
                logger.exception("served alerts: dispatch failed for %s", [alert.key for alert in alerts])
            finally:
                with self._changed:
                    self._unfinished -= 1
                    self._changed.notify_all()


def served_alert_queue(config: AlertingParams, environ: Mapping[str, str] | None = None) -> AlertQueue:
    """The channels and cooldown of the ``alerting`` section stored with the model, resolved at the
    server's start in its working directory and environment (module docstring)."""
    environ = os.environ if environ is None else environ
    channels_config = config.channels
    jsonl = environ.get(ALERTS_FILE_ENV)
    if jsonl is not None:
        channels_config = channels_config.replaced({"jsonl": jsonl or None}, "alerting.channels")
    webhook = environ.get(ALERT_WEBHOOK_ENV)
    if webhook:
        try:
            channels_config = channels_config.overlay({"webhook": {"url": webhook}}, "alerting.channels")
        except ConfigError:  # the section's message quotes the URL, which often holds a token
            raise ConfigError(
                f"environment variable {ALERT_WEBHOOK_ENV} must be an http:// or https:// URL (value not shown)"
            ) from None
    resolved = replace(config, channels=channels_config)
    channels, cooldown = alerting.configured_channels(resolved, Path.cwd(), SERVED_SOURCE)
    if config.cooldown.bars is not None:  # this server's bar count starts again: so does its cooldown
        cooldown = Cooldown(bars=config.cooldown.bars)
    queue = AlertQueue(channels, cooldown)
    atexit.register(queue.flush, EXIT_FLUSH_S)  # a stopping server still sends what it decided
    return queue
