"""Alerting: rules that turn what the agent did (equity, returns, its recent decisions, drift, the
forward decay checks, safeguard blocks) into :class:`Alert`\\ s, a :class:`Cooldown` per
``(rule, level)``, and the channels an alert is sent to (the log, an append-only JSON-lines file, an
HTTP webhook), all configured by the ``alerting`` parameter section (:class:`AlertingParams`).

One module for every caller: the forward phase (``phases.forward.alerts``) and, once it exists, the
served model. No Kedro here: a rule is a pure function of its inputs to zero or more alerts, and
:func:`dispatch` sends each alert the cooldown lets through to every channel.

**Levels.** ``info < warning < critical``. A threshold rule returns at most one alert per call, at the
highest level whose threshold is reached ("reached": ``>=`` for a rule on a value that must stay
low, ``<=`` for one that must stay high, such as entropy); a level whose threshold is ``null`` is off.

**Cooldown.** An alert is suppressed while the last alert of the same ``(rule, level)`` is less than
``bars`` bars (or ``seconds`` seconds, of the alerts' own timestamps: the time of the bar or decision
the alert is about, so a rerun over the same bars is suppressed) behind it. The state is the
JSON-lines file itself: the last line of each ``(rule, level)`` is when it last fired, so a rerun in
a new process does not alert again inside the cooldown. An alert from *before* the last one (a
replay of older bars, a new record whose bar count starts again) is not suppressed.

**Channels.** Each channel is isolated: an exception in one is logged (ERROR) and the others still
get the alert; nothing here stops the caller's run. The JSON-lines file is append-only (mode ``"a"``,
one JSON object per line, never rewritten); a file whose content is not JSON lines is refused
(:class:`AlertFileError`, naming the file and line) and left as it is. The webhook POSTs each alert
as JSON with a timeout; a refused connection, a timeout or an HTTP error status is logged, never
raised.
"""

from __future__ import annotations

import enum
import http.client
import json
import logging
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from trading_rl.config import ConfigError, Section, setting
from trading_rl.monitoring.collapse import action_stats

logger = logging.getLogger(__name__)


class Level(enum.IntEnum):
    """An alert's severity, ordered; the values are the ``logging`` levels the log channel uses."""

    INFO = logging.INFO
    WARNING = logging.WARNING
    CRITICAL = logging.CRITICAL

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def of(cls, value: str | Level) -> Level:
        """``"info"``, ``"warning"`` or ``"critical"`` (or a ``Level``) as a ``Level``."""
        if isinstance(value, Level):
            return value
        try:
            return cls[str(value).upper()]
        except KeyError:
            raise ValueError(f"unknown alert level {value!r}; one of {list(LEVELS)}") from None


LEVELS: tuple[str, ...] = tuple(level.label for level in Level)

# The forward decay checks (``phases.forward.decay``) an ``alerting.decay.critical_checks`` entry may name.
DECAY_CHECKS = ("sharpe_range", "drawdown", "trade_rate", "psr", "collapse", "feature_drift", "action_drift")


def _plain(value: Any) -> Any:
    """``value`` as JSON data: numpy scalars as Python numbers, non-finite floats as ``None``,
    timestamps as ISO text, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _iso(timestamp: Any) -> str:
    """A bar's or decision's time as ISO 8601 text (``pandas.Timestamp``, ``datetime`` or text)."""
    if timestamp is None:
        raise ValueError("an alert needs the timestamp of the bar or decision it is about")
    return str(timestamp.isoformat() if hasattr(timestamp, "isoformat") else timestamp)


@dataclass(frozen=True)
class Alert:
    """One alert: which ``rule`` fired at which ``level``, a ``message`` for people, the ``value``
    and the ``threshold`` it reached, the ``timestamp`` (ISO 8601) of the bar or decision it is about,
    ``context`` (model version, symbol, the statistics behind it) and ``bar``, the bar's index in its
    series (what a cooldown in bars counts)."""

    rule: str
    level: Level
    message: str
    value: float | None
    threshold: float | None
    timestamp: str
    context: Mapping[str, Any] = field(default_factory=dict)
    bar: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What the cooldown is kept per: ``(rule, level)``."""
        return self.rule, self.level.label

    def to_dict(self) -> dict[str, Any]:
        """The alert as JSON data: one line of the JSON-lines file, one webhook body."""
        return {
            "rule": self.rule,
            "level": self.level.label,
            "message": self.message,
            "value": _number(self.value),
            "threshold": _number(self.threshold),
            "timestamp": self.timestamp,
            "bar": self.bar,
            "context": _plain(dict(self.context)),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        return cls(
            rule=str(data["rule"]),
            level=Level.of(data["level"]),
            message=str(data.get("message", "")),
            value=data.get("value"),
            threshold=data.get("threshold"),
            timestamp=str(data["timestamp"]),
            context=dict(data.get("context") or {}),
            bar=None if data.get("bar") is None else int(data["bar"]),
        )


# ---------------------------------------------------------------------------------------------
# The ``alerting`` parameter section
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LevelThresholds(Section):
    """A threshold per level; ``null`` turns a level off. ``DIRECTION`` ``"above"``: a level fires at
    values ``>=`` its threshold (thresholds rise with the level); ``"below"``: at values ``<=`` it."""

    DIRECTION: ClassVar[str] = "above"

    info: float | None = None
    warning: float | None = None
    critical: float | None = None

    def validate(self, prefix: str) -> None:
        present = [(label, getattr(self, label)) for label in LEVELS if getattr(self, label) is not None]
        for (low, low_value), (high, high_value) in zip(present, present[1:]):
            ordered = low_value <= high_value if self.DIRECTION == "above" else low_value >= high_value
            if not ordered:
                relation = "<=" if self.DIRECTION == "above" else ">="
                raise ConfigError(
                    f"parameter '{prefix}.{low}' ({low_value}) must be {relation} '{prefix}.{high}' ({high_value}): "
                    f"a higher level needs a {'larger' if self.DIRECTION == 'above' else 'smaller'} value"
                )

    def level_of(self, value: float | None) -> tuple[Level, float] | None:
        """The highest level ``value`` reaches and its threshold; ``None`` when it reaches none (or
        is undefined)."""
        if value is None or not math.isfinite(value):
            return None
        reached: tuple[Level, float] | None = None
        for level in Level:
            threshold = getattr(self, level.label)
            if threshold is None:
                continue
            if (value >= threshold) if self.DIRECTION == "above" else (value <= threshold):
                reached = (level, float(threshold))
        return reached


@dataclass(frozen=True, kw_only=True)
class DrawdownThresholds(LevelThresholds):
    """Peak-to-trough depth of the equity series (a fraction of the peak)."""

    info: float | None = setting(None, interval="(0, 1]")
    warning: float | None = setting(0.10, interval="(0, 1]")
    critical: float | None = setting(0.20, interval="(0, 1]")


@dataclass(frozen=True, kw_only=True)
class DailyLossThresholds(LevelThresholds):
    """The last bar's loss (minus its return, a fraction of equity)."""

    info: float | None = setting(None, interval="(0, 1]")
    warning: float | None = setting(0.03, interval="(0, 1]")
    critical: float | None = setting(0.05, interval="(0, 1]")


@dataclass(frozen=True, kw_only=True)
class DominanceThresholds(LevelThresholds):
    """The largest action bucket's share of the recent decisions."""

    info: float | None = setting(None, interval="(0, 1]")
    warning: float | None = setting(0.80, interval="(0, 1]")
    critical: float | None = setting(0.95, interval="(0, 1]")


@dataclass(frozen=True, kw_only=True)
class EntropyThresholds(LevelThresholds):
    """Entropy (nats) of the action-bucket shares of the recent decisions: low is collapsed."""

    DIRECTION: ClassVar[str] = "below"

    info: float | None = setting(None, interval="[0, inf)")
    warning: float | None = setting(0.30, interval="[0, inf)")
    critical: float | None = setting(0.10, interval="[0, inf)")


@dataclass(frozen=True, kw_only=True)
class CollapseAlertParams(Section):
    window: int = setting(50, interval="[2, inf)")  # the last N decisions judged
    min_decisions: int = setting(20, interval="[2, inf)")  # fewer decisions than this: not judged
    dominance: DominanceThresholds = setting(DominanceThresholds())
    entropy: EntropyThresholds = setting(EntropyThresholds())

    def validate(self, prefix: str) -> None:
        if self.min_decisions > self.window:
            raise ConfigError(
                f"parameter '{prefix}.min_decisions' ({self.min_decisions}) "
                f"must be <= '{prefix}.window' ({self.window})"
            )


@dataclass(frozen=True, kw_only=True)
class DriftedFeatureThresholds(LevelThresholds):
    """How many features the drift report marks drifted."""

    info: float | None = setting(None, interval="[1, inf)")
    warning: float | None = setting(1, interval="[1, inf)")
    critical: float | None = setting(3, interval="[1, inf)")


@dataclass(frozen=True, kw_only=True)
class ActionPsiThresholds(LevelThresholds):
    """PSI of the recent action-bucket shares against the validation split's."""

    info: float | None = setting(None, interval="(0, inf)")
    warning: float | None = setting(0.25, interval="(0, inf)")
    critical: float | None = setting(0.50, interval="(0, inf)")


@dataclass(frozen=True, kw_only=True)
class DriftAlertParams(Section):
    features: DriftedFeatureThresholds = setting(DriftedFeatureThresholds())
    action_psi: ActionPsiThresholds = setting(ActionPsiThresholds())


def _decay_checks_problem(names: list[str]) -> str | None:
    unknown = sorted(set(names) - set(DECAY_CHECKS))
    return f"a list of decay checks among {list(DECAY_CHECKS)} (unknown: {unknown})" if unknown else None


@dataclass(frozen=True, kw_only=True)
class DecayAlertParams(Section):
    level: str = setting("warning", choices=LEVELS)  # the level of failing decay checks ...
    critical_checks: list[str] = setting(["psr"], check=_decay_checks_problem)  # ... critical when one of these fails


@dataclass(frozen=True, kw_only=True)
class SafeguardAlertParams(Section):
    level: str = setting("warning", choices=LEVELS)  # the level of a trade a safeguard blocked


@dataclass(frozen=True, kw_only=True)
class CooldownParams(Section):
    """At most one of ``bars`` and ``seconds``; both ``null``: no cooldown."""

    bars: int | None = setting(5, interval="[1, inf)")
    seconds: float | None = setting(None, interval="(0, inf)")

    def validate(self, prefix: str) -> None:
        if self.bars is not None and self.seconds is not None:
            raise ConfigError(
                f"parameter '{prefix}': set one of '{prefix}.bars' ({self.bars}) and '{prefix}.seconds' "
                f"({self.seconds}), the other null"
            )


def _url_problem(url: str) -> str | None:
    parts = urllib.parse.urlsplit(url)
    return None if parts.scheme in ("http", "https") and parts.netloc else "an http:// or https:// URL, or null"


@dataclass(frozen=True, kw_only=True)
class WebhookParams(Section):
    url: str | None = setting(None, check=_url_problem)  # null: no webhook
    timeout_s: float = setting(2.0, interval="(0, 60]")


@dataclass(frozen=True, kw_only=True)
class ChannelParams(Section):
    log: bool = True
    # append-only, not versioned; relative to the directory the run starts in (the project root)
    jsonl: str | None = "data/08_reporting/alerts/alerts.jsonl"
    webhook: WebhookParams = setting(WebhookParams())


@dataclass(frozen=True, kw_only=True)
class AlertingParams(Section):
    """The ``alerting`` parameter section (``conf/base/parameters_alerting.yml``)."""

    drawdown: DrawdownThresholds = setting(DrawdownThresholds())
    daily_loss: DailyLossThresholds = setting(DailyLossThresholds())
    collapse: CollapseAlertParams = setting(CollapseAlertParams())
    drift: DriftAlertParams = setting(DriftAlertParams())
    decay: DecayAlertParams = setting(DecayAlertParams())
    safeguard_block: SafeguardAlertParams = setting(SafeguardAlertParams())
    cooldown: CooldownParams = setting(CooldownParams())
    channels: ChannelParams = setting(ChannelParams())


# ---------------------------------------------------------------------------------------------
# Rules: pure functions to zero or more alerts
# ---------------------------------------------------------------------------------------------


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
        timestamp=_iso(timestamp),
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
    psi = _number((report.get("actions") or {}).get("psi"))
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
            value=_number(verdict.get("units")),
            threshold=None,
            timestamp=_iso(verdict.get("timestamp")),
            context={**(context or {}), "safeguard": verdict["rule"], "reason": verdict.get("reason")},
            bar=bar,
        )
    ]


# ---------------------------------------------------------------------------------------------
# Channels
# ---------------------------------------------------------------------------------------------


class Channel(Protocol):
    """Where an alert goes. ``send`` returns whether it was delivered; it may raise, :func:`dispatch`
    logs that and carries on with the other channels."""

    name: str

    def send(self, alert: Alert) -> bool: ...


class LogChannel:
    """Logs each alert at its level (``logging.INFO`` / ``WARNING`` / ``CRITICAL``)."""

    name = "log"

    def __init__(self, log: logging.Logger | None = None) -> None:
        self.log = log or logger

    def send(self, alert: Alert) -> bool:
        self.log.log(
            int(alert.level),
            "alert %s [%s] at %s: %s (value %s, threshold %s)",
            alert.rule,
            alert.level.label,
            alert.timestamp,
            alert.message,
            alert.value,
            alert.threshold,
        )
        return True


class AlertFileError(ValueError):
    """The JSON-lines alerts file holds something other than JSON lines; it was left unchanged."""


class JsonLinesChannel:
    """Appends one JSON object per alert to ``path`` (mode ``"a"``: existing lines are never
    rewritten). The file's existing content is checked once before the first append, and
    :meth:`read` refuses a file that is not JSON lines with :class:`AlertFileError` naming the file
    and the line, without touching it."""

    name = "jsonl"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._checked = False

    def read(self) -> list[dict[str, Any]]:
        """Every alert written so far (``[]`` when the file does not exist yet)."""
        if not self.path.exists():
            return []
        content = self.path.read_bytes()
        lines = content.split(b"\n")
        if lines[-1] != b"":
            raise AlertFileError(
                f"{self.path}: line {len(lines)} does not end with a newline: not a JSON-lines alerts file "
                "(or a write was cut off); appending would join two lines. The file was left unchanged: "
                "move it away or repair that line, or set alerting.channels.jsonl to another path"
            )
        alerts = []
        for number, line in enumerate(lines[:-1], start=1):
            try:
                data = json.loads(line.decode("utf-8"))
                if not isinstance(data, dict) or not {"rule", "level", "timestamp"} <= set(data):
                    raise ValueError("not an alert object with rule, level and an ISO 8601 timestamp")
                Alert.from_dict(data)
                _moment(str(data["timestamp"]))
            except (ValueError, TypeError) as error:  # JSONDecodeError, UnicodeDecodeError: ValueErrors
                raise AlertFileError(
                    f"{self.path}: line {number} is not an alert in JSON ({error}): not a JSON-lines alerts file. "
                    "The file was left unchanged: move it away or repair that line, or set "
                    "alerting.channels.jsonl to another path"
                ) from None
            alerts.append(data)
        self._checked = True
        return alerts

    def send(self, alert: Alert) -> bool:
        if not self._checked:
            self.read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(alert.to_dict(), sort_keys=True, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as file:  # append-only: never rewrite a line
            file.write(line)
        return True


class WebhookChannel:
    """POSTs each alert as a JSON body to ``url``; a refused connection, a timeout or an HTTP error
    status is logged (the URL's path and query left out: they often hold a token), never raised."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float = 2.0) -> None:
        self.url = url
        self.timeout_s = float(timeout_s)

    @property
    def host(self) -> str:
        parts = urllib.parse.urlsplit(self.url)  # no user, password, path or query: they may hold a token
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")

    def send(self, alert: Alert) -> bool:
        body = json.dumps(alert.to_dict(), sort_keys=True, allow_nan=False).encode("utf-8")
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except (OSError, ValueError, http.client.HTTPException) as error:  # URLError, HTTPError, timeouts: OSError
            logger.error("alert webhook %s: %s [%s] not delivered: %s", self.host, alert.rule, alert.level.label, error)
            return False
        return True


# ---------------------------------------------------------------------------------------------
# Cooldown and dispatch
# ---------------------------------------------------------------------------------------------


def _moment(timestamp: str) -> datetime:
    moment = datetime.fromisoformat(timestamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


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
                elapsed = (_moment(alert.timestamp) - _moment(last.timestamp)).total_seconds()
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


def configured_channels(config: AlertingParams, root: Path | None = None) -> tuple[list[Channel], Cooldown]:
    """The channels ``alerting.channels`` names (a relative JSON-lines path under ``root``, default the
    working directory) and the cooldown of ``alerting.cooldown`` with the JSON-lines file's history. A
    JSON-lines file that is not JSON lines is logged at ERROR and left out, unchanged (the other
    channels still run; without its history the cooldown starts empty)."""
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
    webhook = config.channels.webhook
    if webhook.url is not None:
        channels.append(WebhookChannel(webhook.url, webhook.timeout_s))
    return channels, Cooldown(bars=config.cooldown.bars, seconds=config.cooldown.seconds, history=history)
