"""The actors' side of the V-trace actor-learner: a ``RolloutWorker`` owns one training env and a
policy copy and returns a ``Trajectory`` of ``unroll_length`` steps taken with the weights it was sent
(a Ray actor or the same class in-process, ``actor_learner``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from gymnasium.spaces import flatdim

from trading_rl.algorithms.vtrace.actor_critic import build_actor_critic, gaussian_log_prob
from trading_rl.envs import EnvSpec

if TYPE_CHECKING:
    from trading_rl.algorithms.vtrace.actor_learner import VTraceParams


@dataclass
class Trajectory:
    """``unroll_length`` steps of one actor; ``observations`` has one more row (the bootstrap state)."""

    observations: np.ndarray  # [T + 1, obs_dim] float32
    actions: np.ndarray  # [T, action_dim] float32: the sampled values passed to env.step
    rewards: np.ndarray  # [T] env rewards (log equity change), unscaled
    discounts: np.ndarray  # [T] gamma, or 0 where the episode ended after the step
    behaviour_log_probs: np.ndarray  # [T] log μ(action | observation) under the weights sent
    truncated_steps: np.ndarray  # steps whose episode hit its time limit (not a terminal state)
    truncated_observations: np.ndarray  # [len(truncated_steps), obs_dim] the final observations there
    episode_returns: list[float]  # sum of env rewards (= log net return) of episodes that ended here
    collect_seconds: float  # wall time the rollout took (not part of the data)


class RolloutWorker:
    """One training env and a policy copy; ``rollout(weights)`` runs the next ``unroll_length`` steps.

    The env carries over between rollouts (trajectories continue the current episode), and one
    numpy generator seeded by ``seed`` draws the action noise, so the sequence of trajectories is a
    function of the seed and the weights sent, nothing else.
    """

    def __init__(self, spec: EnvSpec, params: VTraceParams, seed: int, torch_threads: int | None = None) -> None:
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
        self.params = params
        self.env = spec.make_env("train", seed=seed)
        obs_dim = flatdim(self.env.observation_space)
        self.action_dim = flatdim(self.env.action_space)
        self.policy = build_actor_critic(obs_dim, self.action_dim, self.params, seed)
        self.rng = np.random.default_rng(seed)
        self.observation, _ = self.env.reset()
        self.episode_return = 0.0

    def rollout(self, weights: Mapping[str, np.ndarray]) -> Trajectory:
        started = time.perf_counter()
        self.policy.load_state_dict({name: torch.from_numpy(array) for name, array in weights.items()})
        steps, gamma = self.params.unroll_length, float(self.params.gamma)
        observations = np.empty((steps + 1, self.observation.shape[0]), dtype=np.float32)
        actions = np.empty((steps, self.action_dim), dtype=np.float32)
        rewards = np.empty(steps)
        discounts = np.full(steps, gamma)
        means = np.empty((steps, self.action_dim), dtype=np.float32)
        truncated_steps, truncated_observations, episode_returns = [], [], []
        env = self.env
        log_std = self.policy.log_std.detach()
        std = log_std.exp().numpy()
        for t in range(steps):
            observations[t] = self.observation
            with torch.no_grad():
                means[t] = self.policy.mean(torch.from_numpy(observations[t : t + 1]))[0].numpy()
            actions[t] = means[t] + std * self.rng.standard_normal(self.action_dim)
            observation, reward, terminated, truncated, _ = env.step(actions[t])
            rewards[t] = reward
            self.episode_return += float(reward)
            if terminated or truncated:
                discounts[t] = 0.0
                if not terminated:
                    truncated_steps.append(t)
                    truncated_observations.append(observation)
                episode_returns.append(self.episode_return)
                self.episode_return = 0.0
                observation, _ = env.reset()
            self.observation = observation
        observations[steps] = self.observation
        with torch.no_grad():  # the densities of the whole unroll at once, from the means used
            log_probs = gaussian_log_prob(torch.from_numpy(actions), torch.from_numpy(means), log_std).numpy()
        return Trajectory(
            observations=observations,
            actions=actions,
            rewards=rewards,
            discounts=discounts,
            behaviour_log_probs=log_probs,
            truncated_steps=np.asarray(truncated_steps, dtype=np.int64),
            truncated_observations=np.asarray(truncated_observations, dtype=np.float32).reshape(
                len(truncated_steps), observations.shape[1]
            ),
            episode_returns=episode_returns,
            collect_seconds=time.perf_counter() - started,
        )
