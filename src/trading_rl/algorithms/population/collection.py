"""The population's env loop: SB3's ``collect_rollouts`` for every member at once.

One step of the population is one batched action selection (the stacked actors in one ``vmap``,
``PopulationSAC.act``), one env step for every member and one write of every member's transition
into the stacked replay (``replay.PopulationReplay``). What SB3's loop keeps per member stays per
member: the warm-up's uniform actions from the member's own action space, action noise, the step
count, ``Monitor``'s episode statistics (``ep_info_buffer``), the episode count and its log dumps,
the progress of the learning-rate schedule and the callbacks.

The env step: members whose env is SB3's ``DummyVecEnv`` over a ``Monitor`` over a plain
``ContinuousTradingEnv`` (what the walk-forward's agents train on) step as one
``envs.batched.BatchedTradingEnv``; any other env (wrappers, other envs) steps through its own
``VecEnv``, one member after another. ``finish`` hands the members their env state back, so an SB3
``learn`` afterwards continues the same episodes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.algorithms.population.membership import PopulationError
from trading_rl.envs.batched import BatchedTradingEnv
from trading_rl.envs.continuous import ContinuousTradingEnv

if TYPE_CHECKING:
    from trading_rl.algorithms.population.population_sac import PopulationSAC

# (next observations [N, D], rewards [N], dones [N], timeouts [N], terminal observation by member,
# Monitor episode info by member)
StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray], dict[int, dict]]


def _plain_monitor(env: Any) -> Monitor | None:
    """The member's ``Monitor`` when its env is DummyVecEnv → Monitor → plain ContinuousTradingEnv
    (no results file, no info keywords), else ``None``."""
    if not isinstance(env, DummyVecEnv) or env.num_envs != 1:
        return None
    monitor = env.envs[0]
    if type(monitor) is not Monitor or monitor.results_writer is not None or monitor.info_keywords:
        return None
    return monitor if type(monitor.env) is ContinuousTradingEnv else None


class _BatchedStepper:
    """The members' trading envs as one ``BatchedTradingEnv``; their ``Monitor``s kept as SB3's
    would be (episode rewards, lengths, times)."""

    def __init__(self, monitors: list[Monitor]) -> None:
        self.monitors = monitors
        self.env = BatchedTradingEnv([monitor.env for monitor in monitors])  # type: ignore[misc]

    def step(self, actions: np.ndarray) -> StepResult:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        dones = terminated | truncated
        for monitor, reward in zip(self.monitors, rewards.tolist()):
            monitor.rewards.append(reward)
            monitor.total_steps += 1
        terminal, episodes = {}, {}
        for i in np.flatnonzero(dones).tolist():
            terminal[i] = infos["final_obs"][i]
            episodes[i] = _end_episode(self.monitors[i])
        return obs, rewards, dones, truncated & ~terminated, terminal, episodes

    def finish(self) -> None:
        self.env.store_members()


def _end_episode(monitor: Monitor) -> dict[str, Any]:
    """``Monitor.step``'s bookkeeping at an episode's end, then its ``reset``'s."""
    episode_return, length = sum(monitor.rewards), len(monitor.rewards)
    elapsed = time.time() - monitor.t_start
    info = {"r": round(episode_return, 6), "l": length, "t": round(elapsed, 6), **monitor.current_reset_info}
    monitor.episode_returns.append(episode_return)
    monitor.episode_lengths.append(length)
    monitor.episode_times.append(elapsed)
    monitor.rewards = []
    return info


class _MemberStepper:
    """Each member's own ``VecEnv``, one after another (envs the batched env does not cover)."""

    def __init__(self, envs: list[Any]) -> None:
        for i, env in enumerate(envs):
            if env.num_envs != 1:
                raise PopulationError(f"member {i}'s env has {env.num_envs} copies; a member trains on one env")
        self.envs = envs
        self.successes: dict[int, Any] = {}

    def step(self, actions: np.ndarray) -> StepResult:
        observations, rewards, dones, timeouts = [], [], [], []
        terminal, episodes = {}, {}
        self.successes = {}
        for i, env in enumerate(self.envs):
            obs, reward, done, infos = env.step(actions[i : i + 1])
            info = infos[0]
            observations.append(obs[0])
            rewards.append(reward[0])
            dones.append(done[0])
            timeouts.append(info.get("TimeLimit.truncated", False))
            if done[0] and info.get("terminal_observation") is not None:
                terminal[i] = info["terminal_observation"]
            if info.get("episode") is not None:
                episodes[i] = info["episode"]
            if done[0] and info.get("is_success") is not None:
                self.successes[i] = info["is_success"]
        return np.stack(observations), np.array(rewards), np.array(dones), np.array(timeouts), terminal, episodes

    def finish(self) -> None:
        """Nothing to hand back: each member stepped its own env, which holds its state already."""


class PopulationCollector:
    """Steps the population's members; ``collect(n)`` is ``n`` steps of SB3's ``collect_rollouts``
    for all of them (members' callbacks per member, one stop for all)."""

    def __init__(self, population: PopulationSAC, callbacks: list[BaseCallback], log_interval: int | None) -> None:
        members = population.members
        self.population = population
        self.members = members
        self.callbacks = callbacks
        self.log_interval = log_interval
        first = members[0].action_space
        for i, member in enumerate(members):
            if member._vec_normalize_env is not None:
                raise PopulationError(f"member {i} trains on a VecNormalize env, which the population does not step")
            space = member.action_space
            if not (
                isinstance(space, spaces.Box)
                and isinstance(first, spaces.Box)
                and np.array_equal(space.low, first.low)
                and np.array_equal(space.high, first.high)
            ):
                raise PopulationError(
                    f"member {i}'s action space differs from member 0's (the population needs one Box)"
                )
        monitors = [_plain_monitor(member.env) for member in members]
        if all(monitor is not None for monitor in monitors):
            self.stepper: _BatchedStepper | _MemberStepper = _BatchedStepper(monitors)  # type: ignore[arg-type]
        else:
            self.stepper = _MemberStepper([member.env for member in members])
        self.last_obs = np.concatenate([member._last_obs for member in members])
        self._handles_timeouts = np.array(
            [population.replay.buffers[i].handle_timeout_termination for i in range(len(members))]
        )

    def _actions(self) -> tuple[np.ndarray, np.ndarray]:
        """SB3's ``_sample_action`` for every member: (env actions, buffer actions) ``[N, A]``."""
        lead = self.members[0]
        if lead.num_timesteps < lead.learning_starts:
            unscaled = np.array([member.action_space.sample() for member in self.members])
        else:
            unscaled = lead.policy.unscale_action(self.population.act(self.last_obs, deterministic=False))
        scaled = lead.policy.scale_action(unscaled)
        for i, member in enumerate(self.members):
            if member.action_noise is not None:
                scaled[i] = np.clip(scaled[i] + member.action_noise(), -1, 1)
        return lead.policy.unscale_action(scaled), scaled

    def collect(self, steps: int) -> bool:
        """``steps`` env steps of every member; ``False`` when a member's callback asks to stop."""
        for callback in self.callbacks:
            callback.on_rollout_start()
        for _ in range(steps):
            actions, buffer_actions = self._actions()
            new_obs, rewards, dones, timeouts, terminal, episodes = self.stepper.step(actions)
            for i, (member, callback) in enumerate(zip(self.members, self.callbacks)):
                member.num_timesteps += 1
                callback.update_locals(
                    {"actions": actions[i : i + 1], "rewards": rewards[i : i + 1], "dones": dones[i : i + 1]}
                )
                if not callback.on_step():
                    return False
            for i, episode in episodes.items():
                self.members[i].ep_info_buffer.extend([episode])  # type: ignore[union-attr]
            if isinstance(self.stepper, _MemberStepper):
                for i, success in self.stepper.successes.items():
                    self.members[i].ep_success_buffer.append(success)  # type: ignore[union-attr]
            next_obs = new_obs.copy()
            for i, obs in terminal.items():
                next_obs[i] = obs
            self.population.replay.add(
                self.last_obs, next_obs, buffer_actions, rewards, dones, timeouts & self._handles_timeouts
            )
            self.last_obs = new_obs
            for member in self.members:
                member._update_current_progress_remaining(member.num_timesteps, member._total_timesteps)
            self._end_episodes(np.flatnonzero(dones).tolist())
        for callback in self.callbacks:
            callback.on_rollout_end()
        return True

    def _end_episodes(self, rows: list[int]) -> None:
        for i in rows:
            member = self.members[i]
            member._episode_num += 1
            if member.action_noise is not None:
                member.action_noise.reset()
            if self.log_interval is not None and member._episode_num % self.log_interval == 0:
                member.dump_logs()

    def finish(self) -> None:
        """The members' envs and last observations as SB3's loop would have left them."""
        self.stepper.finish()
        for i, member in enumerate(self.members):
            member._last_obs = self.last_obs[i : i + 1].copy()
            member._last_original_obs = member._last_obs
