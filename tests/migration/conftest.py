"""Toy envs and in-memory SB3 checkpoints for the migration tests (no market data needed)."""

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import A2C, DQN, PPO, SAC

from trading_rl.envs.hybrid import ActionSpaceMigrator
from trading_rl.envs.layout import STATE_FIELDS, ObservationLayout
from trading_rl.migration import greedy_demonstration, sb3_zip_bytes


class ToyEnv(gym.Env):
    """Random observations of ``obs_dim`` values; ``Discrete(n_actions)`` or ``Box(-1, 1, (1,))``."""

    def __init__(self, obs_dim=6, n_actions=7, continuous=False, episode_length=16):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = (
            gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous else gym.spaces.Discrete(n_actions)
        )
        self.episode_length = episode_length

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.normal(size=self.observation_space.shape).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        obs = self.np_random.normal(size=self.observation_space.shape).astype(np.float32)
        return obs, float(self.np_random.normal()), self.t >= self.episode_length, False, {}


@pytest.fixture(scope="session")
def toy_env():
    return ToyEnv


@pytest.fixture(scope="session")
def make_checkpoint():
    """``make_checkpoint(algorithm="PPO", obs_dim=6, hidden=(16, 8), n_actions=7, seed=0) -> (model, zip bytes)``."""

    def make(algorithm="PPO", obs_dim=6, hidden=(16, 8), n_actions=7, seed=0, **policy_kwargs):
        sizes = list(hidden)
        if algorithm in ("PPO", "A2C"):
            cls = PPO if algorithm == "PPO" else A2C
            model = cls(
                "MlpPolicy",
                ToyEnv(obs_dim, n_actions),
                seed=seed,
                policy_kwargs=dict(net_arch=dict(pi=sizes, vf=sizes), **policy_kwargs),
            )
        elif algorithm == "DQN":
            model = DQN(
                "MlpPolicy", ToyEnv(obs_dim, n_actions), seed=seed, buffer_size=100, policy_kwargs=dict(net_arch=sizes)
            )
        elif algorithm == "SAC":
            model = SAC(
                "MlpPolicy",
                ToyEnv(obs_dim, continuous=True),
                seed=seed,
                buffer_size=100,
                policy_kwargs=dict(net_arch=sizes),
            )
        else:
            raise ValueError(algorithm)
        return model, sb3_zip_bytes(model)

    return make


def toy_migrator(obs_dim=6, hold_threshold=0.1):
    """The action migrator for a toy observation read as ``obs_dim - 5`` features of one bar, then
    the portfolio state (so ADD_TO_WINNER depends on two of the random values)."""
    layout = ObservationLayout([f"feature_{i}" for i in range(obs_dim - len(STATE_FIELDS))], window_size=1)
    return ActionSpaceMigrator(layout, hold_threshold)


@pytest.fixture(scope="session")
def demonstrate():
    """``demonstrate(policy, obs_dim=6, n_states=400, seed=0)``: discrete ``policy``'s greedy
    demonstration on the toy env's random states."""

    def demonstration(policy, obs_dim=6, n_states=400, seed=0):
        env = ToyEnv(obs_dim, episode_length=n_states)
        return greedy_demonstration(policy, env, toy_migrator(obs_dim), "toy env", seed=seed)

    return demonstration
