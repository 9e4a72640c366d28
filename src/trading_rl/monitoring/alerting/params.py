"""The ``alerting`` parameter section (``conf/base/parameters_alerting.yml``): a threshold per level
for each threshold rule, the decay and safeguard-block levels, the cooldown and the channels."""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass
from typing import ClassVar

from trading_rl.config import ConfigError, Section, setting
from trading_rl.monitoring.alerting.alert import LEVELS, Level

# The forward decay checks (``phases.forward.decay``) an ``alerting.decay.critical_checks`` entry may name.
DECAY_CHECKS = ("sharpe_range", "drawdown", "trade_rate", "psr", "collapse", "feature_drift", "action_drift")


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
