"""Episode rewards of a bare SB3 ``learn`` call, for a tracker while training runs.

``train_agent`` reports the training episode reward with each evaluation; the phases that call
SB3's ``learn`` themselves (the hierarchical agent, the migrated agents' fine-tune) get it from
this callback instead. It needs no ``Monitor`` (the option layer's VecEnv has none): it adds up
each env's own reward (``info["base_reward"]`` where a wrapper replaced the reward, as HER's goal
view and the shaped env do) and reports every finished episode at the step it ended.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

MetricsCallback = Callable[[dict, int], None]


class EpisodeRewardCallback(BaseCallback):
    """``metrics_callback({"train/episode_reward": r, "train/episode_length": n}, step)`` for every
    training episode that ends (one call per env that finished, at the model's timestep)."""

    def __init__(self, metrics_callback: MetricsCallback) -> None:
        super().__init__()
        self.metrics_callback = metrics_callback
        self._returns = np.zeros(0)
        self._lengths = np.zeros(0, dtype=np.int64)

    def _on_training_start(self) -> None:
        # A fine-tune or a resumed learn() starts fresh episodes: no partial sum carries over.
        self._returns = np.zeros(self.training_env.num_envs)
        self._lengths = np.zeros(self.training_env.num_envs, dtype=np.int64)

    def _on_step(self) -> bool:
        rewards, dones, infos = self.locals["rewards"], self.locals["dones"], self.locals["infos"]
        self._returns += [info.get("base_reward", reward) for info, reward in zip(infos, rewards)]
        self._lengths += 1
        for row in np.flatnonzero(dones):
            self.metrics_callback(
                {"train/episode_reward": float(self._returns[row]), "train/episode_length": int(self._lengths[row])},
                self.num_timesteps,
            )
            self._returns[row], self._lengths[row] = 0.0, 0
        return True


def with_episode_rewards(callback: BaseCallback | None, metrics_callback: MetricsCallback | None) -> list[BaseCallback]:
    """``learn``'s callbacks: ``callback`` (when given) and, with a ``metrics_callback``, the episode rewards."""
    callbacks = [callback] if callback is not None else []
    return callbacks + ([EpisodeRewardCallback(metrics_callback)] if metrics_callback is not None else [])
