"""The option layer as a ``VecEnv`` wrapper, and the callback that trains the option controller.

Data flow per env step (all envs of a ``VecEnv`` at once, option state in arrays indexed by env):

1. the low-level SAC sees the env observation with the active option's one-hot appended (inside the
   ``observation`` entry when HER's Dict view is used) and outputs an action in [-1, 1];
2. ``OptionVecEnv`` scales and constrains it by the active option and steps the env;
3. the option's step counter and log return grow; its termination probability on the new
   observation is sampled (0 before the minimum duration, 1 at the hard timeout or episode end);
4. a finished option becomes one controller transition (start state, initiation mask, option,
   log return over the option) and the controller picks the next option among those whose
   initiation set holds.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import flatdim
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from trading_rl.algorithms.options_her.controller import OptionLearner
from trading_rl.algorithms.options_her.options import OPTION_NAMES, WAIT, TradingOptions

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
