"""The curious members' ICMs forward and backward by hand, as batched matmuls over stacked weights.

``IntrinsicCuriosityModule`` (``sac_icm.icm``) is three two-layer MLPs: the encoder φ on both
observations, the forward model on (φ(s), a) and the inverse model on (φ(s), φ(s')) with a tanh head.
Through ``vmap(functional_call)`` and autograd, a population of 16 of them at the ICM's 128-wide layers
cost more than the members' whole SAC update (2026-12-06 profile, N = 16): every weight gradient came
back as a transposed view that was copied before the fused AdamW, every bias was added in a pass of
its own, and ``functional_call`` swapped the module's tensors on every call. Written out, each layer
is one ``baddbmm`` forward and two ``bmm`` backward that write contiguous ``[M, out, in]``
gradients, which is what the fused AdamW reads. ``tests/algorithms/population/test_batched_icm.py``
holds the errors, losses and gradients to each member's ``IntrinsicCuriosityModule`` and autograd.

Shapes: ``M`` members, ``B`` samples, observations ``[M, B, ...]``, actions ``[M, B, A]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch as th

from trading_rl.algorithms.population.batched_sac import batched_linear, layer_views
from trading_rl.algorithms.population.membership import PopulationError

# The ICM's parameters as ``stack_module_state`` names them, in the layers' order.
_ENCODER = ("encoder.0", "encoder.2")
_FORWARD_MODEL = ("forward_model.0", "forward_model.2")
_INVERSE_MODEL = ("inverse_model.0.0", "inverse_model.0.2")
PARAMETER_NAMES = tuple(
    f"{layer}.{kind}" for layer in _ENCODER + _FORWARD_MODEL + _INVERSE_MODEL for kind in ("weight", "bias")
)


def check_parameter_names(names: Sequence[str]) -> None:
    """Refuse an ICM whose layers are not the ones this module differentiates by hand."""
    if sorted(names) != sorted(PARAMETER_NAMES):
        raise PopulationError(
            f"the members' ICM has parameters {sorted(names)}; the batched ICM knows {sorted(PARAMETER_NAMES)} "
            "(IntrinsicCuriosityModule's encoder, forward and inverse MLPs)"
        )


def _linear_backward(
    weights: dict[str, th.Tensor], layer: str, inputs: th.Tensor, grad_output: th.Tensor, grads: dict[str, th.Tensor]
) -> th.Tensor:
    """Store the layer's weight and bias gradients in ``grads``; return the gradient of its inputs."""
    grads[f"{layer}.weight"] = th.bmm(grad_output.transpose(1, 2), inputs)
    grads[f"{layer}.bias"] = grad_output.sum(dim=1)
    return th.bmm(grad_output, weights[f"{layer}.weight"])


def _relu_backward(grad_output: th.Tensor, output: th.Tensor) -> th.Tensor:
    """``grad_output`` where the ReLU's ``output`` is positive, else 0: autograd's own kernel for it
    (a boolean mask through ``masked_fill_`` or ``where`` is ~25x slower on this CPU)."""
    return th.ops.aten.threshold_backward(grad_output, output, 0.0)


@dataclass
class CuriosityPass:
    """One forward pass: the per-sample forward error ``[M, B]``, the inverse loss ``[M]`` (``None``
    when the pass only rewards) and the activations the backward reads."""

    error: th.Tensor
    inverse_loss: th.Tensor | None
    activations: dict[str, th.Tensor]


@th.no_grad()
def curiosity_forward(
    weights: dict[str, th.Tensor],
    observations: th.Tensor,
    actions: th.Tensor,
    next_observations: th.Tensor,
    train: bool,
) -> CuriosityPass:
    """What ``IntrinsicCuriosityModule.forward`` computes, for every member at once; without
    ``train`` only the forward error (the reward needs nothing else)."""
    batch = observations.shape[1]
    views = layer_views(weights)
    both = th.cat([observations.flatten(2), next_observations.flatten(2)], dim=1).float()
    encoder_hidden = batched_linear(views, _ENCODER[0], both).relu_()
    features = batched_linear(views, _ENCODER[1], encoder_hidden)
    phi, phi_next = features[:, :batch], features[:, batch:]
    actions = actions.flatten(2).float()
    forward_input = th.cat([phi, actions], dim=2)
    forward_hidden = batched_linear(views, _FORWARD_MODEL[0], forward_input).relu_()
    difference = batched_linear(views, _FORWARD_MODEL[1], forward_hidden).sub_(phi_next)
    error = 0.5 * difference.square().sum(dim=2)
    activations = {
        "both": both,
        "encoder_hidden": encoder_hidden,
        "forward_input": forward_input,
        "forward_hidden": forward_hidden,
        "difference": difference,
        "actions": actions,
    }
    if not train:
        return CuriosityPass(error, None, activations)
    inverse_input = th.cat([phi, phi_next], dim=2)
    inverse_hidden = batched_linear(views, _INVERSE_MODEL[0], inverse_input).relu_()
    predicted_action = batched_linear(views, _INVERSE_MODEL[1], inverse_hidden).tanh_()
    inverse_loss = (predicted_action - actions).square().mean(dim=(1, 2))
    activations |= {
        "inverse_input": inverse_input,
        "inverse_hidden": inverse_hidden,
        "predicted_action": predicted_action,
    }
    return CuriosityPass(error, inverse_loss, activations)


@th.no_grad()
def curiosity_gradients(weights: dict[str, th.Tensor], forward: CuriosityPass, beta: th.Tensor) -> dict[str, th.Tensor]:
    """Each member's gradient of its ICM loss ``(1 − β)·L_inv + β·mean(error)`` (``curiosity_loss``)
    from a ``train`` pass, by parameter name, contiguous ``[M, ...]``. As in the ICM, the forward
    loss reaches the encoder through φ(s) and φ(s')."""
    saved = forward.activations
    if forward.inverse_loss is None:
        raise ValueError("curiosity_gradients needs a forward pass made with train=True")
    members, batch, feature_dim = saved["difference"].shape
    beta = beta.view(members, 1, 1)
    grads: dict[str, th.Tensor] = {}
    # Forward model: d(β·mean_b 0.5·||difference||²) = β/B · difference.
    grad_prediction = saved["difference"] * (beta / batch)
    grad_hidden = _linear_backward(weights, _FORWARD_MODEL[1], saved["forward_hidden"], grad_prediction, grads)
    grad_hidden = _relu_backward(grad_hidden, saved["forward_hidden"])
    grad_forward_input = _linear_backward(weights, _FORWARD_MODEL[0], saved["forward_input"], grad_hidden, grads)
    # Inverse model: d((1 − β)·mean (â − a)²) through the tanh head.
    predicted = saved["predicted_action"]
    grad_predicted = (predicted - saved["actions"]) * (2 * (1 - beta) / predicted[0].numel())
    grad_head = grad_predicted * (1 - predicted.square())
    grad_hidden = _linear_backward(weights, _INVERSE_MODEL[1], saved["inverse_hidden"], grad_head, grads)
    grad_hidden = _relu_backward(grad_hidden, saved["inverse_hidden"])
    grad_inverse_input = _linear_backward(weights, _INVERSE_MODEL[0], saved["inverse_input"], grad_hidden, grads)
    # Encoder: φ(s) feeds both models, φ(s') the inverse model and the forward error's target.
    grad_phi = grad_forward_input[..., :feature_dim] + grad_inverse_input[..., :feature_dim]
    grad_phi_next = grad_inverse_input[..., feature_dim:] - grad_prediction
    grad_features = th.cat([grad_phi, grad_phi_next], dim=1)
    grad_hidden = _linear_backward(weights, _ENCODER[1], saved["encoder_hidden"], grad_features, grads)
    grad_hidden = _relu_backward(grad_hidden, saved["encoder_hidden"])
    grads[f"{_ENCODER[0]}.weight"] = th.bmm(grad_hidden.transpose(1, 2), saved["both"])
    grads[f"{_ENCODER[0]}.bias"] = grad_hidden.sum(dim=1)
    return grads
