"""Action-collapse statistics, gates and a training callback that watches for collapse.

A collapsed trading agent shows one action taking nearly every step, low action entropy and almost
no trades. The statistics use ``monitoring.actions`` buckets so the callback, the evaluation report
and the gate report all count the same way. Gate defaults (docs/pipelines.md, "sac_icm"):
dominance at most 0.6, entropy at least 0.3 nats, trades on at least 5% of steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from trading_rl.config import Section, setting
from trading_rl.monitoring.actions import ACTION_BUCKETS, action_histogram, bucketize, histogram_entropy, longest_run


@dataclass(frozen=True, kw_only=True)
class CollapseThresholds(Section):
    """The collapse gates' thresholds (``sac_icm.agent.collapse`` adds the monitor's settings)."""

    dominance_max: float = setting(0.6, interval="(0, 1]")
    entropy_min: float = setting(0.3, interval="[0, inf)")
    trade_rate_min: float = setting(0.05, interval="[0, 1]")


# gate name -> (statistic, threshold key, comparison that passes)
_GATES: dict[str, tuple[str, str, str]] = {
    "dominance": ("dominance", "dominance_max", "<="),
    "entropy": ("entropy", "entropy_min", ">="),
    "trade_rate": ("trade_rate", "trade_rate_min", ">="),
}

# ``action_type`` labels that mean no order was filled.
NO_TRADE_LABELS = frozenset({"hold"})


class CollapseError(RuntimeError):
    """The agent's actions collapsed and the run is configured to fail on it."""


def _trade_flags(actions: np.ndarray, action_types, hold_threshold: float) -> np.ndarray:
    if action_types is None:
        return np.abs(actions) > hold_threshold
    types = np.asarray(action_types).reshape(-1)
    if types.shape != actions.shape:
        raise ValueError(f"action_types has {types.size} entries for {actions.size} actions")
    if types.dtype.kind == "b":
        return types
    return ~np.isin(np.char.lower(types.astype(str)), list(NO_TRADE_LABELS))


def action_stats(actions, action_types=None, *, hold_threshold: float) -> dict[str, float]:
    """Collapse statistics of a sequence of scalar actions in [-1, 1].

    ``action_types`` is either boolean trade flags per step or the env's ``action_type`` labels
    (``"hold"`` is no trade); without it a step trades when ``|a| > hold_threshold``.
    Returns ``dominance`` (largest bucket share), ``entropy`` (nats over the buckets),
    ``trade_rate``, ``hold_share``, ``longest_run`` (steps in the same bucket back to back),
    ``n_actions`` and ``share_<bucket>`` for every bucket; all zeros for no actions.
    """
    a = np.asarray(actions, dtype=np.float64).reshape(-1)
    shares = action_histogram(a, hold_threshold=hold_threshold)
    trades = _trade_flags(a, action_types, hold_threshold)
    n = a.size
    stats = {
        "dominance": max(shares.values()),
        "entropy": histogram_entropy(shares),
        "trade_rate": float(trades.mean()) if n else 0.0,
        "hold_share": shares["hold"],
        "longest_run": float(longest_run(bucketize(a, hold_threshold=hold_threshold))),
        "n_actions": float(n),
    }
    stats.update({f"share_{bucket}": shares[bucket] for bucket in ACTION_BUCKETS})
    return stats


def collapse_report(stats: dict, thresholds: CollapseThresholds) -> dict:
    """Each gate with its value, threshold, passing comparison and verdict, plus ``collapsed``
    (any gate failed). A NaN value fails its gate."""
    gates = []
    for gate, (stat, threshold_key, comparison) in _GATES.items():
        value = float(stats[stat])
        threshold = float(getattr(thresholds, threshold_key))
        passed = math.isfinite(value) and (value <= threshold if comparison == "<=" else value >= threshold)
        gates.append(
            {"gate": gate, "value": value, "threshold": threshold, "comparison": comparison, "passed": bool(passed)}
        )
    return {"gates": gates, "collapsed": not all(g["passed"] for g in gates)}


def enforce(report: dict, fail_on_collapse: bool) -> None:
    """Raise ``CollapseError`` listing the failing gates when collapsed and configured to fail."""
    if not (fail_on_collapse and report["collapsed"]):
        return
    failing = "; ".join(
        f"{g['gate']} {g['value']:.4g} (needs {g['comparison']} {g['threshold']:.4g})"
        for g in report["gates"]
        if not g["passed"]
    )
    raise CollapseError(f"action collapse detected: {failing}")


class CollapseMonitorCallback(BaseCallback):
    """Keeps the last ``window`` stochastic training actions and, every ``check_freq`` of them, logs
    their collapse statistics to the SB3 logger (``collapse/*``) and appends them to ``history``.
    With several envs the actions of one step enter the window in env order.

    A step counts as a trade when the env's ``info`` reports a non-zero ``trade_value``; envs
    without it fall back to ``|a| > hold_threshold``. Assumes one action dimension.
    """

    def __init__(
        self,
        hold_threshold: float,
        window: int,
        check_freq: int,
        thresholds: CollapseThresholds,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if window < 1 or check_freq < 1:
            raise ValueError(f"window and check_freq must be >= 1, got {window}, {check_freq}")
        self.window = int(window)
        self.check_freq = int(check_freq)
        self.hold_threshold = float(hold_threshold)
        self.thresholds = thresholds
        self.history: list[dict] = []
        self._actions = np.zeros(self.window, dtype=np.float64)
        self._trades = np.zeros(self.window, dtype=bool)
        self._count = 0

    def _record(self, actions: np.ndarray, trades: np.ndarray) -> None:
        positions = (self._count + np.arange(actions.size)) % self.window
        self._actions[positions] = actions
        self._trades[positions] = trades
        self._count += actions.size

    def current_stats(self) -> dict[str, float]:
        """Statistics of the actions currently in the window, in the order they were taken."""
        filled = min(self._count, self.window)
        if self._count > self.window:
            # Restore chronological order so ``longest_run`` sees consecutive steps.
            order = (self._count + np.arange(self.window)) % self.window
        else:
            order = np.arange(filled)
        return action_stats(self._actions[order], self._trades[order], hold_threshold=self.hold_threshold)

    def _on_step(self) -> bool:
        actions = np.asarray(self.locals["actions"], dtype=np.float64).reshape(-1)
        infos = self.locals.get("infos") or []
        if len(infos) == actions.size and all("trade_value" in info for info in infos):
            trades = np.array([float(info["trade_value"]) != 0.0 for info in infos])
        else:
            trades = np.abs(actions) > self.hold_threshold
        self._record(actions, trades)
        if self._count // self.check_freq > (self._count - actions.size) // self.check_freq:
            stats = self.current_stats()
            report = collapse_report(stats, self.thresholds)
            for key, value in stats.items():
                self.logger.record(f"collapse/{key}", value)
            self.logger.record("collapse/collapsed", float(report["collapsed"]))
            self.history.append({"timestep": self.num_timesteps, **stats, "collapsed": report["collapsed"]})
        return True


# An agent "trades" in an evaluation when it fills on at least this share of steps and no collapse
# gate fails: the bar the validation protocol sets for a walk-forward agent worth reporting.
MIN_FILL_RATE = 0.02


def trading_verdict(actions, trade_values, hold_threshold: float, thresholds: CollapseThresholds) -> dict:
    """``fill_rate`` (steps with a fill), ``collapsed`` (deterministic collapse gates on the raw
    actions) and ``trades`` (fill rate >= ``MIN_FILL_RATE`` and not collapsed) of one rollout."""
    fills = np.asarray(trade_values, dtype=np.float64).reshape(-1)
    fill_rate = float(np.count_nonzero(fills) / fills.size) if fills.size else 0.0
    collapsed = collapse_report(action_stats(actions, hold_threshold=hold_threshold), thresholds)["collapsed"]
    return {
        "fill_rate": fill_rate,
        "collapsed": bool(collapsed),
        "trades": bool(fill_rate >= MIN_FILL_RATE and not collapsed),
    }


def trading_flags(verdicts) -> np.ndarray:
    """``trades`` verdicts as booleans, whether they are bools or the "True"/"False" text a CSV
    round trip leaves (a plain ``astype(bool)`` would read "False" as true)."""
    return np.char.lower(np.asarray(verdicts).astype(str)) == "true"
