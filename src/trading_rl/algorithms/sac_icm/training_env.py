"""The training env as the sac_icm agent sees it: the curriculum and auxiliary-target wrappers that
its parameters switch on, around a training ``TradingEnvBase``.

One function for every place that hands a training env to the agent (``build_agent``, a
walk-forward fine-tune's ``set_env``), so none of them can forget a wrapper.
"""

from __future__ import annotations

import gymnasium as gym
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.vec_env import VecEnv

from trading_rl.algorithms.sac_icm.auxiliary import AuxiliaryTargets
from trading_rl.training.curriculum import Curriculum, CurriculumParams
from trading_rl.training.params import AuxiliaryConfig


def wrap_training_env(env: gym.Env, curriculum: CurriculumParams, auxiliary: AuxiliaryConfig | None) -> gym.Env:
    """``env`` with ``Curriculum`` (if ``curriculum.enabled``) and ``AuxiliaryTargets`` (with
    ``auxiliary``, the switched-on heads' config) around it; wrappers already present are not added
    twice."""
    if auxiliary is None and not curriculum.enabled:
        return env
    if isinstance(env, VecEnv):
        raise ValueError(
            "sac_icm.agent.curriculum / auxiliary wrap a single training env; build the agent on one env, "
            "not a vectorised one"
        )
    if auxiliary is not None and not is_wrapped(env, AuxiliaryTargets):
        env = AuxiliaryTargets(env, auxiliary)
    if curriculum.enabled and not is_wrapped(env, Curriculum):
        env = Curriculum(env, curriculum)
    return env
