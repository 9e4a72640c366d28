"""The members' SAC actors and critics as batched matmuls over their stacked weights.

Through ``vmap(functional_call)`` a population step of the research learner ([32, 32], batch 64)
spent about a quarter of its time in torch.func's wrapping (``functional_call``'s reparametrisation,
pytree flattening, vmap's input processing) and only an eighth in the layers' own kernels
(docs/benchmarks.md, "A population per Ray worker"). Here every layer of SB3's ``Actor`` and
``ContinuousCritic`` (``RegularisedCritic``'s layer norm included) is one batched kernel over the
stacked weights ``[N, out, in]``, ``baddbmm`` for a linear layer as in ``batched_icm``; autograd
differentiates it. The math is SB3's per member: flatten the observation, the MLP, the mean and
the log-std clamped to SB3's bounds, the critics on (features, action) side by side.
``tests/algorithms/population/test_batched_sac.py`` holds the outputs to each member's own modules.

Shapes: ``N`` members, ``B`` samples, observations ``[N, B, ...]``, actions ``[N, B, A]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ContinuousCritic
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.sac.policies import LOG_STD_MAX, LOG_STD_MIN, Actor
from torch import nn
from torch.nn import functional as F

from trading_rl.algorithms.population.membership import PopulationError
from trading_rl.training.params import ACTIVATIONS

# Elementwise activations a member's MLP may use (policy.activation's choices): applied to the
# stacked activations as they are, since they act on every number alone.
_ELEMENTWISE = tuple(ACTIVATIONS.values())


def layer_views(weights: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
    """Stacked weights as the batched layers read them: each matrix ``[M, out, in]`` as ``[M, in, out]``,
    each vector ``[M, d]`` as ``[M, 1, d]``. Views, so an optimiser's in-place steps show through:
    taken once per update (or once for good, of weights outside autograd), not once per layer call."""
    return {name: weight.transpose(1, 2) if weight.dim() == 3 else weight[:, None] for name, weight in weights.items()}


def batched_linear(views: dict[str, th.Tensor], layer: str, inputs: th.Tensor) -> th.Tensor:
    """``inputs @ weightᵀ + bias`` per member (``views``: ``layer_views``), ``[M, rows, in]`` → ``[M, rows, out]``."""
    return th.baddbmm(views[f"{layer}.bias"], inputs, views[f"{layer}.weight"])


def _layer_norm(views: dict[str, th.Tensor], layer: str, eps: float, inputs: th.Tensor) -> th.Tensor:
    """``nn.LayerNorm`` over the last axis with each member's own scale and shift."""
    normalised = F.layer_norm(inputs, inputs.shape[-1:], eps=eps)
    return th.addcmul(views[f"{layer}.bias"], normalised, views[f"{layer}.weight"])


# One layer over the layer views: (views, inputs) -> outputs.
Layer = Callable[[dict[str, th.Tensor], th.Tensor], th.Tensor]


def _linear_layer(name: str) -> Layer:
    return lambda views, inputs: batched_linear(views, name, inputs)


def _layer_norm_layer(name: str, eps: float) -> Layer:
    return lambda views, inputs: _layer_norm(views, name, eps, inputs)


def _elementwise_layer(activation: nn.Module) -> Layer:
    return lambda views, inputs: activation.forward(inputs)


class BatchedMLP:
    """An ``nn.Sequential`` of ``Linear``, ``LayerNorm`` and elementwise activations (SB3's
    ``create_mlp``, ``regularised_q_network`` without dropout) over stacked weights named
    ``{prefix}.{index}.weight`` etc. (``stack_module_state``'s names of the enclosing module), read
    through ``layer_views``."""

    def __init__(self, module: nn.Sequential, prefix: str, what: str) -> None:
        self.layers: list[Layer] = []
        self.parameter_names: list[str] = []
        for index, layer in enumerate(module):
            name = f"{prefix}.{index}"
            if isinstance(layer, nn.Linear) and layer.bias is not None:
                self.layers.append(_linear_layer(name))
            elif isinstance(layer, nn.LayerNorm) and layer.elementwise_affine and layer.bias is not None:
                self.layers.append(_layer_norm_layer(name, layer.eps))
            elif isinstance(layer, _ELEMENTWISE):
                self.layers.append(_elementwise_layer(layer))
            elif isinstance(layer, nn.Dropout) and layer.p == 0:
                continue
            else:
                raise PopulationError(
                    f"the members' {what} has a {layer!r} layer; the population batches Linear (with bias), "
                    "LayerNorm and elementwise activations only (no dropout: policy.critic_dropout 0, or "
                    "runtime.engine: sequential)"
                )
            self.parameter_names += [f"{name}.{kind}" for kind, _ in layer.named_parameters()]

    def __call__(self, views: dict[str, th.Tensor], inputs: th.Tensor) -> th.Tensor:
        for layer in self.layers:
            inputs = layer(views, inputs)
        return inputs


def _check_flat_features(module: Actor | ContinuousCritic, what: str) -> None:
    """The batched networks flatten a Box observation, as SB3's ``FlattenExtractor`` does."""
    space = module.observation_space
    if type(module.features_extractor) is not FlattenExtractor or not isinstance(space, spaces.Box):
        raise PopulationError(
            f"the members' {what} reads its observation through a {type(module.features_extractor).__name__} "
            f"on a {type(space).__name__} space; the population batches a FlattenExtractor on a Box only"
        )
    if module.normalize_images and is_image_space(space):
        raise PopulationError(f"the members' {what} normalises image observations, which the population does not")


def _check_names(covered: Sequence[str], module: nn.Module, what: str) -> None:
    names = [name for name, _ in module.named_parameters()]
    if sorted(covered) != sorted(names):
        raise PopulationError(
            f"the members' {what} has parameters {sorted(set(names) - set(covered))} the population "
            "does not compute with"
        )


class BatchedActor:
    """SB3 SAC's ``Actor.get_action_dist_params`` for every member (no gSDE)."""

    def __init__(self, actor: Actor) -> None:
        _check_flat_features(actor, "actor")
        self.latent = BatchedMLP(actor.latent_pi, "latent_pi", "actor")
        self.parameter_names = [*self.latent.parameter_names, "mu.weight", "mu.bias"]
        self.parameter_names += ["log_std.weight", "log_std.bias"]
        _check_names(self.parameter_names, actor, "actor")

    def __call__(self, views: dict[str, th.Tensor], observations: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """The Gaussians' means and log-stds ``[N, B, A]``."""
        latent = self.latent(views, observations.flatten(2).float())
        log_std = batched_linear(views, "log_std", latent).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return batched_linear(views, "mu", latent), log_std


class BatchedCritics:
    """SB3's ``ContinuousCritic.forward`` for every member, its Q-values side by side ``[N, B, n_critics]``."""

    def __init__(self, critic: ContinuousCritic) -> None:
        _check_flat_features(critic, "critic")
        self.q_networks = [
            BatchedMLP(q_net, f"qf{index}", "critic")  # type: ignore[arg-type]
            for index, q_net in enumerate(critic.q_networks)
        ]
        self.parameter_names = [name for q_net in self.q_networks for name in q_net.parameter_names]
        _check_names(self.parameter_names, critic, "critic")

    def __call__(self, views: dict[str, th.Tensor], observations: th.Tensor, actions: th.Tensor) -> th.Tensor:
        inputs = th.cat([observations.flatten(2).float(), actions], dim=2)
        return th.cat([q_net(views, inputs) for q_net in self.q_networks], dim=2)
