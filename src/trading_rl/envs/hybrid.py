"""Mapping between the legacy 7-action space and the continuous signal, and an env taking both.

Mapping (discrete -> continuous signal, before smoothing):

==============  =====================================================================
HOLD            0.0
BUY_SMALL       0.33
BUY_MEDIUM      0.66
BUY_LARGE       1.0
SELL_PARTIAL    -0.5
SELL_ALL        -1.0
ADD_TO_WINNER   0.5 when the observation shows a long position in profit
                (``position_fraction > 0`` and ``unrealized_pnl > 0``), otherwise 0.0 (hold):
                the legacy action pyramided into winners only, and adding to a short is
                not "adding to a winner" in the legacy sense.
==============  =====================================================================

Continuous -> discrete: ``|v| <= hold_threshold`` is HOLD; otherwise the nearest value of the same
sign among BUY_SMALL/BUY_MEDIUM/BUY_LARGE or SELL_PARTIAL/SELL_ALL (ties go to the smaller trade).
ADD_TO_WINNER is never produced: it is a conditional buy, not a level of its own.

The values are float32 numbers, so a signal sent through a float32 ``Box`` action arrives unchanged
and a discrete policy reproduces its discrete env's equity path exactly on the continuous env.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.envs.continuous import ContinuousTradingEnv, EnvConfig
from trading_rl.envs.layout import ObservationLayout


class DiscreteAction(IntEnum):
    HOLD = 0
    BUY_SMALL = 1
    BUY_MEDIUM = 2
    BUY_LARGE = 3
    SELL_PARTIAL = 4
    SELL_ALL = 5
    ADD_TO_WINNER = 6


N_DISCRETE_ACTIONS = len(DiscreteAction)
ADD_TO_WINNER_VALUE = float(np.float32(0.5))
DISCRETE_TO_CONTINUOUS: dict[DiscreteAction, float] = {
    DiscreteAction.HOLD: 0.0,
    DiscreteAction.BUY_SMALL: float(np.float32(0.33)),
    DiscreteAction.BUY_MEDIUM: float(np.float32(0.66)),
    DiscreteAction.BUY_LARGE: 1.0,
    DiscreteAction.SELL_PARTIAL: -0.5,
    DiscreteAction.SELL_ALL: -1.0,
    DiscreteAction.ADD_TO_WINNER: ADD_TO_WINNER_VALUE,
}
_UNCONDITIONAL_VALUES = [DISCRETE_TO_CONTINUOUS[a] for a in DiscreteAction]
_BUY_LEVELS = (DiscreteAction.BUY_SMALL, DiscreteAction.BUY_MEDIUM, DiscreteAction.BUY_LARGE)
_SELL_LEVELS = (DiscreteAction.SELL_PARTIAL, DiscreteAction.SELL_ALL)


class ActionSpaceMigrator:
    """Translates discrete actions to continuous signals and back (module docstring: the mapping).

    Reads the observation through ``layout`` by field name, so it follows any change of window or
    feature set. Scalars in, Python numbers out; arrays in (a batch), arrays out.
    """

    def __init__(self, layout: ObservationLayout, hold_threshold: float):
        if not 0.0 <= hold_threshold < 1.0:
            raise ValueError(f"hold_threshold must lie in [0, 1), got {hold_threshold}")
        self.layout = layout
        self.hold_threshold = float(hold_threshold)
        self._position_index = layout.index("position_fraction")
        self._pnl_index = layout.index("unrealized_pnl")

    def in_profitable_long(self, obs: np.ndarray):
        """Whether ``obs`` (one or a batch) shows a long position with an unrealised gain."""
        obs = np.asarray(obs)
        result = (obs[..., self._position_index] > 0) & (obs[..., self._pnl_index] > 0)
        return bool(result) if result.ndim == 0 else result

    def to_continuous(self, action, obs: np.ndarray):
        """Signal in [-1, 1] for discrete ``action`` given the observation it was chosen on."""
        actions = np.asarray(action)
        if actions.dtype.kind not in "iu" or actions.size == 0:
            raise ValueError(f"discrete actions must be integers, got {action!r}")
        if actions.min() < 0 or actions.max() >= N_DISCRETE_ACTIONS:
            raise ValueError(f"discrete actions must lie in [0, {N_DISCRETE_ACTIONS - 1}], got {action!r}")
        if actions.ndim == 0:
            index = int(actions)
            if index == DiscreteAction.ADD_TO_WINNER:
                return ADD_TO_WINNER_VALUE if self.in_profitable_long(obs) else 0.0
            return _UNCONDITIONAL_VALUES[index]
        values = np.asarray(_UNCONDITIONAL_VALUES, dtype=np.float32)[actions]
        add = actions == DiscreteAction.ADD_TO_WINNER
        return np.where(add & ~self.in_profitable_long(obs), np.float32(0.0), values)

    def to_discrete(self, value):
        """Nearest discrete action to a continuous signal (one value or an array)."""
        values = np.asarray(value, dtype=np.float64)
        result = np.full(values.shape, int(DiscreteAction.HOLD), dtype=np.int64)
        for levels, side in (
            (_BUY_LEVELS, values > self.hold_threshold),
            (_SELL_LEVELS, values < -self.hold_threshold),
        ):
            targets = np.array([DISCRETE_TO_CONTINUOUS[a] for a in levels])
            nearest = np.argmin(np.abs(values[..., None] - targets), axis=-1)  # first wins ties
            result = np.where(side, np.asarray(levels, dtype=np.int64)[nearest], result)
        single = values.size == 1 and values.ndim <= 1  # one value, bare or as a (1,) action
        return int(result.reshape(-1)[0]) if single else result


def is_discrete_action(action: Any) -> bool:
    """Integers (Python or numpy, scalar or integer array) are discrete actions; floats are signals."""
    if isinstance(action, (bool, np.bool_)):
        return False
    if isinstance(action, (int, np.integer)):
        return True
    return isinstance(action, np.ndarray) and action.dtype.kind in "iu"


class HybridTradingEnv(ContinuousTradingEnv):
    """The continuous env that also accepts legacy discrete actions (integers, see ``is_discrete_action``).

    Discrete actions are mapped by :class:`ActionSpaceMigrator` and then go through the same
    smoothing and trade rule as a continuous signal; set ``smoothing_window=1`` to replay a discrete
    policy exactly. The action space is the continuous ``Box``.
    """

    def __init__(
        self,
        prices: pd.DataFrame,
        features: pd.DataFrame,
        config: EnvConfig,
        close_history: pd.Series | None = None,
    ):
        super().__init__(prices, features, config, close_history)
        self.migrator = ActionSpaceMigrator(self.layout, self.config.hold_threshold)

    def step(self, action):
        if is_discrete_action(action):
            index = np.asarray(action).reshape(-1)
            if index.size != 1:
                raise ValueError(f"expected one discrete action, got {action!r}")
            return self._act(self.migrator.to_continuous(index[0], self._obs))
        return super().step(action)
