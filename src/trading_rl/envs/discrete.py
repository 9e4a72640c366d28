"""The legacy 7-action env, kept to train and compare discrete policies and to migrate them.

It is the continuous env with a ``Discrete(7)`` action space: each action becomes a signal through
:class:`~trading_rl.envs.hybrid.ActionSpaceMigrator` and is traded, unsmoothed, by the same
portfolio rule, so discrete and continuous results differ only by the policy.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd

from trading_rl.envs.continuous import EnvConfig, TradingEnvBase
from trading_rl.envs.hybrid import N_DISCRETE_ACTIONS, ActionSpaceMigrator, DiscreteAction


class DiscreteTradingEnv(TradingEnvBase):
    """Actions ``Discrete(7)`` in :class:`DiscreteAction` order; ``smoothing_window`` is ignored."""

    smoothing_alpha = 1.0

    def __init__(
        self,
        prices: pd.DataFrame,
        features: pd.DataFrame,
        config: EnvConfig,
        close_history: pd.Series | None = None,
    ):
        super().__init__(prices, features, config, close_history)
        self.action_space = gym.spaces.Discrete(N_DISCRETE_ACTIONS)
        self.migrator = ActionSpaceMigrator(self.layout, self.config.hold_threshold)

    def step(self, action):
        action = int(np.asarray(action).item())
        obs, reward, terminated, truncated, info = self._act(self.migrator.to_continuous(action, self._obs))
        info["action_discrete"] = DiscreteAction(action).name
        return obs, reward, terminated, truncated, info
