"""DroQ-style critics for SB3's SAC: each Q network with dropout and layer normalisation.

Why: DroQ (Hiraoka et al., 2022) trains at a high update-to-data ratio (many gradient steps per env
step) without the critic over-fitting its few samples by regularising every hidden layer of the Q
networks (Linear -> Dropout -> LayerNorm -> activation); REDQ reaches the same with a larger
ensemble. SB3's ``ContinuousCritic`` has ``n_critics`` (the ensemble, minimum over all of them in
the target) but neither regulariser, so this critic builds its Q networks itself. Dropout is active
while SAC trains (``set_training_mode(True)``) and off in the target critic and at prediction time,
as SB3 switches the modes.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.policies import ContinuousCritic
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.sac.policies import SACPolicy
from torch import nn


def regularised_q_network(
    input_dim: int, net_arch: list[int], activation_fn: type[nn.Module], dropout: float, layer_norm: bool
) -> nn.Sequential:
    """An MLP to one Q value; every hidden layer Linear, Dropout (if > 0), LayerNorm (if asked), activation."""
    layers: list[nn.Module] = []
    width = input_dim
    for hidden in net_arch:
        layers.append(nn.Linear(width, hidden))
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        if layer_norm:
            layers.append(nn.LayerNorm(hidden))
        layers.append(activation_fn())
        width = hidden
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


class RegularisedCritic(ContinuousCritic):
    """``ContinuousCritic`` whose ``n_critics`` Q networks are ``regularised_q_network``s."""

    def __init__(self, *, n_critics: int = 2, dropout: float, layer_norm: bool, **critic_kwargs: Any) -> None:
        super().__init__(**critic_kwargs, n_critics=0)
        self.n_critics = n_critics
        input_dim = critic_kwargs["features_dim"] + get_action_dim(self.action_space)
        for index in range(n_critics):
            q_net = regularised_q_network(
                input_dim,
                critic_kwargs["net_arch"],
                critic_kwargs.get("activation_fn", nn.ReLU),
                dropout,
                layer_norm,
            )
            self.add_module(f"qf{index}", q_net)
            self.q_networks.append(q_net)


class RegularisedCriticPolicy(SACPolicy):
    """SB3's SAC policy with ``RegularisedCritic`` critics (``critic_dropout``, ``critic_layer_norm``)."""

    def __init__(self, *args: Any, critic_dropout: float = 0.0, critic_layer_norm: bool = False, **kwargs: Any):
        self.critic_dropout = critic_dropout
        self.critic_layer_norm = critic_layer_norm
        super().__init__(*args, **kwargs)

    def make_critic(self, features_extractor=None) -> RegularisedCritic:
        critic_kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        critic = RegularisedCritic(**critic_kwargs, dropout=self.critic_dropout, layer_norm=self.critic_layer_norm)
        return critic.to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(critic_dropout=self.critic_dropout, critic_layer_norm=self.critic_layer_norm)
        return data
