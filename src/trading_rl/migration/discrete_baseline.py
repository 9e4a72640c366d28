"""The discrete baseline: an SB3 PPO on the legacy 7-action env, trained when no legacy checkpoint exists.

Its policy network has the legacy shape (observation → 256 → 128 → 7 by default), so the migration
path taken for a user's checkpoint is the one exercised on a fresh clone.

The env's reward is a bar's log growth at a capped position (~1e-3), far below the value network's
initial outputs; the advantages are then the value net's error, not the action's P&L, and PPO learns
nothing in its budget. ``reward_scale`` lifts the rewards to the value net's scale (docs/migration.md
has the measurement); the saved policy is unchanged by it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from stable_baselines3 import PPO

from trading_rl.training.sb3_logging import use_quiet_logger


def train_discrete_baseline(
    env: gym.Env,
    hidden_sizes: list[int] | tuple[int, ...] = (256, 128),
    total_timesteps: int = 4096,
    seed: int | None = None,
    device: str = "cpu",
    ppo_kwargs: dict[str, Any] | None = None,
    reward_scale: float = 1.0,
) -> PPO:
    """PPO with ``net_arch=dict(pi=hidden_sizes, vf=hidden_sizes)`` trained on the discrete ``env``,
    whose rewards it sees multiplied by ``reward_scale``."""
    if total_timesteps < 1:
        raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps}")
    if not reward_scale > 0:
        raise ValueError(f"reward_scale must be > 0, got {reward_scale}")
    sizes = [int(size) for size in hidden_sizes]
    scale = float(reward_scale)
    model = PPO(
        "MlpPolicy",
        gym.wrappers.TransformReward(env, lambda reward: scale * float(reward)) if scale != 1.0 else env,
        policy_kwargs=dict(net_arch=dict(pi=sizes, vf=sizes)),
        seed=seed,
        device=device,
        **(ppo_kwargs or {}),
    )
    use_quiet_logger(model)  # no empty tempdir/SB3-<time> folder per training
    return model.learn(total_timesteps=total_timesteps)
