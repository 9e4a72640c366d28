"""Warm-starting a SAC whose input grew: first layers split into carried and fresh columns.

The hierarchical agent's low-level SAC sees the SAC+ICM observation plus new inputs (the option
one-hot, the HER goals). Its first ``Linear`` (actor and each critic) is a :class:`WidenedLinear`:
mathematically one ``Linear`` over the whole input, whose weight is the carried block (the SAC+ICM
weights, applied to the columns where the old inputs now live) next to a fresh block for the new
columns, initialised to zero. Keeping the two blocks as two products instead of one wider matrix is
what makes the warm start exact: the carried product has the same inner dimension and operands as
the SAC+ICM layer, so BLAS sums the same terms in the same order, and the fresh product adds an exact
zero. Before training the low-level action and Q-values equal the SAC+ICM ones bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch as th
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.sac.policies import Actor, SACPolicy
from torch import nn


class WidenedLinear(nn.Module):
    """``y = carried(x[:, carried_columns]) + fresh(x[:, other columns])``; ``fresh`` starts at zero
    and has no bias (the carried layer's bias is the layer's bias)."""

    carried_index: th.Tensor
    fresh_index: th.Tensor

    def __init__(self, in_features: int, out_features: int, carried_columns: Sequence[int]) -> None:
        super().__init__()
        carried = [int(column) for column in carried_columns]
        if len(set(carried)) != len(carried) or not all(0 <= column < in_features for column in carried):
            raise ValueError(f"carried_columns must be distinct indices below {in_features}, got {carried}")
        fresh = sorted(set(range(in_features)) - set(carried))
        if not fresh:
            raise ValueError("WidenedLinear needs at least one new input column")
        self.in_features = in_features
        self.out_features = out_features
        self.register_buffer("carried_index", th.as_tensor(carried, dtype=th.long), persistent=False)
        self.register_buffer("fresh_index", th.as_tensor(fresh, dtype=th.long), persistent=False)
        self.carried = nn.Linear(len(carried), out_features)
        self.fresh = nn.Linear(len(fresh), out_features, bias=False)
        nn.init.zeros_(self.fresh.weight)

    def forward(self, inputs: th.Tensor) -> th.Tensor:
        return self.carried(inputs.index_select(-1, self.carried_index)) + self.fresh(
            inputs.index_select(-1, self.fresh_index)
        )


def _widen_first_layer(mlp: nn.Sequential, carried_columns: Sequence[int], owner: str) -> None:
    """Replace ``mlp``'s first ``Linear`` by a :class:`WidenedLinear`, unless the input did not grow
    (every column carried, in place): then the plain layer already is the source's."""
    first = mlp[0] if len(mlp) else None
    if not isinstance(first, nn.Linear):
        raise ValueError(f"{owner} has no hidden layer to widen: give the source SAC a non-empty net_arch")
    if list(carried_columns) == list(range(first.in_features)):
        return
    mlp[0] = WidenedLinear(first.in_features, first.out_features, carried_columns)


class WidenedSACPolicy(SACPolicy):
    """SB3 ``SACPolicy`` whose actor and critics start with a :class:`WidenedLinear` (a plain
    ``Linear`` when there are no new inputs, e.g. no options and no HER).

    ``carried_columns`` are the positions, in the flattened policy input, of the inputs the source
    model had (in the source's order); the critics also carry the action columns after them. Pass
    ``features_extractor_class=CombinedExtractor`` for Dict observations, as SB3's
    ``MultiInputPolicy`` does. Saved and loaded like any SB3 policy (the columns are a constructor
    argument, kept in the model's ``policy_kwargs``).
    """

    def __init__(self, *args: Any, carried_columns: Sequence[int], **kwargs: Any) -> None:
        self.carried_columns = [int(column) for column in carried_columns]
        super().__init__(*args, **kwargs)

    def make_actor(self, features_extractor=None) -> Actor:
        actor = super().make_actor(features_extractor)
        _widen_first_layer(actor.latent_pi, self.carried_columns, "the actor")
        return actor

    def make_critic(self, features_extractor=None):
        critic = super().make_critic(features_extractor)
        action_dim = get_action_dim(self.action_space)
        for index, q_net in enumerate(critic.q_networks):
            inputs = getattr(q_net[0], "in_features", action_dim)  # features, then the action
            action_columns = list(range(inputs - action_dim, inputs))
            _widen_first_layer(q_net, self.carried_columns + action_columns, f"critic {index}")
        return critic

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "carried_columns": self.carried_columns}


def warm_start(source_policy: nn.Module, target_policy: WidenedSACPolicy) -> None:
    """Copy every tensor of ``source_policy`` (an SB3 SAC policy on the old inputs) into
    ``target_policy``; a widened layer's carried block takes the source layer's weight and bias and
    its fresh block is set to zero. Any other difference in architecture raises ``ValueError``."""
    source = source_policy.state_dict()
    renamed: dict[str, str] = {}
    for name, module in target_policy.named_modules():
        if isinstance(module, WidenedLinear):
            renamed[f"{name}.carried.weight"] = f"{name}.weight"
            renamed[f"{name}.carried.bias"] = f"{name}.bias"
    copied: dict[str, th.Tensor] = {}
    for key, value in target_policy.state_dict().items():
        if key.endswith(".fresh.weight"):
            copied[key] = th.zeros_like(value)
            continue
        source_key = renamed.get(key, key)
        if source_key not in source:
            raise ValueError(f"the warm-start source has a different architecture; it lacks {source_key!r}")
        if source[source_key].shape != value.shape:
            raise ValueError(
                f"cannot warm-start {key}: source {source_key} has shape {tuple(source[source_key].shape)}, "
                f"target {tuple(value.shape)}"
            )
        copied[key] = source[source_key].clone().to(value.dtype)
    target_policy.load_state_dict(copied)
