"""Alerting: rules that turn what the agent did (equity, returns, its recent decisions, drift, the
forward decay checks, safeguard blocks) into :class:`Alert`\\ s, a :class:`Cooldown` per
``(rule, level)``, and the channels an alert is sent to (the log, an append-only JSON-lines file, an
HTTP webhook), all configured by the ``alerting`` parameter section (:class:`AlertingParams`).

One package for every caller: the forward phase (``phases.forward.alerts``) and, once it exists, the
served model. No Kedro here: a rule is a pure function of its inputs to zero or more alerts
(``rules``), and :func:`dispatch` (``dispatcher``) sends each alert the cooldown lets through to every
channel (``channels``); ``alert`` holds :class:`Alert` and :class:`Level`, ``params`` the section.

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

from trading_rl.monitoring.alerting.alert import LEVELS, Alert, Level
from trading_rl.monitoring.alerting.channels import (
    AlertFileError,
    Channel,
    JsonLinesChannel,
    LogChannel,
    WebhookChannel,
)
from trading_rl.monitoring.alerting.dispatcher import Cooldown, Dispatched, configured_channels, dispatch
from trading_rl.monitoring.alerting.params import (
    DECAY_CHECKS,
    ActionPsiThresholds,
    AlertingParams,
    ChannelParams,
    CollapseAlertParams,
    CooldownParams,
    DailyLossThresholds,
    DecayAlertParams,
    DominanceThresholds,
    DrawdownThresholds,
    DriftAlertParams,
    DriftedFeatureThresholds,
    EntropyThresholds,
    LevelThresholds,
    SafeguardAlertParams,
    WebhookParams,
)
from trading_rl.monitoring.alerting.rules import (
    collapse,
    daily_loss,
    decay,
    drawdown,
    drift,
    peak_to_trough,
    safeguard_block,
)

__all__ = [
    "DECAY_CHECKS",
    "LEVELS",
    "ActionPsiThresholds",
    "Alert",
    "AlertFileError",
    "AlertingParams",
    "Channel",
    "ChannelParams",
    "CollapseAlertParams",
    "Cooldown",
    "CooldownParams",
    "DailyLossThresholds",
    "DecayAlertParams",
    "Dispatched",
    "DominanceThresholds",
    "DrawdownThresholds",
    "DriftAlertParams",
    "DriftedFeatureThresholds",
    "EntropyThresholds",
    "JsonLinesChannel",
    "Level",
    "LevelThresholds",
    "LogChannel",
    "SafeguardAlertParams",
    "WebhookChannel",
    "WebhookParams",
    "collapse",
    "configured_channels",
    "daily_loss",
    "decay",
    "dispatch",
    "drawdown",
    "drift",
    "peak_to_trough",
    "safeguard_block",
]
