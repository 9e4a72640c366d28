"""A small trading-like gymnasium env and agent factory for the agents tests.

Kept in a module (not a test file) because ``test_training_resume`` also runs it as a script in a
subprocess that gets killed mid-training.
"""

from __future__ import annotations

import json
import math
import sys

import gymnasium as gym
import numpy as np
import torch

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.envs import EnvConfig
from trading_rl.training.loop import train_agent
from trading_rl.training.params import AgentParams

# Tiny nets gain nothing from threads, and on a busy 2-core machine extra threads make SAC ~30x slower.
torch.set_num_threads(1)

SMALL_NETS = {"net_arch": [32, 32], "activation": "relu"}


class ToyTradingEnv(gym.Env):
    """Random-walk prices; the action is the target position fraction (so nearly every step trades).

    The reward is the log change of equity net of a 5 bp fee, and ``info`` carries the keys the
    evaluation code reads (equity, position, trade_value, action_raw, ...). ``nan_reward_after``
    makes every later reward NaN, to exercise the divergence guard.
    """

    metadata: dict = {"render_modes": []}
    # The settings the training loop reads from a trading env (its hold threshold).
    config = EnvConfig()

    def __init__(self, n_steps: int = 64, nan_reward_after: int | None = None) -> None:
        self.n_steps = n_steps
        self.nan_reward_after = nan_reward_after
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.total_steps = 0

    def _observation(self) -> np.ndarray:
        previous = self.prices[max(self.t - 1, 0)]
        last_return = self.prices[self.t] / previous - 1.0
        momentum = self.prices[self.t] / self.prices[max(self.t - 5, 0)] - 1.0
        return np.array([100 * last_return, self.position, self.t / self.n_steps, 10 * momentum], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        steps = self.np_random.normal(0.0005, 0.01, size=self.n_steps)
        self.prices = 100.0 * np.exp(np.concatenate(([0.0], np.cumsum(steps))))
        self.t, self.position, self.equity = 0, 0.0, 1000.0
        return self._observation(), {"equity": self.equity}

    def step(self, action):
        a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        target = a
        trade_value = (target - self.position) * self.equity
        fees = 0.0005 * abs(trade_value)
        self.position = target
        old_equity = self.equity
        self.t += 1
        self.equity = (old_equity - fees) * (
            1.0 + self.position * (self.prices[self.t] / self.prices[self.t - 1] - 1.0)
        )
        self.total_steps += 1
        reward = math.log(self.equity / old_equity)
        if self.nan_reward_after is not None and self.total_steps > self.nan_reward_after:
            reward = math.nan
        action_type = "hold" if trade_value == 0 else ("buy" if trade_value > 0 else "sell")
        info = {
            "equity": self.equity,
            "cash": self.equity * (1.0 - self.position),
            "position": self.position,
            "fees": fees,
            "trade_value": trade_value,
            "action_raw": a,
            "action_smoothed": a,
            "action_type": action_type,
        }
        return self._observation(), reward, self.t >= self.n_steps, False, info


def toy_params(icm: bool = True, **training) -> dict:
    """Tiny-budget parameters: small nets and batches so a few hundred steps take about a second."""
    return {
        "sac": {"learning_starts": 32, "batch_size": 32, "buffer_size": 5000},
        "policy": SMALL_NETS,
        "icm": {"enabled": icm, "warmup_steps": 60, "feature_dim": 16, "hidden_dim": 32},
        # The toy's rewards are O(1e-2); its tests were written for the learner seeing them unscaled
        # (the phase's default scale, 100, is sized for daily P&L of ~1e-4).
        "reward_scale": 1.0,
        "training": {"eval_freq": 100, "resume_every": 50, "log_interval": 1000, **training},
        "collapse": {"window": 50, "check_freq": 50},
    }


def toy_agent(seed: int = 0, icm: bool = True, nan_reward_after: int | None = None, **training):
    params = toy_params(icm=icm, **training)
    return build_agent(
        ToyTradingEnv(nan_reward_after=nan_reward_after),
        AgentParams.from_mapping(params, "sac_icm.agent"),
        seed=seed,
        device="cpu",
    ), params


def run_training(work_dir: str, total_timesteps: int, seed: int = 0):
    model, params = toy_agent(seed=seed, total_timesteps=total_timesteps)
    return train_agent(
        model,
        ToyTradingEnv,
        AgentParams.from_mapping(params, "sac_icm.agent"),
        work_dir,
        periods_per_year=252.0,
        phase="toy",
        symbol="TOY",
    )


if __name__ == "__main__":
    outcome = run_training(sys.argv[1], int(sys.argv[2]))
    print(json.dumps({"resumed_from": outcome.resumed_from, "timesteps": outcome.model.num_timesteps}))
