"""The cooldown per ``(rule, level)`` and the dispatch of alerts to the channels, as configured by
the ``alerting`` section."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trading_rl.monitoring.alerting.alert import Alert, moment_of
from trading_rl.monitoring.alerting.channels import (
    AlertFileError,
    Channel,
    JsonLinesChannel,
    LogChannel,
    WebhookChannel,
)
from trading_rl.monitoring.alerting.params import AlertingParams

logger = logging.getLogger(__name__)


class Cooldown:
    """Suppresses an alert while the last one of its ``(rule, level)`` is less than ``bars`` bars or
    ``seconds`` seconds behind it (at most one of the two; neither: nothing is suppressed). The last
    alert per key comes from ``history`` (the JSON-lines file's lines, oldest first) and from every
    alert :meth:`record`\\ ed since. Alerts without a bar (in bars) or without an ISO timestamp (in
    seconds) are not comparable and never suppressed."""

    def __init__(
        self,
        *,
        bars: int | None = None,
        seconds: float | None = None,
        history: Iterable[Mapping[str, Any] | Alert] = (),
    ) -> None:
        if bars is not None and seconds is not None:
            raise ValueError("a cooldown is in bars or in seconds, not both")
        self.bars = bars
        self.seconds = seconds
        self.last: dict[tuple[str, str], Alert] = {}
        for entry in history:
            self.record(entry if isinstance(entry, Alert) else Alert.from_dict(entry))

    def record(self, alert: Alert) -> None:
        self.last[alert.key] = alert

    def suppresses(self, alert: Alert) -> bool:
        last = self.last.get(alert.key)
        if last is None:
            return False
        if self.bars is not None:
            if alert.bar is None or last.bar is None:  # not comparable in bars: let it through
                return False
            return 0 <= alert.bar - last.bar < self.bars
        if self.seconds is not None:
            try:
                elapsed = (moment_of(alert.timestamp) - moment_of(last.timestamp)).total_seconds()
            except ValueError:  # a timestamp that is not ISO 8601: not comparable, let it through
                return False
            return 0 <= elapsed < self.seconds
        return False


@dataclass
class Dispatched:
    """What :func:`dispatch` did: the alerts sent to the channels, those the cooldown suppressed, and
    ``failed``: ``(channel name, alert)`` for every delivery that raised or reported failure."""

    sent: list[Alert] = field(default_factory=list)
    suppressed: list[Alert] = field(default_factory=list)
    failed: list[tuple[str, Alert]] = field(default_factory=list)


def dispatch(alerts: Iterable[Alert], channels: Sequence[Channel], cooldown: Cooldown | None = None) -> Dispatched:
    """Each alert the cooldown does not suppress, sent to every channel; each channel isolated (an
    exception is logged at ERROR and the other channels still run). Never raises for a channel."""
    outcome = Dispatched()
    for alert in alerts:
        if cooldown is not None and cooldown.suppresses(alert):
            logger.info(
                "alert %s [%s] at %s suppressed by the cooldown", alert.rule, alert.level.label, alert.timestamp
            )
            outcome.suppressed.append(alert)
            continue
        for channel in channels:
            try:
                delivered = channel.send(alert)
            except Exception as error:  # a channel never stops the others nor the run
                logger.error(
                    "alert channel %s failed on %s [%s]: %s", channel.name, alert.rule, alert.level.label, error
                )
                delivered = False
            if not delivered:
                outcome.failed.append((channel.name, alert))
        if cooldown is not None:
            cooldown.record(alert)
        outcome.sent.append(alert)
    return outcome


def configured_channels(
    config: AlertingParams, root: Path | None = None, source: str | None = None
) -> tuple[list[Channel], Cooldown]:
    """The channels ``alerting.channels`` names (a relative JSON-lines path under ``root``, default the
    working directory) and the cooldown of ``alerting.cooldown`` with the JSON-lines file's history:
    with a ``source``, only the alerts whose ``context.source`` it is (the forward reruns and the
    served model count their bars apart, and keep their cooldowns apart). A JSON-lines file that is
    not JSON lines is logged at ERROR and left out, unchanged (the other channels still run; without
    its history the cooldown starts empty)."""
    channels: list[Channel] = [LogChannel()] if config.channels.log else []
    history: list[dict[str, Any]] = []
    if config.channels.jsonl is not None:
        path = Path(config.channels.jsonl)
        channel = JsonLinesChannel(path if path.is_absolute() or root is None else root / path)
        try:
            history = channel.read()
            channels.append(channel)
        except (AlertFileError, OSError) as error:  # not JSON lines, or not readable: the others still run
            logger.error("alert channel jsonl left out: %s", error)
    if source is not None:
        history = [line for line in history if (line.get("context") or {}).get("source") == source]
    webhook = config.channels.webhook
    if webhook.url is not None:
        channels.append(WebhookChannel(webhook.url, webhook.timeout_s))
    return channels, Cooldown(bars=config.cooldown.bars, seconds=config.cooldown.seconds, history=history)
