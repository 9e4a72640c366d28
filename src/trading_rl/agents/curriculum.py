"""A progressive curriculum over the real training bars (docs/algorithms.md, "Curriculum over the training bars").

A daily P&L reward is sparse and noisy, and realistic costs punish the random trades of early
exploration. The curriculum starts the agent on the easiest stretches of its *own training split* —
windows of calm, trending bars, with a fraction of the costs — and moves it to harder windows and
full costs only once it does well where it is. No synthetic market is involved.

- **Stages** come from the training env's causal regime labels (``evaluation.regimes.label_regimes``
  on closes up to each bar) and realised volatility. A stage picks which windows an episode may
  start in (share of the window's bars in the stage's regimes, window volatility under a quantile of
  the split's windows), a cost multiplier (commission and slippage) and optional Gaussian noise on
  the observation's feature window (never on the portfolio state).
- **Advancement** (docs/algorithms.md): each finished episode is a success when its Sharpe and its
  period win rate reach the stage's thresholds; the agent advances once it spent ``min_episodes``
  episodes in the stage and at least ``success_rate`` of the last ``window`` episodes succeeded.
  The last stage is the real task and has no thresholds.
- Every stage change is recorded (step, stages, the metrics that triggered it) and logged; the
  reason the agent is held back is always available (``report``).

The wrapper only ever resets the env it wraps onto that env's own bars, so wrapping the training
env keeps validation and test bars out of training; an evaluation env is refused.
"""

from __future__ import annotations

import copy
import logging
import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3.common.vec_env import VecEnv

from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics import sharpe_ratio, win_rate
from trading_rl.evaluation.regimes import REGIMES, bar_regimes, resolve_regime_params

logger = logging.getLogger(__name__)

PARAMS_PREFIX = "sac_icm.agent.curriculum"

# From easy to realistic (docs/algorithms.md): Sharpe 0.3 -> 0.7, win rate 0.5 -> 0.45.
DEFAULT_STAGES: list[dict[str, Any]] = [
    {
        "name": "calm_bull",
        "regimes": ["bull"],
        "min_regime_share": 0.5,
        "max_volatility_quantile": 0.5,
        "cost_multiplier": 0.1,
        "observation_noise": 0.0,
        "min_sharpe": 0.3,
        "min_win_rate": 0.5,
    },
    {
        "name": "bull_and_sideways",
        "regimes": ["bull", "sideways"],
        "min_regime_share": 0.5,
        "max_volatility_quantile": 0.75,
        "cost_multiplier": 0.25,
        "observation_noise": 0.0,
        "min_sharpe": 0.5,
        "min_win_rate": 0.45,
    },
    {
        "name": "no_crisis",
        "regimes": ["bull", "sideways", "bear"],
        "min_regime_share": 0.5,
        "max_volatility_quantile": 0.9,
        "cost_multiplier": 0.5,
        "observation_noise": 0.05,
        "min_sharpe": 0.6,
        "min_win_rate": 0.45,
    },
    {
        "name": "all_regimes",
        "regimes": "all",
        "min_regime_share": 0.0,
        "max_volatility_quantile": 1.0,
        "cost_multiplier": 0.75,
        "observation_noise": 0.05,
        "min_sharpe": 0.7,
        "min_win_rate": 0.45,
    },
    {
        "name": "realistic",
        "regimes": "all",
        "min_regime_share": 0.0,
        "max_volatility_quantile": 1.0,
        "cost_multiplier": 1.0,
        "observation_noise": 0.0,
        "min_sharpe": None,
        "min_win_rate": None,
    },
]

DEFAULT_CURRICULUM_PARAMS: dict[str, Any] = {
    "enabled": False,
    "episode_length": 250,  # steps per curriculum episode; null: the env's episode_length
    "min_episodes": 5,
    "window": 5,
    "success_rate": 0.8,
    "min_start_windows": 10,  # fewer eligible windows: the stage takes the best-matching ones
    "regimes": {},  # label_regimes parameters (defaults: regime_validation's)
    "stages": DEFAULT_STAGES,
}

STAGE_KEYS = tuple(DEFAULT_STAGES[0])


def _number(value: Any, key: str, low: float, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"parameter '{PARAMS_PREFIX}.{key}' must be a number, got {value!r}")
    if not (math.isfinite(float(value)) and low <= float(value) <= high):
        raise ValueError(f"parameter '{PARAMS_PREFIX}.{key}' must lie in [{low}, {high}], got {value!r}")
    return float(value)


def _integer(value: Any, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"parameter '{PARAMS_PREFIX}.{key}' must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _resolve_stage(stage: Any, index: int, last: bool) -> dict[str, Any]:
    where = f"stages[{index}]"
    if not isinstance(stage, Mapping):
        raise ValueError(f"parameter '{PARAMS_PREFIX}.{where}' must be a mapping, got {stage!r}")
    unknown = sorted(set(stage) - set(STAGE_KEYS))
    if unknown:
        raise ValueError(f"unknown parameter '{PARAMS_PREFIX}.{where}.{unknown[0]}'; known: {list(STAGE_KEYS)}")
    resolved = {**DEFAULT_STAGES[-1], "name": f"stage_{index}", **stage}
    regimes = resolved["regimes"]
    if regimes == "all":
        regimes = list(REGIMES)
    if isinstance(regimes, str) or not regimes or any(r not in REGIMES for r in regimes):
        raise ValueError(
            f"parameter '{PARAMS_PREFIX}.{where}.regimes' must be 'all' or a non-empty list of {list(REGIMES)}, "
            f"got {resolved['regimes']!r}"
        )
    resolved["regimes"] = list(regimes)
    resolved["min_regime_share"] = _number(resolved["min_regime_share"], f"{where}.min_regime_share", 0.0, 1.0)
    resolved["max_volatility_quantile"] = _number(
        resolved["max_volatility_quantile"], f"{where}.max_volatility_quantile", 0.0, 1.0
    )
    resolved["cost_multiplier"] = _number(resolved["cost_multiplier"], f"{where}.cost_multiplier", 0.0)
    resolved["observation_noise"] = _number(resolved["observation_noise"], f"{where}.observation_noise", 0.0)
    for key in ("min_sharpe", "min_win_rate"):
        if resolved[key] is None:
            if not last:
                raise ValueError(
                    f"parameter '{PARAMS_PREFIX}.{where}.{key}' is needed: only the last stage has no thresholds"
                )
            continue
        resolved[key] = _number(resolved[key], f"{where}.{key}", -math.inf if key == "min_sharpe" else 0.0)
    return resolved


def resolve_curriculum_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults overlaid with ``params``, validated; errors name the key."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(DEFAULT_CURRICULUM_PARAMS))
    if unknown:
        raise ValueError(
            f"unknown parameter '{PARAMS_PREFIX}.{unknown[0]}'; known: {sorted(DEFAULT_CURRICULUM_PARAMS)}"
        )
    resolved = {**copy.deepcopy(DEFAULT_CURRICULUM_PARAMS), **params}
    if not isinstance(resolved["enabled"], bool):
        raise ValueError(f"parameter '{PARAMS_PREFIX}.enabled' must be true or false, got {resolved['enabled']!r}")
    if resolved["episode_length"] is not None:
        resolved["episode_length"] = _integer(resolved["episode_length"], "episode_length", 2)
    for key in ("min_episodes", "window", "min_start_windows"):
        resolved[key] = _integer(resolved[key], key, 1)
    resolved["success_rate"] = _number(resolved["success_rate"], "success_rate", 0.0, 1.0)
    try:
        resolved["regimes"] = resolve_regime_params(resolved["regimes"])
    except ValueError as error:
        raise ValueError(f"{error} (under '{PARAMS_PREFIX}.regimes')") from None
    stages = resolved["stages"]
    if isinstance(stages, (str, Mapping)) or not stages:
        raise ValueError(f"parameter '{PARAMS_PREFIX}.stages' must be a non-empty list of stages, got {stages!r}")
    resolved["stages"] = [_resolve_stage(stage, i, i == len(stages) - 1) for i, stage in enumerate(stages)]
    return resolved


def _window_means(values: np.ndarray, length: int) -> np.ndarray:
    """Mean of ``values[s : s + length]`` for every ``s`` with a full window (NaN-free input)."""
    sums = np.concatenate(([0.0], np.cumsum(values)))
    return (sums[length:] - sums[:-length]) / length


def stage_starts(
    labels: np.ndarray,
    volatility: np.ndarray,
    first: int,
    last_start: int,
    episode_length: int,
    stages: list[dict[str, Any]],
    min_windows: int,
) -> list[np.ndarray]:
    """Eligible episode start bars per stage, from per-bar regime labels and realised volatility.

    A start ``s`` in ``[first, last_start]`` covers bars ``s .. s + episode_length - 1``. It is eligible
    when the share of those bars labelled with one of the stage's regimes reaches
    ``min_regime_share`` and their mean volatility is at most the ``max_volatility_quantile`` of all
    windows' means. A stage with fewer than ``min_windows`` eligible starts takes the
    ``min_windows`` best-matching ones (highest regime share, then lowest volatility), so short
    training windows (walk-forward folds) still have every stage.
    """
    starts = np.arange(first, last_start + 1)
    filled = np.where(
        np.isfinite(volatility), volatility, np.nanmedian(volatility) if np.isfinite(volatility).any() else 0.0
    )
    window_vol = _window_means(filled, episode_length)[starts]
    result = []
    for index, stage in enumerate(stages):
        in_regime = np.isin(labels, stage["regimes"]).astype(np.float64)
        share = _window_means(in_regime, episode_length)[starts]
        vol_bar = np.quantile(window_vol, stage["max_volatility_quantile"])
        eligible = starts[(share >= stage["min_regime_share"]) & (window_vol <= vol_bar)]
        if len(eligible) < min(min_windows, len(starts)):
            best = np.lexsort((window_vol, -share))[: min(min_windows, len(starts))]
            logger.warning(
                "curriculum stage %d (%s): %d window(s) meet its regime and volatility rules, fewer than "
                "min_start_windows=%d; using the %d best-matching windows",
                index,
                stage["name"],
                len(eligible),
                min_windows,
                len(best),
            )
            eligible = np.sort(starts[best])
        result.append(eligible)
    return result


def _missed_thresholds(stage: dict[str, Any], sharpe: float, rate: float) -> list[str]:
    """The thresholds of ``stage`` an episode with ``sharpe`` and win rate ``rate`` missed (NaN misses)."""
    missed = []
    if not (sharpe >= stage["min_sharpe"]):
        missed.append(f"sharpe {sharpe:.3f} < {stage['min_sharpe']}")
    if not (rate >= stage["min_win_rate"]):
        missed.append(f"win_rate {rate:.3f} < {stage['min_win_rate']}")
    return missed


class Curriculum(gym.Wrapper):
    """Curriculum over a training ``TradingEnvBase`` (see the module docstring)."""

    def __init__(self, env: gym.Env, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(env)
        base = trading_env(env, "the curriculum")
        if base.config.evaluation:
            raise ValueError("the curriculum wraps a training env only: this env runs a whole evaluation split")
        config = resolve_curriculum_params(params)
        self.config = config
        self.stages = config["stages"]
        self.episode_length = int(config["episode_length"] or base.config.episode_length)
        last_start = base.n_bars - 1 - self.episode_length
        if last_start < base.first_tradable_bar:
            raise ValueError(
                f"parameter '{PARAMS_PREFIX}.episode_length'={self.episode_length} does not fit the training env's "
                f"{base.n_bars - base.first_tradable_bar} tradable bars"
            )
        labels = bar_regimes(base.close_history, base.history_positions, config["regimes"])
        self.labels = np.array([label if label is not None else "" for label in labels], dtype=object)
        log_returns = pd.Series(np.log(base.close_history)).diff()
        self.volatility = log_returns.rolling(config["regimes"]["vol_window"]).std().to_numpy()[base.history_positions]
        self.starts = stage_starts(
            self.labels,
            self.volatility,
            base.first_tradable_bar,
            last_start,
            self.episode_length,
            self.stages,
            config["min_start_windows"],
        )
        self.market_slice = base.layout["features"]
        self.periods_per_year = float(base.periods_per_year)
        self._rng = np.random.default_rng()
        self.stage = 0
        self.steps = 0
        self.episodes = 0
        self.episodes_in_stage = 0
        self.recent: deque[bool] = deque(maxlen=config["window"])
        self.events: list[dict[str, Any]] = []
        self._unreported: list[dict[str, Any]] = []
        self.held_back_by = "no episode finished yet"
        self._returns: list[float] = []
        self._episode_steps = 0

    # ------------------------------------------------------------ episode

    @property
    def current(self) -> dict[str, Any]:
        return self.stages[self.stage]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        start = int(self._rng.choice(self.starts[self.stage]))
        options = {**(options or {}), "start_bar": start, "cost_multiplier": self.current["cost_multiplier"]}
        obs, info = self.env.reset(seed=seed, options=options)
        self._returns, self._episode_steps = [], 0
        return self._noisy(obs), {**info, "curriculum_stage": self.stage}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        self._episode_steps += 1
        self._returns.append(math.expm1(reward))
        truncated = truncated or self._episode_steps >= self.episode_length
        info = {**info, "curriculum_stage": self.stage}
        if terminated or truncated:
            self._finish_episode()
        return self._noisy(obs), reward, terminated, truncated, info

    def _noisy(self, obs: np.ndarray) -> np.ndarray:
        sigma = self.current["observation_noise"]
        if sigma > 0.0:
            obs = obs.copy()
            window = obs[self.market_slice]
            obs[self.market_slice] = window + self._rng.normal(0.0, sigma, size=window.shape).astype(obs.dtype)
        return obs

    # ------------------------------------------------------------ advancement

    def _finish_episode(self) -> None:
        returns = np.asarray(self._returns)
        sharpe = sharpe_ratio(returns, self.periods_per_year)
        rate = win_rate(returns)
        self.episodes += 1
        if self.stage == len(self.stages) - 1:
            self.held_back_by = "final stage reached"
            return
        stage = self.current
        missed = _missed_thresholds(stage, sharpe, rate)
        self.recent.append(not missed)
        self.episodes_in_stage += 1
        success_rate = sum(self.recent) / len(self.recent)
        last = f"last episode: sharpe {sharpe:.3f}, win_rate {rate:.3f}" + (
            f" (missed {', '.join(missed)})" if missed else ""
        )
        if self.episodes_in_stage < self.config["min_episodes"]:
            self.held_back_by = (
                f"episodes_in_stage {self.episodes_in_stage} < min_episodes {self.config['min_episodes']}; {last}"
            )
        elif len(self.recent) < self.config["window"]:
            self.held_back_by = (
                f"{len(self.recent)} episode(s) in the success window < window {self.config['window']}; {last}"
            )
        elif success_rate < self.config["success_rate"]:
            self.held_back_by = (
                f"recent success rate {success_rate:.2f} < success_rate {self.config['success_rate']} "
                f"(thresholds sharpe >= {stage['min_sharpe']}, win_rate >= {stage['min_win_rate']}); {last}"
            )
        else:
            self._advance(sharpe, rate, success_rate)

    def _advance(self, sharpe: float, rate: float, success_rate: float) -> None:
        event = {
            "step": self.steps,
            "episode": self.episodes,
            "from_stage": self.stage,
            "to_stage": self.stage + 1,
            "to_stage_name": self.stages[self.stage + 1]["name"],
            "episodes_in_stage": self.episodes_in_stage,
            "recent_success_rate": success_rate,
            "last_sharpe": None if math.isnan(sharpe) else sharpe,
            "last_win_rate": None if math.isnan(rate) else rate,
        }
        logger.info(
            "curriculum: stage %d -> %d (%s) at step %d after %d episode(s), recent success rate %.2f, "
            "last sharpe %.3f, win rate %.3f",
            event["from_stage"],
            event["to_stage"],
            event["to_stage_name"],
            self.steps,
            self.episodes_in_stage,
            success_rate,
            sharpe,
            rate,
        )
        self.stage += 1
        self.episodes_in_stage = 0
        self.recent.clear()
        self.held_back_by = "no episode finished in this stage yet"
        self.events.append(event)
        self._unreported.append(event)

    # ------------------------------------------------------------ reporting and state

    def report(self) -> dict[str, Any]:
        """Where the curriculum stands, and the stage changes since the previous report."""
        changes, self._unreported = self._unreported, []
        return {
            "stage": self.stage,
            "stage_name": self.current["name"],
            "episodes": self.episodes,
            "episodes_in_stage": self.episodes_in_stage,
            "recent_success_rate": (sum(self.recent) / len(self.recent)) if self.recent else None,
            "held_back_by": self.held_back_by,
            "changes": changes,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue in the same stage."""
        return {
            "stage": self.stage,
            "steps": self.steps,
            "episodes": self.episodes,
            "episodes_in_stage": self.episodes_in_stage,
            "recent": list(self.recent),
            "events": copy.deepcopy(self.events),
            "unreported": copy.deepcopy(self._unreported),
            "held_back_by": self.held_back_by,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not 0 <= int(state["stage"]) < len(self.stages):
            raise ValueError(
                f"curriculum state has stage {state['stage']}, this curriculum has {len(self.stages)} stages"
            )
        self.stage, self.steps, self.episodes = int(state["stage"]), int(state["steps"]), int(state["episodes"])
        self.episodes_in_stage = int(state["episodes_in_stage"])
        self.recent = deque(state["recent"], maxlen=self.config["window"])
        self.events = copy.deepcopy(list(state["events"]))
        self._unreported = copy.deepcopy(list(state["unreported"]))
        self.held_back_by = str(state["held_back_by"])
        self._rng.bit_generator.state = state["rng"]


def _curriculum_indices(vec_env: VecEnv | None) -> list[int]:
    if vec_env is None:
        return []
    return [i for i, wrapped in enumerate(vec_env.env_is_wrapped(Curriculum)) if wrapped]


def curriculum_entry(vec_env: VecEnv | None) -> dict[str, Any]:
    """``curriculum/*`` history keys of the (first) curriculum env of ``vec_env``; ``{}`` without one.

    Numbers (stage, episodes, success rate) reach MLflow through the metrics history; the stage
    changes (``curriculum/changes``) and the reason for staying (``curriculum/held_back_by``) stay in
    the training history JSON.
    """
    indices = _curriculum_indices(vec_env)
    if vec_env is None or not indices:
        return {}
    report = vec_env.env_method("report", indices=indices[0])[0]
    return {f"curriculum/{key}": value for key, value in report.items()}


def curriculum_states(vec_env: VecEnv | None) -> dict[int, dict[str, Any]]:
    """Each curriculum env's ``state_dict`` by env index (for a resume checkpoint)."""
    if vec_env is None:
        return {}
    return {i: vec_env.env_method("state_dict", indices=i)[0] for i in _curriculum_indices(vec_env)}


def load_curriculum_states(vec_env: VecEnv | None, states: Mapping[int, Mapping[str, Any]]) -> None:
    """Put saved curriculum states back; a saved state without a curriculum env to take it is an error.
    Env indices may come back as strings (the resume checkpoint's state is JSON)."""
    states = {int(index): state for index, state in states.items()}
    indices = _curriculum_indices(vec_env)
    missing = sorted(set(states) - set(indices))
    if missing:
        raise ValueError(
            f"the resume checkpoint holds curriculum state for env(s) {missing}, but the training env has no "
            "curriculum there: resume with the same sac_icm.agent.curriculum settings"
        )
    if vec_env is None:  # then ``indices`` is empty, so (checked above) ``states`` is too
        return
    for i, state in states.items():
        vec_env.env_method("load_state_dict", state, indices=i)
