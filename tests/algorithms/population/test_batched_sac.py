"""The batched actor and critics compute what each member's own SB3 modules compute on its row: the
Gaussian's mean and clamped log-std, and every Q network's value, for plain SB3 networks and for
DroQ's layer-normalised critics with another activation; what they cannot batch is refused by name.
(The update built on them is held to SB3's ``SAC.train`` in ``test_population_sac.py``.)"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3 import SAC
from torch import nn
from torch.func import stack_module_state

from trading_rl.algorithms.population.batched_sac import BatchedActor, BatchedCritics, layer_views
from trading_rl.algorithms.population.membership import PopulationError
from trading_rl.algorithms.population.population_sac import PopulationSAC
from trading_rl.algorithms.sac_icm.critics import RegularisedCriticPolicy

BATCH = 9


class _GridEnv(gym.Env):
    """A 2 × 3 observation (flattened by SB3's extractor) and two actions: shapes only."""

    observation_space = spaces.Box(-3.0, 3.0, (2, 3), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros((2, 3), np.float32), {}

    def step(self, action):
        return np.zeros((2, 3), np.float32), 0.0, False, False, {}


PLAIN = ("MlpPolicy", {"net_arch": [16, 8]})
DROQ_KWARGS = {"net_arch": [12], "critic_layer_norm": True, "n_critics": 3, "activation_fn": nn.Tanh}
DROQ = (RegularisedCriticPolicy, DROQ_KWARGS)


def _members(policy, policy_kwargs, seeds=(0, 1, 2)) -> list[SAC]:
    members = [SAC(policy, _GridEnv(), policy_kwargs=policy_kwargs, seed=seed, verbose=0) for seed in seeds]
    for member in members:  # away from the initialisation, so that biases and the log-std head matter
        with th.no_grad():
            for param in member.policy.parameters():
                param.add_(th.randn(param.shape, generator=th.Generator().manual_seed(param.numel())) * 0.5)
    return members


def _stacked(modules) -> dict[str, th.Tensor]:
    params, _ = stack_module_state(modules)
    return layer_views(params)


@pytest.mark.parametrize(("policy", "policy_kwargs"), [PLAIN, DROQ])
def test_batched_networks_give_each_members_sb3_outputs(policy, policy_kwargs):
    members = _members(policy, policy_kwargs)
    rng = np.random.default_rng(5)
    obs = th.as_tensor(rng.normal(size=(len(members), BATCH, 2, 3)) * 2, dtype=th.float32)
    actions = th.as_tensor(rng.uniform(-1, 1, size=(len(members), BATCH, 2)), dtype=th.float32)
    mean, log_std = BatchedActor(members[0].actor)(_stacked([m.actor for m in members]), obs)
    q_values = BatchedCritics(members[0].critic)(_stacked([m.critic for m in members]), obs, actions)
    assert q_values.shape == (len(members), BATCH, members[0].critic.n_critics)
    with th.no_grad():
        for i, member in enumerate(members):
            expected_mean, expected_log_std, _ = member.actor.get_action_dist_params(obs[i])
            th.testing.assert_close(mean[i], expected_mean, atol=1e-6, rtol=1e-6, msg=f"member {i} mean")
            th.testing.assert_close(log_std[i], expected_log_std, atol=1e-6, rtol=1e-6, msg=f"member {i} log-std")
            expected_q = th.cat(member.critic(obs[i], actions[i]), dim=1)
            th.testing.assert_close(q_values[i], expected_q, atol=1e-5, rtol=1e-6, msg=f"member {i} Q")
    # Some log-stds sit at SB3's clamp, so the clamp is exercised as well as the linear head.
    assert (log_std == 2).any() or (log_std == -20).any()


def test_the_population_refuses_dropout_and_other_extractors_by_name():
    dropout = _members(RegularisedCriticPolicy, {"net_arch": [8], "critic_dropout": 0.1}, seeds=(0,))
    with pytest.raises(PopulationError, match="critic_dropout"):
        PopulationSAC(dropout)
    shared = _members("MlpPolicy", {"net_arch": [8], "features_extractor_class": _Identity}, seeds=(0,))
    with pytest.raises(PopulationError, match="_Identity"):
        PopulationSAC(shared)


class _Identity(nn.Module):
    """A features extractor the batched networks do not know (SB3 would accept it)."""

    def __init__(self, observation_space: spaces.Box) -> None:
        super().__init__()
        self.features_dim = int(np.prod(observation_space.shape))

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return observations.flatten(1)
