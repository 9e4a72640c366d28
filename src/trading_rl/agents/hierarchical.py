"""Hierarchical agent: option controller on top of an option-conditioned SB3 SAC.

Data flow per env step (all envs of a ``VecEnv`` at once, option state in arrays indexed by env):

1. the low-level SAC sees the env observation with the active option's one-hot appended (inside the
   ``observation`` entry when HER's Dict view is used) and outputs an action in [-1, 1];
2. ``OptionVecEnv`` scales and constrains it by the active option and steps the env;
3. the option's step counter and log return grow; its termination probability on the new
   observation is sampled (0 before the minimum duration, 1 at the hard timeout or episode end);
4. a finished option becomes one controller transition (start state, initiation mask, option,
   log return over the option) and the controller picks the next option among those whose
   initiation set holds.

The SAC is trained by SB3's own ``learn`` loop on ``OptionVecEnv`` (with ``FastHerReplayBuffer``
when HER is on); the controller trains from ``OptionsCallback`` every ``train_freq`` env steps.

Warm start (``agents.widening``): the low-level SAC copies every weight of the ``sac_icm`` model;
the first ``Linear`` of the actor and of both critics (and target critics) is widened with
zero-initialised columns for the new inputs (option one-hot, goals), kept as a separate product so
that before any training its action equals the SAC+ICM action on the same state bit for bit.
"""

from __future__ import annotations

import copy
import io
import json
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import torch as th
from gymnasium.spaces import flatdim
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.torch_layers import CombinedExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper

from trading_rl.agents.controller import ControllerConfig, OptionLearner
from trading_rl.agents.her import FastHerReplayBuffer, goal_view, replay_buffer_kwargs
from trading_rl.agents.options import OPTION_NAMES, WAIT, TradingOptions
from trading_rl.agents.sac_icm import DEFAULT_PARAMS as SAC_ICM_DEFAULT_PARAMS
from trading_rl.agents.streaming import with_episode_rewards
from trading_rl.agents.training import progress_bar_enabled
from trading_rl.agents.widening import WidenedSACPolicy, warm_start
from trading_rl.envs.continuous import trading_env

# ---------------------------------------------------------------------------------------------
# observation plumbing


def base_observation(obs):
    """The env's own observation inside a (possibly Dict) observation."""
    return obs["observation"] if isinstance(obs, dict) else obs


def augmented_space(space: gym.Space, n_options: int) -> gym.Space:
    """``space`` with ``n_options`` one-hot entries appended to the (inner) observation Box."""
    if isinstance(space, gym.spaces.Dict):
        spaces = dict(space.spaces)
        spaces["observation"] = augmented_space(spaces["observation"], n_options)
        return gym.spaces.Dict(spaces)
    dim = flatdim(space)
    return gym.spaces.Box(-np.inf, np.inf, shape=(dim + n_options,), dtype=np.float32)


def with_one_hot(obs, options: np.ndarray, n_options: int):
    """Append the one-hot of ``options`` (one per row) to the observation (batch)."""
    base = base_observation(obs)
    one_hot = np.zeros((len(options), n_options), dtype=np.float32)
    one_hot[np.arange(len(options)), options] = 1.0
    augmented = np.concatenate([np.asarray(base, dtype=np.float32).reshape(len(options), -1), one_hot], axis=1)
    if isinstance(obs, dict):
        return {**obs, "observation": augmented}
    return augmented


def observation_columns(space: gym.Space, obs_dim: int) -> np.ndarray:
    """Positions of the env observation's ``obs_dim`` values in the flattened policy input.

    SB3 flattens a Dict observation by concatenating its entries in ``space.spaces`` order (its
    ``CombinedExtractor``); a Box is used as it is, original values first.
    """
    if not isinstance(space, gym.spaces.Dict):
        return np.arange(obs_dim)
    offset = 0
    for key, sub in space.spaces.items():
        if key == "observation":
            return offset + np.arange(obs_dim)
        offset += gym.spaces.flatdim(sub)
    raise ValueError("Dict observation space has no 'observation' entry")


# ---------------------------------------------------------------------------------------------
# the option layer as a VecEnv wrapper


class OptionVecEnv(VecEnvWrapper):
    """Runs the options over a ``VecEnv``; the low-level agent sees ``obs ⊕ one-hot(option)``.

    ``deterministic`` makes the controller pick its most likely option (evaluation); termination
    stays a random draw from the wrapper's own seeded generator. Finished options are stored in the
    learner's buffer only when ``collect`` is true (training).
    """

    def __init__(
        self,
        venv: VecEnv,
        options: TradingOptions,
        learner: OptionLearner,
        deterministic: bool = False,
        collect: bool = True,
        seed: int = 0,
    ) -> None:
        self.options = options
        self.learner = learner
        self.deterministic = deterministic
        self.collect = collect
        self.n_options = options.n_options
        self.rng = np.random.default_rng(seed)
        super().__init__(venv, observation_space=augmented_space(venv.observation_space, self.n_options))
        n = self.num_envs
        obs_dim = flatdim(base_observation_space(venv.observation_space))
        self.active = np.full(n, WAIT, dtype=np.int64)
        self.steps = np.zeros(n, dtype=np.int64)
        self.option_return = np.zeros(n, dtype=np.float64)
        self.start_states = np.zeros((n, obs_dim), dtype=np.float32)
        self.start_masks = np.zeros((n, self.n_options), dtype=bool)
        self.episode_switches = np.zeros(n, dtype=np.int64)
        self._last_base = np.zeros((n, obs_dim), dtype=np.float32)
        self.reset_stats()

    # ---- statistics ----------------------------------------------------------------------------
    def reset_stats(self) -> None:
        self.usage_steps = np.zeros(self.n_options, dtype=np.int64)
        self.available = np.zeros(self.n_options, dtype=np.int64)
        self.selections = 0
        # Durations of options that ended by their own termination rule, and of those cut by the
        # episode's end (kept apart: a truncated run says nothing about the termination rule).
        self.durations: list[list[int]] = [[] for _ in range(self.n_options)]
        self.truncated: list[list[int]] = [[] for _ in range(self.n_options)]
        self.switches_per_episode: list[int] = []

    def stats(self) -> dict[str, Any]:
        """Usage share, durations (terminated and truncated apart), availability and switches
        since ``reset_stats``."""
        total = max(int(self.usage_steps.sum()), 1)
        per_option = {}
        for index, name in enumerate(OPTION_NAMES):
            durations, truncated = self.durations[index], self.truncated[index]
            ended = len(durations) + len(truncated)
            per_option[name] = {
                "usage": float(self.usage_steps[index] / total),
                "steps": int(self.usage_steps[index]),
                "runs": len(durations),
                "avg_duration": float(np.mean(durations)) if durations else None,
                "min_duration": int(np.min(durations)) if durations else None,
                "truncated_runs": len(truncated),
                "truncated_share": float(len(truncated) / ended) if ended else None,
                "available_at_selection": int(self.available[index]),
                "available_share": float(self.available[index] / self.selections) if self.selections else None,
                "min_duration_config": int(self.options.min_durations[index]),
            }
        switches = self.switches_per_episode
        return {
            "options": per_option,
            "switches_per_episode": float(np.mean(switches)) if switches else None,
            "episodes": len(switches),
        }

    # ---- option bookkeeping --------------------------------------------------------------------
    def _start_options(self, rows: np.ndarray, base_obs: np.ndarray) -> None:
        if rows.size == 0:
            return
        states = base_obs[rows]
        masks = self.options.initiation_mask(states)
        self.available += masks.sum(axis=0)
        self.selections += rows.size
        self.active[rows] = self.learner.select(states, masks, deterministic=self.deterministic)
        self.steps[rows] = 0
        self.option_return[rows] = 0.0
        self.start_states[rows] = states
        self.start_masks[rows] = masks

    def reset(self):
        obs = self.venv.reset()
        base = np.asarray(base_observation(obs), dtype=np.float32)
        self._start_options(np.arange(self.num_envs), base)
        self.episode_switches[:] = 0
        self._last_base = base
        return with_one_hot(obs, self.active, self.n_options)

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions, dtype=np.float32).reshape(self.num_envs, -1)
        self._policy_actions = actions
        self.venv.step_async(self.options.transform_actions(self.active, actions, self._last_base))

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        base = np.asarray(base_observation(obs), dtype=np.float32)
        base_rewards = np.array([info.get("base_reward", reward) for info, reward in zip(infos, rewards)])
        active = self.active.copy()
        self.steps += 1
        self.option_return += base_rewards
        self.usage_steps += np.bincount(active, minlength=self.n_options)

        # Termination is judged on the state the option reached (the terminal one at episode end).
        judged = base.copy()
        for row in np.flatnonzero(dones):
            judged[row] = base_observation(infos[row]["terminal_observation"])
        ends = self.rng.random(self.num_envs) < self.options.termination_probs(active, self.steps, judged)
        ends |= dones

        for row, info in enumerate(infos):
            info["option"] = OPTION_NAMES[active[row]]
            info["option_step"] = int(self.steps[row])
            info["action_policy"] = float(self._policy_actions[row, 0])
            if dones[row]:
                terminal = info["terminal_observation"]
                batch = {k: v[None] for k, v in terminal.items()} if isinstance(terminal, dict) else terminal[None]
                augmented = with_one_hot(batch, active[row : row + 1], self.n_options)
                info["terminal_observation"] = (
                    {k: v[0] for k, v in augmented.items()} if isinstance(augmented, dict) else augmented[0]
                )

        finished = np.flatnonzero(ends)
        for row in finished:
            (self.truncated if dones[row] else self.durations)[active[row]].append(int(self.steps[row]))
        if self.collect and finished.size:
            self.learner.store(
                self.start_states[finished], self.start_masks[finished], active[finished], self.option_return[finished]
            )
        switching = finished[~dones[finished]]
        self.episode_switches[switching] += 1
        for row in np.flatnonzero(dones):
            self.switches_per_episode.append(int(self.episode_switches[row]))
            self.episode_switches[row] = 0
        self._start_options(finished, base)
        self._last_base = base
        return with_one_hot(obs, self.active, self.n_options), rewards, dones, infos


def base_observation_space(space: gym.Space) -> gym.Space:
    return space["observation"] if isinstance(space, gym.spaces.Dict) else space


class OptionsCallback(BaseCallback):
    """Trains the controller during ``SAC.learn`` and records option monitoring every ``log_freq`` steps."""

    def __init__(
        self, learner: OptionLearner, option_env: OptionVecEnv, log_freq: int = 1000, metrics_callback=None
    ) -> None:
        super().__init__()
        self.learner = learner
        self.option_env = option_env
        self.log_freq = int(log_freq)
        self.metrics_callback = metrics_callback  # each row, as ``train/<key>``, while training runs
        self.history: list[dict[str, float]] = []
        self._latest: dict[str, float] = {}

    def _on_step(self) -> bool:
        stats = self.learner.maybe_train(self.num_timesteps)
        if stats is not None:
            self._latest = stats
        if self.num_timesteps % self.log_freq == 0:
            self._record()
        return True

    def _record(self) -> None:
        usage = self.option_env.stats()
        row: dict[str, float] = {"step": float(self.num_timesteps), "temperature": self.learner.temperature}
        row.update({f"controller_{key}": value for key, value in self._latest.items() if key != "temperature"})
        for name, option in usage["options"].items():
            row[f"usage_{name}"] = option["usage"]
            if option["avg_duration"] is not None:
                row[f"avg_duration_{name}"] = option["avg_duration"]
        if usage["switches_per_episode"] is not None:
            row["switches_per_episode"] = usage["switches_per_episode"]
        self.history.append(row)
        for key, value in row.items():
            if key != "step":
                self.logger.record(f"options/{key}", value)
        if self.metrics_callback is not None:
            rows = {f"train/{key}": value for key, value in row.items() if key != "step"}
            self.metrics_callback(rows, self.num_timesteps)


# ---------------------------------------------------------------------------------------------
# the agent


class ScaledRewardReplayBuffer(ReplayBuffer):
    """SB3's ``ReplayBuffer`` whose samples carry ``reward_scale`` × the stored env reward.

    Without HER the low-level SAC learns from P&L (daily log equity changes of ~1e-4); this keeps
    the learner reward scale its SAC+ICM source was trained with (``sac_icm.agent.reward.scale``),
    against which the copied entropy coefficient was tuned. With HER the goal view applies the
    same scale to the P&L part of its reward itself (``envs.goal``).
    """

    def __init__(self, *args: Any, reward_scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not reward_scale > 0:
            raise ValueError(f"reward_scale must be > 0, got {reward_scale}")
        self.reward_scale = float(reward_scale)

    def sample(self, batch_size: int, env=None):
        batch = super().sample(batch_size, env)
        return batch._replace(rewards=batch.rewards * self.reward_scale)



# The low-level SAC takes the same hyper-parameters (and defaults) as the sac_icm phase's SAC.
DEFAULT_SAC_PARAMS: dict[str, Any] = dict(SAC_ICM_DEFAULT_PARAMS["sac"])


@dataclass
class HierarchicalAgent:
    """Option-conditioned SAC plus (when options are on) the controller and the option settings."""

    low_level: SAC
    learner: OptionLearner | None
    option_params: dict[str, Any] | None
    her: dict[str, Any] | None
    env_overrides: dict[str, Any] = field(default_factory=dict)
    # The learner's P&L reward scale (the warm-start source's), which HER's reward keeps.
    reward_scale: float = 1.0
    # Where a zero return of the options' trend feature lands in scaled units (``TradingOptions``).
    trend_zero: float = 0.0

    @property
    def uses_options(self) -> bool:
        return self.learner is not None

    def make_vec_env(
        self, make_env: Callable[[], gym.Env], deterministic: bool, collect: bool, seed: int
    ) -> VecEnv:
        """The VecEnv the low-level SAC acts in: goal view (HER) and option layer as configured."""
        her = self.her

        def build() -> gym.Env:
            env = make_env()
            return goal_view(env, her, self.reward_scale) if her is not None else env

        venv = DummyVecEnv([build])
        if self.learner is None:
            return venv
        env = trading_env(venv.envs[0], "the trading options")
        options = TradingOptions(
            env.layout, self.option_params, allow_short=env.config.allow_short, trend_zero=self.trend_zero
        )
        return OptionVecEnv(venv, options, self.learner, deterministic=deterministic, collect=collect, seed=seed)

    def rollout(self, env_spec, split: str, seed: int) -> pd.DataFrame:
        """One deterministic full-split episode with the env settings the agent trained with, aiming
        at the middle of the goal range when HER is on (how the walk-forward scores it)."""
        goal = 0.5 * (self.her["goal_low"] + self.her["goal_high"]) if self.her is not None else None
        rows, _ = rollout_agent(
            self, lambda: env_spec.make_env(split, evaluation=True, **self.env_overrides), seed, desired_goal=goal
        )
        return rows

    def to_bytes(self) -> bytes:
        """One zip: the SB3 SAC zip, the controller state (torch) and the settings (JSON)."""
        sac_bytes = io.BytesIO()
        self.low_level.save(sac_bytes)
        settings = {
            "option_params": self.option_params,
            "her": self.her,
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
            low_level = SAC.load(
                io.BytesIO(zipped.read("low_level_sac.zip")),
                device=device,
                custom_objects={"replay_buffer_class": None, "replay_buffer_kwargs": {}, "buffer_size": 1},
            )
            learner = None
            if "controller.pt" in zipped.namelist():
                state = th.load(io.BytesIO(zipped.read("controller.pt")), map_location=device, weights_only=True)
                learner = OptionLearner.from_state(state, device=device)
        return cls(
            low_level,
            learner,
            settings["option_params"],
            settings["her"],
            settings["env_overrides"],
            # Agents saved before these settings existed used scale 1 for HER and the median reference.
            float(settings.get("reward_scale", 1.0)),
            float(settings.get("trend_zero", 0.0)),
        )


def build_hierarchical_agent(
    source: SAC,
    make_train_env: Callable[[], gym.Env],
    option_params: dict[str, Any] | None,
    controller_params: dict[str, Any] | None,
    her: dict[str, Any] | None,
    sac_params: dict[str, Any] | None,
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
    sac = {**DEFAULT_SAC_PARAMS, **(sac_params or {})}
    unknown = sorted(set(sac) - set(DEFAULT_SAC_PARAMS))
    if unknown:
        raise ValueError(f"unknown low-level sac parameter(s) {unknown}; expected some of {sorted(DEFAULT_SAC_PARAMS)}")
    learner = None
    if option_params is not None:
        probe = trading_env(make_train_env(), "the option learner")
        learner = OptionLearner(
            probe.layout.dim, len(OPTION_NAMES), ControllerConfig.from_mapping(controller_params), seed, device
        )
    reward_scale = float(getattr(source, "reward_scale", 1.0))
    agent = HierarchicalAgent(
        None,  # type: ignore[arg-type]  # the low-level SAC needs this agent's VecEnv, so it is set below
        learner,
        copy.deepcopy(option_params),
        copy.deepcopy(her),
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
    buffer_class: type[ReplayBuffer]
    if her is not None:
        buffer_class, buffer_kwargs = FastHerReplayBuffer, replay_buffer_kwargs(her)
    else:
        buffer_class, buffer_kwargs = ScaledRewardReplayBuffer, {"reward_scale": reward_scale}
    low_level = SAC(
        WidenedSACPolicy,
        venv,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs=buffer_kwargs,
        policy_kwargs=policy_kwargs,
        seed=seed,
        device=device,
        verbose=0,
        **sac,
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
    """One deterministic episode; rows like ``evaluation.rollout.run_episode`` plus the active option.

    Returns the rollout and the option statistics of the episode (``None`` without options).
    """
    venv = agent.make_vec_env(make_env, deterministic=True, collect=False, seed=seed)
    venv.seed(seed)
    if desired_goal is not None:
        venv.set_options([{"desired_goal": float(desired_goal)}])
    obs = venv.reset()
    previous_equity = float(venv.unwrapped.reset_infos[0]["equity"])
    rows: list[dict[str, Any]] = []
    done = False
    while not done:
        # VecEnvObs admits tuples; these envs observe a Box or a Dict.
        action, _ = agent.low_level.predict(obs, deterministic=True)  # type: ignore[arg-type]
        obs, reward, dones, infos = venv.step(action)
        info = dict(infos[0])
        info.pop("terminal_observation", None)
        info.pop("TimeLimit.truncated", None)
        equity = float(info["equity"])
        done = bool(dones[0])
        info.update(step=len(rows), reward=float(reward[0]), **{"return": equity / previous_equity - 1.0})
        rows.append(info)
        previous_equity = equity
    stats = venv.stats() if isinstance(venv, OptionVecEnv) else None
    return pd.DataFrame(rows), stats


# ---------------------------------------------------------------------------------------------
# the options_her phase: parameters, training and evaluation from an env spec

DEFAULT_GATES: dict[str, Any] = {
    "min_usage": 0.10,
    "max_usage": 0.40,
    "min_avg_duration": 5.0,
    "instant_fraction": 0.5,
    "fail_on_gate": False,
}
DEFAULT_PHASE_PARAMS: dict[str, Any] = {
    "device": "auto",
    "env_overrides": {"allow_short": True, "smoothing_window": 1},
    "options": {"enabled": True},
    "controller": {},
    "her": {},
    "sac": {},
    "training": {"total_timesteps": 5000, "log_freq": 1000},
    # 50 goal episodes: success rates move in steps of 0.02, not 0.2.
    "evaluation": {"split": "validation", "goal_episodes": 50},
    "gates": DEFAULT_GATES,
}


def resolve_phase_params(params: dict | None) -> dict[str, Any]:
    """Phase defaults overlaid with ``params``; a bad key or value raises ``ConfigError`` naming it."""
    from trading_rl.agents.options_her_params import OptionsHerParams

    return OptionsHerParams.from_mapping(params, "options_her").to_dict()


def _option_params(resolved: dict[str, Any]) -> dict[str, Any] | None:
    options = dict(resolved["options"])
    return options if options.pop("enabled") else None


def train_from_spec(
    env_spec, source: SAC, params: dict | None, seed: int, device: str = "cpu", timesteps: int | None = None,
    metrics_callback=None,
):
    """Build, warm-start and train the phase's agent on ``env_spec``'s training split
    (``timesteps`` env steps, default ``training.total_timesteps``).

    The options measure their trend from a zero return, placed by the spec's feature scaler.
    Returns ``(agent, history, training_option_stats)``; the last is ``None`` without options.
    """
    resolved = resolve_phase_params(params)
    overrides = resolved["env_overrides"]
    her = resolved["her"] if resolved["her"]["enabled"] else None
    option_params = _option_params(resolved)
    trend_zero = env_spec.scaled_zero(option_params["signals"]["trend_feature"]) if option_params else 0.0

    def make_train_env() -> gym.Env:
        return env_spec.make_env("train", **overrides)

    agent, venv = build_hierarchical_agent(
        source, make_train_env, option_params, resolved["controller"], her,
        resolved["sac"], seed, device, overrides, trend_zero,
    )
    training = resolved["training"]
    total = training["total_timesteps"] if timesteps is None else timesteps
    history = train_hierarchical_agent(agent, venv, total, training["log_freq"], metrics_callback)
    stats = venv.stats() if isinstance(venv, OptionVecEnv) else None
    return agent, history, stats


def continue_on_spec(agent: HierarchicalAgent, env_spec, params: dict | None, seed: int, timesteps: int) -> None:
    """Fine-tune ``agent`` on another spec's training split (the walk-forward's next fold): the
    controller, the SAC and its replay buffer carry over. HER's unfinished episode is closed first,
    so no relabelled goal spans the two windows."""
    overrides = resolve_phase_params(params)["env_overrides"]
    low_level = agent.low_level
    if isinstance(low_level.replay_buffer, FastHerReplayBuffer):
        with warnings.catch_warnings():  # SB3 warns that this is what it does: intended here
            warnings.simplefilter("ignore", UserWarning)
            low_level.replay_buffer.truncate_last_trajectory()
    venv = agent.make_vec_env(lambda: env_spec.make_env("train", **overrides), deterministic=False, collect=True, seed=seed)
    low_level.set_env(venv)
    callback = OptionsCallback(venv.learner, venv) if isinstance(venv, OptionVecEnv) else None
    low_level.learn(total_timesteps=int(timesteps), callback=callback, reset_num_timesteps=False, progress_bar=False)


def evaluate_from_spec(agent: HierarchicalAgent, env_spec, params: dict | None, seed: int) -> dict[str, Any]:
    """Validation metrics next to the baselines, option usage and goal achievement.

    The full-split run aims at the middle of the goal range when HER is on. Goal achievement uses
    ``goal_episodes`` episodes with random starts on the same split, each with a target drawn from
    the goal range (the same targets for every agent with the same seed). Each episode runs twice
    from the same start: once shown its target, once shown another episode's target (the targets
    shuffled) — the goal-agnostic control, scored against the true target. Without HER the agent
    sees no target, and both runs coincide.
    """
    from trading_rl.agents.her import goal_achievement_against_control
    from trading_rl.evaluation.baselines import evaluate_baselines
    from trading_rl.evaluation.metrics import compute_metrics, json_ready, return_moments

    resolved = resolve_phase_params(params)
    overrides = resolved["env_overrides"]
    her = resolved["her"]
    split = resolved["evaluation"]["split"]

    def make_eval_env() -> gym.Env:
        return env_spec.make_env(split, evaluation=True, **overrides)

    def make_episode_env() -> gym.Env:
        return env_spec.make_env(split, evaluation=False, **overrides)

    middle_goal = 0.5 * (her["goal_low"] + her["goal_high"])
    rollout, eval_stats = rollout_agent(agent, make_eval_env, seed, desired_goal=middle_goal)
    hold_threshold = trading_env(make_eval_env(), "the options evaluation").config.hold_threshold
    metrics = compute_metrics(rollout, env_spec.periods_per_year, hold_threshold)
    baselines = evaluate_baselines(make_eval_env, env_spec.periods_per_year, seed)

    rng = np.random.default_rng(seed)
    targets = rng.uniform(her["goal_low"], her["goal_high"], size=int(resolved["evaluation"]["goal_episodes"]))
    shown_to_control = rng.permutation(targets)

    def final_return(episode: int, shown_target: float) -> float:
        episode_rollout, _ = rollout_agent(agent, make_episode_env, seed + 1 + episode, desired_goal=shown_target)
        start_equity = float(episode_rollout["equity"].iloc[0]) / (1.0 + float(episode_rollout["return"].iloc[0]))
        return float(episode_rollout["equity"].iloc[-1]) / start_equity - 1.0

    finals = np.array([final_return(episode, float(target)) for episode, target in enumerate(targets)])
    if agent.her is not None:
        controls = np.array([final_return(episode, float(shown)) for episode, shown in enumerate(shown_to_control)])
    else:
        controls = finals
    goals = goal_achievement_against_control(finals, controls, targets, her["tolerance"])
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


def option_gates(stats: dict[str, Any], gates: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The seeds' option-collapse gates on usage statistics (``OptionVecEnv.stats``).

    Usable options (offered at least once by their initiation set) must each exceed ``min_usage``;
    no option may exceed ``max_usage``; the run-weighted average duration must exceed
    ``min_avg_duration``; an option whose average duration is below ``instant_fraction`` × its
    minimum duration is an instant-termination alarm.
    """
    g = {**DEFAULT_GATES, **(gates or {})}
    options = stats["options"]
    rows: list[dict[str, Any]] = []
    for name, option in options.items():
        if option["available_at_selection"] > 0:
            passed = option["usage"] > g["min_usage"]
            row = {"gate": f"usage_{name}", "value": option["usage"], "threshold": f"> {g['min_usage']}", "passed": passed}
            if not passed:
                row["cause"] = _starvation_cause(option)
            rows.append(row)
    busiest = max(options, key=lambda name: options[name]["usage"])
    max_usage = options[busiest]["usage"]
    rows.append({"gate": "max_usage", "value": max_usage, "threshold": f"<= {g['max_usage']}",
                 "passed": max_usage <= g["max_usage"], "option": busiest})
    finished = [option for option in options.values() if option["runs"]]
    runs = sum(option["runs"] for option in finished)
    avg = sum(option["avg_duration"] * option["runs"] for option in finished) / runs if runs else 0.0
    rows.append({"gate": "avg_duration", "value": avg, "threshold": f"> {g['min_avg_duration']}",
                 "passed": avg > g["min_avg_duration"]})
    for name, option in options.items():
        if option["avg_duration"] is not None:
            limit = g["instant_fraction"] * option["min_duration_config"]
            rows.append({"gate": f"no_instant_termination_{name}", "value": option["avg_duration"],
                         "threshold": f">= {limit}", "passed": option["avg_duration"] >= limit})
    return rows


def _starvation_cause(option: dict[str, Any]) -> str:
    """Why an option is under its usage floor: its initiation set rarely held (the signals), or it
    was offered and the controller passed it over (the learner), or its runs are short."""
    offered_share = option.get("available_share")
    offered = option["available_at_selection"]
    if offered_share is not None and offered_share < 0.5:
        return f"initiation set held at only {offered_share:.0%} of option selections"
    started = option["runs"] + option.get("truncated_runs", 0)
    if started < 0.1 * offered:
        return f"offered at {offered} selections, chosen {started} times by the controller"
    return f"chosen {started} times but its runs average {option['avg_duration']} steps"
