"""The V-trace agent's network: a Gaussian policy-mean MLP with a learned state-independent log-std
and a separate value MLP (``GaussianActorCritic``), the one log-density formula actors and learner
share (``gaussian_log_prob``), and the weights the learner broadcasts (``policy_weights``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from trading_rl.training.params import ACTIVATIONS

if TYPE_CHECKING:
    from trading_rl.algorithms.vtrace.actor_learner import VTraceParams


def _mlp(sizes: Sequence[int], activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for index, (size_in, size_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(size_in, size_out))
        if index < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Diagonal Gaussian log density of ``actions``, summed over the last (action) dimension; the one
    formula both actors (behaviour) and learner (target) use."""
    return (-0.5 * ((actions - mean) / log_std.exp()).pow(2) - log_std - _LOG_SQRT_2PI).sum(-1)


class GaussianActorCritic(nn.Module):
    """Policy-mean MLP with a learned state-independent log-std, and a separate value MLP."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        net_arch: Sequence[int] = (64, 64),
        activation: str = "tanh",
        initial_log_std: float = -0.5,
    ) -> None:
        super().__init__()
        act = ACTIVATIONS[activation]
        self.mean_net = _mlp([obs_dim, *net_arch, action_dim], act)
        self.value_net = _mlp([obs_dim, *net_arch, 1], act)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(initial_log_std)))
        # A small last layer starts the policy near "hold" with the initial std doing the exploring.
        mean_head = self.mean_net[-1]
        assert isinstance(mean_head, nn.Linear), "_mlp ends with a Linear layer"
        with torch.no_grad():
            mean_head.weight.mul_(0.01)
            mean_head.bias.zero_()

    def mean(self, observations: torch.Tensor) -> torch.Tensor:
        return self.mean_net(observations)

    def log_prob(self, observations: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log density of the continuous ``actions`` (summed over action dimensions), shape ``[...]``."""
        return gaussian_log_prob(actions, self.mean_net(observations), self.log_std)

    def value(self, observations: torch.Tensor) -> torch.Tensor:
        return self.value_net(observations).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy of the Gaussian (the same in every state: the std does not depend on it)."""
        return (self.log_std + 0.5 * math.log(2.0 * math.pi * math.e)).sum()


def build_actor_critic(obs_dim: int, action_dim: int, params: VTraceParams, seed: int) -> GaussianActorCritic:
    """The network for resolved ``params``, initialised from ``seed`` without touching torch's global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GaussianActorCritic(obs_dim, action_dim, params.net_arch, params.activation, params.initial_log_std)


def policy_weights(model: nn.Module) -> dict[str, np.ndarray]:
    """A CPU copy of ``model``'s weights as numpy arrays: what the learner broadcasts."""
    return {name: tensor.detach().cpu().numpy().copy() for name, tensor in model.state_dict().items()}
