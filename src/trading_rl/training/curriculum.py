"""A progressive curriculum over the real training bars (docs/algorithms.md, "Curriculum over the training bars").

A daily P&L reward is sparse and noisy, and realistic costs punish the random trades of early
exploration. The curriculum starts the agent on the easiest stretches of its *own training split* —
windows of calm, trending bars, with a fraction of the costs — and moves it to harder windows and
full costs only once it does well where it is. No synthetic market is involved.

- **Stages** come from the training env's causal regime labels (``evaluation.validation.regimes.label_regimes``
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
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3.common.vec_env import VecEnv

from trading_rl.config import ConfigError, Overlay, Section, setting
from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics.metrics import sharpe_ratio, win_rate
from trading_rl.evaluation.validation.regimes import REGIMES, RegimeParams, bar_regimes

logger = logging.getLogger(__name__)

PARAMS_PREFIX = "sac_icm.agent.curriculum"


def _regimes_problem(regimes: str | list[str]) -> str | None:
    if regimes == "all" or (not isinstance(regimes, str) and regimes and all(r in REGIMES for r in regimes)):
        return None
    return f"'all' or a non-empty list of {list(REGIMES)}"


@dataclass(frozen=True, kw_only=True)
class StageParams(Section):
    """One stage (its defaults: the last, realistic stage). ``min_sharpe`` / ``min_win_rate`` are
    ``null`` on the last stage only (it has no thresholds)."""

    name: str | None = None  # null: stage_<index>
    regimes: str | list[str] = setting("all", check=_regimes_problem)
    min_regime_share: float = setting(0.0, interval="[0, 1]")
    max_volatility_quantile: float = setting(1.0, interval="[0, 1]")
    cost_multiplier: float = setting(1.0, interval="[0, inf)")
    observation_noise: float = setting(0.0, interval="[0, inf)")
    min_sharpe: float | None = None
    min_win_rate: float | None = setting(None, interval="[0, inf)")

    def regime_list(self) -> list[str]:
        """The stage's regimes, ``all`` spelt out."""
        return list(REGIMES) if self.regimes == "all" else list(self.regimes)


@dataclass(frozen=True, kw_only=True)
class CurriculumParams(Section):
    """``sac_icm.agent.curriculum`` (and ``options_her.curriculum``): episodes start in windows of the
    training split picked by causal regime and volatility, with scaled costs; the agent advances when
    at least ``success_rate`` of the last ``window`` episodes meet the stage's Sharpe and win-rate
    thresholds, after ``min_episodes`` in the stage. ``regimes``: ``label_regimes`` parameters over
    regime_validation's defaults (an ``Overlay``, written as given so identities stay as they were)."""

    enabled: bool = False
    episode_length: int | None = setting(250, interval="[2, inf)")  # null: the env's episode_length
    min_episodes: int = setting(5, interval="[1, inf)")
    window: int = setting(5, interval="[1, inf)")
    success_rate: float = setting(0.8, interval="[0, 1]")
    min_start_windows: int = setting(10, interval="[1, inf)")  # fewer eligible windows: the best-matching ones
    regimes: Overlay[RegimeParams] = setting(Overlay(RegimeParams))
    # From easy to realistic (docs/algorithms.md): Sharpe 0.3 -> 0.7, win rate 0.5 -> 0.45.
    stages: list[StageParams] = setting(
        [
            StageParams(
                name="calm_bull",
                regimes=["bull"],
                min_regime_share=0.5,
                max_volatility_quantile=0.5,
                cost_multiplier=0.1,
                observation_noise=0.0,
                min_sharpe=0.3,
                min_win_rate=0.5,
            ),
            StageParams(
                name="bull_and_sideways",
                regimes=["bull", "sideways"],
                min_regime_share=0.5,
                max_volatility_quantile=0.75,
                cost_multiplier=0.25,
                observation_noise=0.0,
                min_sharpe=0.5,
                min_win_rate=0.45,
            ),
            StageParams(
                name="no_crisis",
                regimes=["bull", "sideways", "bear"],
                min_regime_share=0.5,
                max_volatility_quantile=0.9,
                cost_multiplier=0.5,
                observation_noise=0.05,
                min_sharpe=0.6,
                min_win_rate=0.45,
            ),
            StageParams(
                name="all_regimes",
                regimes="all",
                min_regime_share=0.0,
                max_volatility_quantile=1.0,
                cost_multiplier=0.75,
                observation_noise=0.05,
                min_sharpe=0.7,
                min_win_rate=0.45,
            ),
            StageParams(
                name="realistic",
                regimes="all",
                min_regime_share=0.0,
                max_volatility_quantile=1.0,
                cost_multiplier=1.0,
                observation_noise=0.0,
                min_sharpe=None,
                min_win_rate=None,
            ),
        ],
        check=lambda stages: None if stages else "a non-empty list of stages",
    )

    def validate(self, prefix: str) -> None:
        for index, stage in enumerate(self.stages[:-1]):
            for key in ("min_sharpe", "min_win_rate"):
                if getattr(stage, key) is None:
                    raise ConfigError(
                        f"parameter '{prefix}.stages[{index}].{key}' is needed: only the last stage has no thresholds"
                    )


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
    stages: list[StageParams],
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
        in_regime = np.isin(labels, stage.regime_list()).astype(np.float64)
        share = _window_means(in_regime, episode_length)[starts]
        vol_bar = np.quantile(window_vol, stage.max_volatility_quantile)
        eligible = starts[(share >= stage.min_regime_share) & (window_vol <= vol_bar)]
        if len(eligible) < min(min_windows, len(starts)):
            best = np.lexsort((window_vol, -share))[: min(min_windows, len(starts))]
            logger.warning(
                "curriculum stage %d (%s): %d window(s) meet its regime and volatility rules, fewer than "
                "min_start_windows=%d; using the %d best-matching windows",
                index,
                stage_name(stages, index),
                len(eligible),
                min_windows,
                len(best),
            )
            eligible = np.sort(starts[best])
        result.append(eligible)
    return result


def stage_name(stages: list[StageParams], index: int) -> str:
    """The stage's name, ``stage_<index>`` when it has none."""
    return stages[index].name or f"stage_{index}"


def _missed_thresholds(stage: StageParams, sharpe: float, rate: float) -> list[str]:
    """The thresholds of ``stage`` an episode with ``sharpe`` and win rate ``rate`` missed (NaN misses)."""
    assert stage.min_sharpe is not None and stage.min_win_rate is not None, "the last stage has no thresholds"
    missed = []
    if not (sharpe >= stage.min_sharpe):
        missed.append(f"sharpe {sharpe:.3f} < {stage.min_sharpe}")
    if not (rate >= stage.min_win_rate):
        missed.append(f"win_rate {rate:.3f} < {stage.min_win_rate}")
    return missed


class Curriculum(gym.Wrapper):
    """Curriculum over a training ``TradingEnvBase`` (see the module docstring)."""

    def __init__(self, env: gym.Env, params: CurriculumParams) -> None:
        super().__init__(env)
        base = trading_env(env, "the curriculum")
        if base.config.evaluation:
            raise ValueError("the curriculum wraps a training env only: this env runs a whole evaluation split")
        self.config = params
        self.stages = params.stages
        self.episode_length = int(params.episode_length or base.config.episode_length)
        last_start = base.n_bars - 1 - self.episode_length
        if last_start < base.first_tradable_bar:
            raise ValueError(
                f"parameter '{PARAMS_PREFIX}.episode_length'={self.episode_length} does not fit the training env's "
                f"{base.n_bars - base.first_tradable_bar} tradable bars"
            )
        regimes = params.regimes.over_defaults
        labels = bar_regimes(base.close_history, base.history_positions, regimes)
        self.labels = np.array([label if label is not None else "" for label in labels], dtype=object)
        log_returns = pd.Series(np.log(base.close_history)).diff()
        self.volatility = log_returns.rolling(regimes.vol_window).std().to_numpy()[base.history_positions]
        self.starts = stage_starts(
            self.labels,
            self.volatility,
            base.first_tradable_bar,
            last_start,
            self.episode_length,
            self.stages,
            params.min_start_windows,
        )
        self.market_slice = base.layout["features"]
        self.periods_per_year = float(base.periods_per_year)
        self._rng = np.random.default_rng()
        self.stage = 0
        self.steps = 0
        self.episodes = 0
        self.episodes_in_stage = 0
        self.recent: deque[bool] = deque(maxlen=params.window)
        self.events: list[dict[str, Any]] = []
        self._unreported: list[dict[str, Any]] = []
        self.held_back_by = "no episode finished yet"
        self._returns: list[float] = []
        self._episode_steps = 0

    # ------------------------------------------------------------ episode

    @property
    def current(self) -> StageParams:
        return self.stages[self.stage]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        start = int(self._rng.choice(self.starts[self.stage]))
        options = {**(options or {}), "start_bar": start, "cost_multiplier": self.current.cost_multiplier}
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
        sigma = self.current.observation_noise
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
        if self.episodes_in_stage < self.config.min_episodes:
            self.held_back_by = (
                f"episodes_in_stage {self.episodes_in_stage} < min_episodes {self.config.min_episodes}; {last}"
            )
        elif len(self.recent) < self.config.window:
            self.held_back_by = (
                f"{len(self.recent)} episode(s) in the success window < window {self.config.window}; {last}"
            )
        elif success_rate < self.config.success_rate:
            self.held_back_by = (
                f"recent success rate {success_rate:.2f} < success_rate {self.config.success_rate} "
                f"(thresholds sharpe >= {stage.min_sharpe}, win_rate >= {stage.min_win_rate}); {last}"
            )
        else:
            self._advance(sharpe, rate, success_rate)

    def _advance(self, sharpe: float, rate: float, success_rate: float) -> None:
        event = {
            "step": self.steps,
            "episode": self.episodes,
            "from_stage": self.stage,
            "to_stage": self.stage + 1,
            "to_stage_name": stage_name(self.stages, self.stage + 1),
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
            "stage_name": stage_name(self.stages, self.stage),
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
        self.recent = deque(state["recent"], maxlen=self.config.window)
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
