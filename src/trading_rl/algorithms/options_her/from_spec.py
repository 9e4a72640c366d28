"""The options_her phase's agent from an env spec: its parameter section (``options_her``), and the
hierarchical agent trained, continued and evaluated on a spec's splits. The options_her phase and the
walk-forward's options agent both train it here."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3 import SAC

from trading_rl.algorithms.options_her.controller import ControllerConfig
from trading_rl.algorithms.options_her.her import (
    FastHerReplayBuffer,
    HerParams,
    goal_achievement_against_control,
)
from trading_rl.algorithms.options_her.hierarchical import (
    HierarchicalAgent,
    build_hierarchical_agent,
    rollout_agent,
    train_hierarchical_agent,
)
from trading_rl.algorithms.options_her.option_env import OptionsCallback, OptionVecEnv
from trading_rl.algorithms.options_her.options import OPTION_NAMES, OptionParams
from trading_rl.algorithms.sac_icm.training_env import wrap_training_env
from trading_rl.config import Overlay, Section, setting
from trading_rl.envs.continuous import EnvConfig
from trading_rl.evaluation.metrics.baselines import evaluate_baselines
from trading_rl.evaluation.metrics.metrics import json_ready, return_moments
from trading_rl.evaluation.metrics.report import attributed_metrics
from trading_rl.seeding import SeedRole, trial_seed
from trading_rl.training.curriculum import CurriculumParams
from trading_rl.training.params import SacParams

PARAMS_PREFIX = "options_her"


# The option policy's own SAC (its networks come from the sac_icm model it warm-starts from): HER
# samples only finished episodes, so learning starts after more than one 500-bar episode; the
# buffer and batch are the seeds', not the validated sac_icm learner's.
OPTIONS_SAC = SacParams(buffer_size=100_000, learning_starts=1000, batch_size=256)


@dataclass(frozen=True, kw_only=True)
class OptionsSectionParams(OptionParams):
    """``options_her.options``: the option rules, or ``enabled: false`` for a flat low-level SAC."""

    enabled: bool = True

    def rules(self) -> OptionParams | None:
        """The option rules the agent runs, ``None`` when the options are off."""
        if not self.enabled:
            return None
        return OptionParams(**{f.name: getattr(self, f.name) for f in fields(OptionParams)})


@dataclass(frozen=True, kw_only=True)
class OptionsHerTrainingParams(Section):
    # 0, the neutral setting: the agent is the warm-started hierarchy, which trades as its source.
    # Trained 5,000 steps (conf/seeds) it kept 0.71 of its source's capture on the fast control
    # (paired -0.17 [-0.85, 0.10], 10 runs; docs/results.md "The chain on the controls").
    total_timesteps: int = setting(0, interval="[0, inf)")
    log_freq: int = setting(1000, interval="[1, inf)")


@dataclass(frozen=True, kw_only=True)
class OptionsHerEvaluationParams(Section):
    split: str = setting("validation", choices=("train", "validation", "test"))
    # 50 goal episodes: success rates move in steps of 0.02, not 0.2.
    goal_episodes: int = setting(50, interval="[1, inf)")


@dataclass(frozen=True, kw_only=True)
class OptionGateParams(Section):
    """The option-collapse gates (docs/options_her.md, "Gates")."""

    min_usage: float = 0.10
    max_usage: float = 0.40
    min_avg_duration: float = 5.0
    instant_fraction: float = 0.5
    fail_on_gate: bool = False


@dataclass(frozen=True, kw_only=True)
class OptionsHerParams(Section):
    """The ``options_her`` section; these defaults, the option and controller values from seed
    003's options config, are its one home (conf/ states only what differs). ``env_overrides`` are
    env config keys: the options constrain the direction of every raw action, so the env's action
    smoothing (which would mix in the previous option's actions) is off, and shorting is on for
    OpenShort. ``sac`` is the low-level SAC (the keys and ranges of ``sac_icm.agent.sac``; its
    networks come from the sac_icm model it warm-starts from). ``evaluation.goal_episodes``: each
    also run as a goal-agnostic control (targets shuffled)."""

    device: str = "auto"
    training: OptionsHerTrainingParams = setting(OptionsHerTrainingParams())
    evaluation: OptionsHerEvaluationParams = setting(OptionsHerEvaluationParams())
    gates: OptionGateParams = setting(OptionGateParams())
    # Smoothing off (an option's direction rule must not mix in the previous option's actions);
    # shorting as the source learned it, so the warm-started hierarchy trades as its source.
    env_overrides: Overlay[EnvConfig] = setting(Overlay(EnvConfig, {"smoothing_window": 1}))
    options: OptionsSectionParams = setting(OptionsSectionParams())
    controller: ControllerConfig = setting(ControllerConfig())
    her: HerParams = setting(HerParams())
    sac: SacParams = setting(OPTIONS_SAC)
    # The training env's curriculum, as sac_icm.agent.curriculum (the same keys, stages and rule).
    curriculum: CurriculumParams = setting(CurriculumParams())

    def goal_middle(self) -> float:
        """The middle of HER's goal range: the target of the phase's deterministic runs."""
        return 0.5 * (self.her.goal_low + self.her.goal_high)


def _training_env(env_spec, params: OptionsHerParams) -> gym.Env:
    """The training split's env, inside the curriculum when ``curriculum.enabled``."""
    return wrap_training_env(env_spec.make_env("train", **params.env_overrides), params.curriculum, None)


def train_from_spec(
    env_spec,
    source: SAC,
    params: OptionsHerParams,
    seed: int,
    device: str = "cpu",
    timesteps: int | None = None,
    metrics_callback=None,
):
    """Build, warm-start and train the phase's agent on ``env_spec``'s training split
    (``timesteps`` env steps, default ``training.total_timesteps``).

    The options measure their trend from a zero return, placed by the spec's feature scaler.
    Returns ``(agent, history, training_option_stats)``; the last is ``None`` without options.
    """
    her = params.her if params.her.enabled else None
    option_params = params.options.rules()
    trend_zero = env_spec.scaled_zero(option_params.signals.trend_feature) if option_params else 0.0

    def make_train_env() -> gym.Env:
        return _training_env(env_spec, params)

    agent, venv = build_hierarchical_agent(
        source,
        make_train_env,
        option_params,
        params.controller,
        her,
        params.sac,
        seed,
        device,
        dict(params.env_overrides),
        trend_zero,
    )
    training = params.training
    total = training.total_timesteps if timesteps is None else timesteps
    history = train_hierarchical_agent(agent, venv, total, training.log_freq, metrics_callback)
    stats = venv.stats() if isinstance(venv, OptionVecEnv) else None
    return agent, history, stats


def continue_on_spec(agent: HierarchicalAgent, env_spec, params: OptionsHerParams, seed: int, timesteps: int) -> None:
    """Fine-tune ``agent`` on another spec's training split (the walk-forward's next fold): the
    controller, the SAC and its replay buffer carry over. HER's unfinished episode is closed first,
    so no relabelled goal spans the two windows."""
    low_level = agent.low_level
    if isinstance(low_level.replay_buffer, FastHerReplayBuffer):
        with warnings.catch_warnings():  # SB3 warns that this is what it does: intended here
            warnings.simplefilter("ignore", UserWarning)
            low_level.replay_buffer.truncate_last_trajectory()
    venv = agent.make_vec_env(lambda: _training_env(env_spec, params), deterministic=False, collect=True, seed=seed)
    low_level.set_env(venv)
    callback = OptionsCallback(venv.learner, venv) if isinstance(venv, OptionVecEnv) else None
    low_level.learn(total_timesteps=int(timesteps), callback=callback, reset_num_timesteps=False, progress_bar=False)


def goal_episode_targets(params: OptionsHerParams, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The goal evaluation's targets, one per episode (episode ``i`` starts from the env seed
    ``trial_seed(seed, SeedRole.GOAL_EPISODES, i)``), and the same targets shuffled: what the
    goal-agnostic control is shown. Shared with the scripted references of ``benchmarks/her_control.py``."""
    rng = np.random.default_rng(seed)
    targets = rng.uniform(params.her.goal_low, params.her.goal_high, size=int(params.evaluation.goal_episodes))
    return targets, rng.permutation(targets)


def evaluate_from_spec(agent: HierarchicalAgent, env_spec, params: OptionsHerParams, seed: int) -> dict[str, Any]:
    """Validation metrics next to the baselines, option usage and goal achievement.

    The full-split run aims at the middle of the goal range when HER is on. Goal achievement uses
    ``goal_episodes`` episodes with random starts on the same split, each with a target drawn from
    the goal range (the same targets for every agent with the same seed). Each episode runs twice
    from the same start: once shown its target, once shown another episode's target (the targets
    shuffled) — the goal-agnostic control, scored against the true target. Without HER the agent
    sees no target, and both runs coincide.
    """
    overrides = params.env_overrides
    her = params.her
    split = params.evaluation.split

    def make_eval_env(**extra: Any) -> gym.Env:
        """``extra``: env settings over the phase's (the baselines' short-allowed oracle on a synthetic market)."""
        return env_spec.make_env(split, evaluation=True, **{**overrides, **extra})

    def make_episode_env() -> gym.Env:
        return env_spec.make_env(split, evaluation=False, **overrides)

    rollout, eval_stats = rollout_agent(agent, make_eval_env, seed, desired_goal=params.goal_middle())
    metrics, _ = attributed_metrics(rollout, make_eval_env, env_spec.periods_per_year, seed)
    baselines = evaluate_baselines(make_eval_env, env_spec.periods_per_year, seed)

    targets, shown_to_control = goal_episode_targets(params, seed)

    def final_return(episode: int, shown_target: float) -> float:
        episode_rollout, _ = rollout_agent(
            agent, make_episode_env, trial_seed(seed, SeedRole.GOAL_EPISODES, episode), desired_goal=shown_target
        )
        start_equity = float(episode_rollout["equity"].iloc[0]) / (1.0 + float(episode_rollout["return"].iloc[0]))
        return float(episode_rollout["equity"].iloc[-1]) / start_equity - 1.0

    finals = np.array([final_return(episode, float(target)) for episode, target in enumerate(targets)])
    if agent.her is not None:
        controls = np.array([final_return(episode, float(shown)) for episode, shown in enumerate(shown_to_control)])
    else:
        controls = finals
    goals = goal_achievement_against_control(finals, controls, targets, her.tolerance)
    option_share = (
        rollout["option"].value_counts(normalize=True).reindex(OPTION_NAMES, fill_value=0.0).to_dict()
        if "option" in rollout
        else None
    )
    return {
        "split": split,
        "metrics": metrics,
        "return_moments": json_ready(return_moments(rollout["return"].to_numpy())),
        "baselines": baselines,
        "goals": goals,
        "option_share": option_share,
        "option_stats": eval_stats,
    }
