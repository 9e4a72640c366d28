"""Hierarchical agent: option controller on top of an option-conditioned SB3 SAC.

The option layer (``algorithms.options_her.option_env``) wraps the env; the low-level SAC acts in it.

The SAC is trained by SB3's own ``learn`` loop on ``OptionVecEnv`` (with ``FastHerReplayBuffer``
when HER is on); the controller trains from ``OptionsCallback`` every ``train_freq`` env steps.

Warm start (``algorithms.options_her.widening``): the low-level SAC copies every weight of the ``sac_icm`` model;
the first ``Linear`` of the actor and of both critics (and target critics) is widened with
zero-initialised columns for the new inputs (option one-hot, goals), kept as a separate product so
that before any training its action equals the SAC+ICM action on the same state bit for bit.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import pandas as pd
import torch as th
from gymnasium.spaces import flatdim
from stable_baselines3 import SAC
from stable_baselines3.common.torch_layers import CombinedExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from trading_rl.algorithms.options_her.controller import ControllerConfig, OptionLearner
from trading_rl.algorithms.options_her.her import FastHerReplayBuffer, HerParams, goal_view, replay_buffer_kwargs
from trading_rl.algorithms.options_her.option_env import OptionsCallback, OptionVecEnv, observation_columns
from trading_rl.algorithms.options_her.options import OPTION_NAMES, OptionParams, TradingOptions
from trading_rl.algorithms.options_her.widening import WidenedSACPolicy, warm_start
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics.rollout import StepReturns
from trading_rl.training.loop import progress_bar_enabled
from trading_rl.training.params import SacParams
from trading_rl.training.streaming import with_episode_rewards


@dataclass
class HierarchicalAgent:
    """Option-conditioned SAC plus (when options are on) the controller and the option settings."""

    low_level: SAC
    learner: OptionLearner | None
    option_params: OptionParams | None
    her: HerParams | None
    env_overrides: dict[str, Any] = field(default_factory=dict)
    # The learner's P&L reward scale (the warm-start source's), which HER's reward keeps.
    reward_scale: float = 1.0
    # Where a zero return of the options' trend feature lands in scaled units (``TradingOptions``).
    trend_zero: float = 0.0

    @property
    def uses_options(self) -> bool:
        return self.learner is not None

    def make_vec_env(self, make_env: Callable[[], gym.Env], deterministic: bool, collect: bool, seed: int) -> VecEnv:
        """The VecEnv the low-level SAC acts in: goal view (HER) and option layer as configured."""
        her = self.her

        def build() -> gym.Env:
            env = make_env()
            return goal_view(env, her, self.reward_scale) if her is not None else env

        venv = DummyVecEnv([build])
        if self.learner is None:
            return venv
        env = trading_env(venv.envs[0], "the trading options")
        assert self.option_params is not None, "an agent with a controller has options"
        options = TradingOptions(
            env.layout, self.option_params, allow_short=env.config.allow_short, trend_zero=self.trend_zero
        )
        return OptionVecEnv(venv, options, self.learner, deterministic=deterministic, collect=collect, seed=seed)

    def rollout(self, env_spec, split: str, seed: int) -> pd.DataFrame:
        """One deterministic full-split episode with the env settings the agent trained with, aiming
        at the middle of the goal range when HER is on (how the walk-forward scores it)."""
        goal = 0.5 * (self.her.goal_low + self.her.goal_high) if self.her is not None else None
        rows, _ = rollout_agent(
            self, lambda: env_spec.make_env(split, evaluation=True, **self.env_overrides), seed, desired_goal=goal
        )
        return rows

    def save(self) -> bytes:
        """Its saved form (``to_bytes``): what a walk-forward chain keeps of it."""
        return self.to_bytes()

    def episode_rewards(self) -> list[float]:
        """Rewards of the low-level SAC's last (up to 100) finished training episodes."""
        return [info["r"] for info in self.low_level.ep_info_buffer or [] if "r" in info]

    def to_bytes(self) -> bytes:
        """One zip: the SB3 SAC zip, the controller state (torch) and the settings (JSON)."""
        sac_bytes = io.BytesIO()
        self.low_level.save(sac_bytes)
        settings = {
            "option_params": self.option_params.to_dict() if self.option_params is not None else None,
            "her": self.her.to_dict() if self.her is not None else None,
            "env_overrides": self.env_overrides,
            "reward_scale": self.reward_scale,
            "trend_zero": self.trend_zero,
        }
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
            zipped.writestr("low_level_sac.zip", sac_bytes.getvalue())
            zipped.writestr("settings.json", json.dumps(settings))
            if self.learner is not None:
                controller = io.BytesIO()
                th.save(self.learner.state(), controller)
                zipped.writestr("controller.pt", controller.getvalue())
        return archive.getvalue()

    @classmethod
    def from_bytes(cls, raw: bytes, device: str = "cpu") -> HierarchicalAgent:
        with zipfile.ZipFile(io.BytesIO(raw)) as zipped:
            settings = json.loads(zipped.read("settings.json"))
            # Acting needs no replay buffer, and HER's would need a live env: load with a minimal one.
            low_level = SACWithICM.load(
                io.BytesIO(zipped.read("low_level_sac.zip")),
                device=device,
                custom_objects={"replay_buffer_class": None, "replay_buffer_kwargs": {}, "buffer_size": 1},
            )
            learner = None
            if "controller.pt" in zipped.namelist():
                state = th.load(io.BytesIO(zipped.read("controller.pt")), map_location=device, weights_only=True)
                learner = OptionLearner.from_state(state, device=device)
        # The settings were checked when the agent was configured; they are read back as written.
        options, her = settings["option_params"], settings["her"]
        return cls(
            low_level,
            learner,
            OptionParams.from_saved(options) if options is not None else None,
            HerParams(**her) if her is not None else None,
            settings["env_overrides"],
            # Agents saved before these settings existed used scale 1 for HER and the median reference.
            float(settings.get("reward_scale", 1.0)),
            float(settings.get("trend_zero", 0.0)),
        )


def build_hierarchical_agent(
    source: SAC,
    make_train_env: Callable[[], gym.Env],
    option_params: OptionParams | None,
    controller: ControllerConfig,
    her: HerParams | None,
    sac: SacParams,
    seed: int,
    device: str = "cpu",
    env_overrides: dict[str, Any] | None = None,
    trend_zero: float = 0.0,
) -> tuple[HierarchicalAgent, VecEnv]:
    """A warm-started hierarchical agent and the training VecEnv it is bound to.

    ``option_params=None`` leaves the options out (plain option-free SAC fine-tuning, for A/B runs);
    ``her=None`` leaves HER out. The network sizes and the P&L reward scale are the source's, with
    or without HER, so the copied critic and entropy coefficient stay calibrated for the P&L part.
    """
    learner = None
    if option_params is not None:
        probe = trading_env(make_train_env(), "the option learner")
        learner = OptionLearner(probe.layout.dim, len(OPTION_NAMES), controller, seed, device)
        learner.prefer(OPTION_NAMES.index(controller.warm_start_option), controller.warm_start_margin)
    reward_scale = float(getattr(source, "reward_scale", 1.0))
    agent = HierarchicalAgent(
        None,  # type: ignore[arg-type]  # the low-level SAC needs this agent's VecEnv, so it is set below
        learner,
        option_params,
        her,
        dict(env_overrides or {}),
        reward_scale,
        float(trend_zero),
    )
    venv = agent.make_vec_env(make_train_env, deterministic=False, collect=True, seed=seed)
    source_obs_dim = flatdim(source.observation_space)
    policy_kwargs = {
        "net_arch": copy.deepcopy(source.policy_kwargs.get("net_arch")),
        "activation_fn": source.policy_kwargs.get("activation_fn", th.nn.ReLU),
        "carried_columns": observation_columns(venv.observation_space, source_obs_dim).tolist(),
    }
    if isinstance(venv.observation_space, gym.spaces.Dict):
        policy_kwargs["features_extractor_class"] = CombinedExtractor  # as SB3's MultiInputPolicy
    buffer: dict[str, Any] = (
        {}
        if her is None
        else {"replay_buffer_class": FastHerReplayBuffer, "replay_buffer_kwargs": replay_buffer_kwargs(her)}
    )
    # The learner scales the P&L reward it samples by the source's scale, as SAC+ICM did (without
    # curiosity). With HER the goal view's reward already carries the scaled P&L next to the
    # unscaled goal term (relabelled goals recompute it), so the learner takes it as it is.
    low_level = SACWithICM(
        WidenedSACPolicy,
        venv,
        icm=None,
        reward_scale=1.0 if her is not None else reward_scale,
        **buffer,
        policy_kwargs=policy_kwargs,
        seed=seed,
        device=device,
        verbose=0,
        **sac.to_dict(),
    )
    assert isinstance(low_level.policy, WidenedSACPolicy), "built with WidenedSACPolicy above"
    warm_start(source.policy, low_level.policy)
    if source.log_ent_coef is not None and low_level.log_ent_coef is not None:
        with th.no_grad():
            low_level.log_ent_coef.copy_(source.log_ent_coef.detach().to(low_level.log_ent_coef.device))
    agent.low_level = low_level
    return agent, venv


def train_hierarchical_agent(
    agent: HierarchicalAgent, venv: VecEnv, total_timesteps: int, log_freq: int = 1000, metrics_callback=None
) -> list[dict[str, float]]:
    """SB3's ``learn`` on the option VecEnv; returns the option monitoring history (empty without options).
    ``metrics_callback(metrics, step)`` gets each history row and each finished episode's reward."""
    callback = None
    if isinstance(venv, OptionVecEnv):
        callback = OptionsCallback(venv.learner, venv, log_freq, metrics_callback)
    callbacks = with_episode_rewards(callback, metrics_callback)
    agent.low_level.learn(total_timesteps=int(total_timesteps), callback=callbacks, progress_bar=progress_bar_enabled())
    return callback.history if callback is not None else []


def rollout_agent(
    agent: HierarchicalAgent, make_env: Callable[[], gym.Env], seed: int, desired_goal: float | None = None
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """One deterministic episode; rows like ``evaluation.metrics.rollout.run_episode`` plus the active option.

    Returns the rollout and the option statistics of the episode (``None`` without options).
    """
    venv = agent.make_vec_env(make_env, deterministic=True, collect=False, seed=seed)
    venv.seed(seed)
    if desired_goal is not None:
        venv.set_options([{"desired_goal": float(desired_goal)}])
    obs = venv.reset()
    step_return = StepReturns(venv.unwrapped.reset_infos[0])
    rows: list[dict[str, Any]] = []
    done = False
    while not done:
        # VecEnvObs admits tuples; these envs observe a Box or a Dict.
        action, _ = agent.low_level.predict(obs, deterministic=True)  # type: ignore[arg-type]
        obs, reward, dones, infos = venv.step(action)
        info = dict(infos[0])
        info.pop("terminal_observation", None)
        info.pop("TimeLimit.truncated", None)
        done = bool(dones[0])
        info.update(step=len(rows), reward=float(reward[0]), **{"return": step_return(info)})
        rows.append(info)
    stats = venv.stats() if isinstance(venv, OptionVecEnv) else None
    return pd.DataFrame(rows), stats
