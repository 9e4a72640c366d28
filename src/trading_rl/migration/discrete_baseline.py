"""The discrete baseline: an SB3 PPO on the legacy 7-action env, trained when no legacy checkpoint exists.

Its policy network has the legacy shape (observation → 256 → 128 → 7 by default), so the migration
path taken for a user's checkpoint is the one exercised on a fresh clone.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3 import PPO

from trading_rl.training.sb3_logging import use_quiet_logger


def train_discrete_baseline(
    env,
    hidden_sizes: list[int] | tuple[int, ...] = (256, 128),
    total_timesteps: int = 4096,
    seed: int | None = None,
    device: str = "cpu",
    ppo_kwargs: dict[str, Any] | None = None,
) -> PPO:
    """PPO with ``net_arch=dict(pi=hidden_sizes, vf=hidden_sizes)`` trained on the discrete ``env``."""
    if total_timesteps < 1:
        raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps}")
    sizes = [int(size) for size in hidden_sizes]
    model = PPO(
        "MlpPolicy",
        env,
        policy_kwargs=dict(net_arch=dict(pi=sizes, vf=sizes)),
        seed=seed,
        device=device,
        **(ppo_kwargs or {}),
    )
    use_quiet_logger(model)  # no empty tempdir/SB3-<time> folder per training
    return model.learn(total_timesteps=total_timesteps)
