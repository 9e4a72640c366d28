"""Six trading options as stateless, vectorised rules over named observation fields.

An option here is a set of pure functions of a batch of observations (read through the env's
``ObservationLayout`` by field name, never by index) and of per-env option state that the caller
keeps in arrays (active option, steps taken in it). Nothing is stored on the option objects, so one
``TradingOptions`` serves any number of vectorised envs.

Per option (defaults from seed ``003``):

===============  =====  ====  ====  =======  ==========================================================
option           scale  min   max   timeout  initiation / direction / success termination
===============  =====  ====  ====  =======  ==========================================================
open_long        0.8    5     20    40       not short, below the exposure cap, bullish confidence /
                                             buys or holds / position at 90% of the cap
open_short       0.8    5     20    40       shorting allowed, not long, below the cap, bearish
                                             confidence / sells or holds / 90% of the cap; 0.8 when
                                             confidence turns bullish
close_position   1.0    3     10    20       a position is open / only reduces it / flat
trend_follow     0.6    10    40    60       trend signal beyond the threshold / trades with the trend
                                             only / 0.85 once the trend falls below half the threshold
scalp            1.0    5     15    30       always / any direction / profit target or stop hit
wait             0.0    5     30    30       always / holds / 0.85 on confidence extremes, 0.75 on a
                                             strong trend
===============  =====  ====  ====  =======  ==========================================================

Termination probability: 0 before ``min_duration`` (even when the success rule fires), 1 from
``hard_timeout`` on; in between the larger of the success probability and the time term
``sigmoid_termination_prob(step, min_duration, max_steps, steepness)``, the time term capped per
option where the seed caps it (close 0.02, trend 0.15, wait 0.5).

Signals. The data has no sentiment or supervised-model confidence, so ``confidence`` is a
price-derived proxy: ``sigmoid(trend)`` with ``trend`` the ``trend_feature`` (default the 20-bar
return) in scaled units *measured from a zero return*: ``scaled − trend_zero``, where ``trend_zero``
is where a raw 0 lands after the feature scaler (``features.scaling.scaled_value``). The scaler
centres on the training median (+0.84% for the S&P 500's 20-bar return), so measured from the
scaled 0 the 0.35 threshold meant +2.3% upward but −0.6% downward and 12.9% of validation bars with
positive momentum were bearish; from the zero return, up and down are treated alike. When the
observation carries a ``confidence_feature`` column (a real sentiment/confidence in [0, 1]) it is used
instead. Scaled units are about one standard deviation, so the seed's 1.5% 20-bar momentum is about
0.35 on daily equity bars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trading_rl.config import ConfigError, Section, setting
from trading_rl.envs.layout import ObservationLayout

OPTION_NAMES: tuple[str, ...] = ("open_long", "open_short", "close_position", "trend_follow", "scalp", "wait")
OPEN_LONG, OPEN_SHORT, CLOSE_POSITION, TREND_FOLLOW, SCALP, WAIT = range(len(OPTION_NAMES))


@dataclass(frozen=True, kw_only=True)
class SignalParams(Section):
    trend_feature: str = "ret_20"
    confidence_feature: str = "sentiment"
    flat_tolerance: float = 0.01


@dataclass(frozen=True, kw_only=True)
class OptionRule(Section):
    """What every option has: its action scale and time-based termination. Each option's class
    states its own defaults."""

    action_scale: float = setting(interval="[0, 1]")
    min_duration: int = setting(interval="[0, inf)")
    max_steps: int
    hard_timeout: int
    steepness: float = setting(0.5, interval="(0, inf)")


@dataclass(frozen=True, kw_only=True)
class OpenLongParams(OptionRule):
    action_scale: float = setting(0.8, interval="[0, 1]")
    min_duration: int = setting(5, interval="[0, inf)")
    max_steps: int = 20
    hard_timeout: int = 40
    min_confidence: float = 0.5
    max_exposure_pct: float = 0.15
    target_fill: float = 0.9


@dataclass(frozen=True, kw_only=True)
class OpenShortParams(OpenLongParams):
    exit_confidence: float = 0.6
    exit_probability: float = 0.8


@dataclass(frozen=True, kw_only=True)
class ClosePositionParams(OptionRule):
    action_scale: float = setting(1.0, interval="[0, 1]")
    min_duration: int = setting(3, interval="[0, inf)")
    max_steps: int = 10
    hard_timeout: int = 20
    time_cap: float = 0.02


@dataclass(frozen=True, kw_only=True)
class TrendFollowParams(OptionRule):
    action_scale: float = setting(0.6, interval="[0, 1]")
    min_duration: int = setting(10, interval="[0, inf)")
    max_steps: int = 40
    hard_timeout: int = 60
    momentum_threshold: float = 0.35
    exhausted_fraction: float = 0.5
    exhausted_probability: float = 0.85
    time_cap: float = 0.15
    max_position_size: float = 0.15


@dataclass(frozen=True, kw_only=True)
class ScalpParams(OptionRule):
    action_scale: float = setting(1.0, interval="[0, 1]")
    min_duration: int = setting(5, interval="[0, inf)")
    max_steps: int = 15
    hard_timeout: int = 30
    steepness: float = setting(0.6, interval="(0, inf)")
    profit_target: float = 0.008
    stop_loss: float = -0.004


@dataclass(frozen=True, kw_only=True)
class WaitParams(OptionRule):
    action_scale: float = setting(0.0, interval="[0, 1]")
    min_duration: int = setting(5, interval="[0, inf)")
    max_steps: int = 30
    hard_timeout: int = 30
    time_cap: float = 0.5
    confidence_low: float = 0.30
    confidence_high: float = 0.75
    extreme_probability: float = 0.85
    strong_trend: float = 1.0
    strong_trend_probability: float = 0.75


@dataclass(frozen=True, kw_only=True)
class OptionParams(Section):
    """The option rules (``options_her.options`` without ``enabled``)."""

    signals: SignalParams = setting(SignalParams())
    open_long: OpenLongParams = setting(OpenLongParams())
    open_short: OpenShortParams = setting(OpenShortParams())
    close_position: ClosePositionParams = setting(ClosePositionParams())
    trend_follow: TrendFollowParams = setting(TrendFollowParams())
    scalp: ScalpParams = setting(ScalpParams())
    wait: WaitParams = setting(WaitParams())

    def validate(self, prefix: str) -> None:
        for name in OPTION_NAMES:
            option = self.rule(name)
            if not option.min_duration <= option.max_steps <= option.hard_timeout:
                raise ConfigError(
                    f"parameter '{prefix}.{name}.min_duration' ({option.min_duration}) must be <= max_steps "
                    f"({option.max_steps}) <= hard_timeout ({option.hard_timeout})"
                )

    @classmethod
    def from_saved(cls, saved: Mapping[str, Mapping[str, Any]]) -> OptionParams:
        """The rules as ``to_dict`` wrote them into a saved agent (checked when they were configured)."""
        defaults = cls()
        return cls(**{name: type(getattr(defaults, name))(**values) for name, values in saved.items()})

    def rule(self, name: str) -> OptionRule:
        """The option called ``name`` (one of ``OPTION_NAMES``)."""
        rule: OptionRule = getattr(self, name)
        return rule


def sigmoid_termination_prob(step, min_duration: int, max_steps: int, steepness: float = 0.5):
    """Time-based termination: 0 before ``min_duration``, 1 from ``max_steps`` on, and in between a
    sigmoid of the progress centred half-way, capped at 0.8 so termination stays a random event.

    ``step`` may be an int or an array (the result then has its shape).
    """
    step_array = np.asarray(step, dtype=np.float64)
    progress = (step_array - min_duration) / max(1, max_steps - min_duration)
    middle = 0.8 / (1.0 + np.exp(-steepness * 10.0 * (progress - 0.5)))
    prob = np.where(step_array < min_duration, 0.0, np.where(step_array >= max_steps, 1.0, middle))
    return float(prob) if prob.ndim == 0 else prob


class TradingOptions:
    """The six options over one observation layout; every method takes a batch ``(n, dim)``."""

    names = OPTION_NAMES

    def __init__(
        self,
        layout: ObservationLayout,
        params: OptionParams,
        allow_short: bool = False,
        trend_zero: float = 0.0,
    ):
        self.layout = layout
        self.params = params
        self.allow_short = bool(allow_short)
        self.trend_zero = float(trend_zero)
        signals = params.signals
        trend_name = f"feature:{signals.trend_feature}"
        if trend_name not in layout:
            raise ValueError(
                f"options signal trend_feature {signals.trend_feature!r} is not an observation feature; "
                f"features: {list(layout.feature_columns)}"
            )
        self._trend_field = trend_name
        confidence_name = f"feature:{signals.confidence_feature}"
        self._confidence_field = confidence_name if confidence_name in layout else None
        rules = [params.rule(name) for name in OPTION_NAMES]
        self.action_scales = np.array([rule.action_scale for rule in rules], dtype=np.float64)
        self.min_durations = np.array([rule.min_duration for rule in rules], dtype=np.int64)
        self.max_steps = np.array([rule.max_steps for rule in rules], dtype=np.int64)
        self.hard_timeouts = np.array([rule.hard_timeout for rule in rules], dtype=np.int64)

    @property
    def n_options(self) -> int:
        return len(OPTION_NAMES)

    # ---- signals -------------------------------------------------------------------------------
    def trend(self, obs: np.ndarray) -> np.ndarray:
        """The trend feature in scaled units, measured from a zero return (positive = up)."""
        return np.asarray(self.layout.get(obs, self._trend_field), dtype=np.float64) - self.trend_zero

    def confidence(self, obs: np.ndarray) -> np.ndarray:
        """Bullish confidence in [0, 1]: the real column when present, else ``sigmoid(trend)``."""
        if self._confidence_field is not None:
            return np.asarray(self.layout.get(obs, self._confidence_field), dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-self.trend(obs)))

    def _position(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(self.layout.get(obs, "position_fraction"), dtype=np.float64)

    # ---- initiation ----------------------------------------------------------------------------
    def initiation_mask(self, obs: np.ndarray) -> np.ndarray:
        """``(n, 6)`` bool: which options may start on each row. ``wait`` is always available."""
        obs = np.atleast_2d(obs)
        p = self.params
        position = self._position(obs)
        confidence = self.confidence(obs)
        trend = self.trend(obs)
        flat_tol = p.signals.flat_tolerance
        mask = np.ones((obs.shape[0], self.n_options), dtype=bool)
        mask[:, OPEN_LONG] = (
            (position > -flat_tol)
            & (position < p.open_long.target_fill * p.open_long.max_exposure_pct)
            & (confidence >= p.open_long.min_confidence)
        )
        mask[:, OPEN_SHORT] = (
            self.allow_short
            & (position < flat_tol)
            & (-position < p.open_short.target_fill * p.open_short.max_exposure_pct)
            & (1.0 - confidence >= p.open_short.min_confidence)
        )
        mask[:, CLOSE_POSITION] = np.abs(position) >= flat_tol
        mask[:, TREND_FOLLOW] = np.abs(trend) >= p.trend_follow.momentum_threshold
        return mask

    # ---- actions -------------------------------------------------------------------------------
    def transform_actions(self, options: np.ndarray, actions: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Scale each row's action by its option and apply the option's direction constraint.

        ``actions`` is ``(n, 1)`` (or ``(n,)``) in [-1, 1]; the result has the same shape.
        """
        obs = np.atleast_2d(obs)
        options = np.asarray(options, dtype=np.int64)
        raw = np.asarray(actions, dtype=np.float64).reshape(len(options))
        p = self.params
        position = self._position(obs)
        trend_direction = np.sign(self.trend(obs))
        scaled = raw * self.action_scales[options]

        out = scaled.copy()
        long_room = position < p.open_long.max_exposure_pct
        short_room = -position < p.open_short.max_exposure_pct
        out = np.where(options == OPEN_LONG, np.where(long_room, np.maximum(scaled, 0.0), 0.0), out)
        out = np.where(options == OPEN_SHORT, np.where(short_room, np.minimum(scaled, 0.0), 0.0), out)
        # ClosePosition: sell while long, buy back while short, nothing while flat.
        closing = np.where(position > 0, np.minimum(scaled, 0.0), np.where(position < 0, np.maximum(scaled, 0.0), 0.0))
        out = np.where(options == CLOSE_POSITION, closing, out)
        # TrendFollow: only trades in the trend's direction and stops adding at its size cap.
        with_trend = np.where(np.sign(scaled) == trend_direction, scaled, 0.0)
        adding = np.sign(with_trend) * np.sign(position) >= 0
        capped = adding & (np.abs(position) >= p.trend_follow.max_position_size)
        out = np.where(options == TREND_FOLLOW, np.where(capped, 0.0, with_trend), out)
        out = np.where(options == WAIT, 0.0, out)
        return out.reshape(np.shape(actions)).astype(np.float32)

    # ---- termination ---------------------------------------------------------------------------
    def termination_probs(self, options: np.ndarray, steps: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Probability that each row's option ends after ``steps`` steps, given the new observation."""
        obs = np.atleast_2d(obs)
        options = np.asarray(options, dtype=np.int64)
        steps = np.asarray(steps, dtype=np.int64)
        p = self.params
        position = self._position(obs)
        pnl = np.asarray(self.layout.get(obs, "unrealized_pnl"), dtype=np.float64)
        confidence = self.confidence(obs)
        trend = np.abs(self.trend(obs))
        flat_tol = p.signals.flat_tolerance

        def time_term(index: int, cap: float = 1.0) -> np.ndarray:
            rule = p.rule(OPTION_NAMES[index])
            prob = sigmoid_termination_prob(steps, rule.min_duration, rule.max_steps, rule.steepness)
            return np.minimum(prob, cap)

        n = len(options)
        probs = np.zeros((n, self.n_options))
        long_target = p.open_long.target_fill * p.open_long.max_exposure_pct
        probs[:, OPEN_LONG] = np.maximum(np.where(position >= long_target, 1.0, 0.0), time_term(OPEN_LONG))
        short_target = p.open_short.target_fill * p.open_short.max_exposure_pct
        short_success = np.where(
            -position >= short_target,
            1.0,
            np.where(confidence > p.open_short.exit_confidence, p.open_short.exit_probability, 0.0),
        )
        probs[:, OPEN_SHORT] = np.maximum(short_success, time_term(OPEN_SHORT))
        probs[:, CLOSE_POSITION] = np.where(
            np.abs(position) < flat_tol, 1.0, time_term(CLOSE_POSITION, p.close_position.time_cap)
        )
        trend_p = p.trend_follow
        exhausted = trend < trend_p.exhausted_fraction * trend_p.momentum_threshold
        probs[:, TREND_FOLLOW] = np.maximum(
            np.where(exhausted, trend_p.exhausted_probability, 0.0), time_term(TREND_FOLLOW, trend_p.time_cap)
        )
        scalp = p.scalp
        hit = (np.abs(position) >= flat_tol) & ((pnl >= scalp.profit_target) | (pnl <= scalp.stop_loss))
        probs[:, SCALP] = np.maximum(np.where(hit, 1.0, 0.0), time_term(SCALP))
        wait = p.wait
        extreme = (confidence < wait.confidence_low) | (confidence > wait.confidence_high)
        signal = np.where(
            extreme,
            wait.extreme_probability,
            np.where(trend > wait.strong_trend, wait.strong_trend_probability, 0.0),
        )
        probs[:, WAIT] = np.maximum(signal, time_term(WAIT, wait.time_cap))

        chosen = probs[np.arange(n), options]
        chosen = np.where(steps >= self.hard_timeouts[options], 1.0, chosen)
        return np.where(steps < self.min_durations[options], 0.0, chosen)
