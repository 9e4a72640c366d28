"""The hand-written batched ICM is each member's ``IntrinsicCuriosityModule``: same weights and
inputs give the same forward errors, losses, intrinsic rewards and gradients (autograd's, member by
member) within float tolerance, with every gradient contiguous for the fused AdamW."""

from __future__ import annotations

import pytest
import torch as th
from torch.func import stack_module_state

from trading_rl.algorithms.population.batched_icm import (
    PARAMETER_NAMES,
    check_parameter_names,
    curiosity_forward,
    curiosity_gradients,
)
from trading_rl.algorithms.population.membership import PopulationError
from trading_rl.algorithms.sac_icm.icm import IntrinsicCuriosityModule
from trading_rl.training.params import ICMConfig

OBS_DIM, ACTION_DIM, BATCH = 5, 2, 12
# Per member: its own β (the loss mix, including both ends) and η (the reward scale).
CONFIGS = [
    ICMConfig(feature_dim=6, hidden_dim=10, beta=0.2, eta=0.01),
    ICMConfig(feature_dim=6, hidden_dim=10, beta=0.0, eta=0.5),
    ICMConfig(feature_dim=6, hidden_dim=10, beta=1.0, eta=2.0),
    ICMConfig(feature_dim=6, hidden_dim=10, beta=0.7, eta=0.1),
]


def _members() -> list[IntrinsicCuriosityModule]:
    modules = []
    for seed, config in enumerate(CONFIGS):
        th.manual_seed(seed)
        modules.append(IntrinsicCuriosityModule(OBS_DIM, ACTION_DIM, config))
    return modules


def _inputs(seed: int) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    generator = th.Generator().manual_seed(seed)
    shape = (len(CONFIGS), BATCH)
    observations = th.randn(*shape, OBS_DIM, generator=generator)
    actions = th.rand(*shape, ACTION_DIM, generator=generator) * 2 - 1
    next_observations = th.randn(*shape, OBS_DIM, generator=generator)
    return observations, actions, next_observations


def test_batched_icm_equals_each_members_icm_and_its_autograd():
    members = _members()
    observations, actions, next_observations = _inputs(seed=3)
    stacked, _ = stack_module_state(members)
    beta = th.tensor([config.beta for config in CONFIGS])

    forward = curiosity_forward(stacked, observations, actions, next_observations, train=True)
    grads = curiosity_gradients(stacked, forward, beta)

    assert forward.inverse_loss is not None
    assert sorted(grads) == sorted(PARAMETER_NAMES) == sorted(stacked)
    for i, icm in enumerate(members):
        inputs = (observations[i], actions[i], next_observations[i])
        losses = icm.losses(*inputs)
        th.testing.assert_close(forward.error[i], losses["forward_error"], msg=f"member {i} forward error")
        th.testing.assert_close(forward.inverse_loss[i], losses["inverse_loss"], msg=f"member {i} inverse loss")
        th.testing.assert_close(
            CONFIGS[i].eta * forward.error[i], icm.raw_intrinsic_reward(*inputs), msg=f"member {i} intrinsic reward"
        )
        icm.zero_grad()
        losses["total_loss"].backward()
        assert icm.encoder[0].weight.grad.abs().sum() > 0, "both losses reach the encoder"
        for name, parameter in icm.named_parameters():
            th.testing.assert_close(grads[name][i], parameter.grad, rtol=1e-5, atol=1e-7, msg=f"member {i} {name}")
    for name, grad in grads.items():
        assert grad.is_contiguous(), f"{name}'s gradient is strided; the fused AdamW would copy it"


def test_a_reward_only_pass_gives_the_same_errors_and_no_gradients():
    members = _members()
    observations, actions, next_observations = _inputs(seed=4)
    stacked, _ = stack_module_state(members)
    reward_only = curiosity_forward(stacked, observations, actions, next_observations, train=False)
    training = curiosity_forward(stacked, observations, actions, next_observations, train=True)

    th.testing.assert_close(reward_only.error, training.error, rtol=0, atol=0)
    assert reward_only.inverse_loss is None
    with pytest.raises(ValueError, match="train=True"):
        curiosity_gradients(stacked, reward_only, th.zeros(len(CONFIGS)))


def test_an_icm_with_other_layers_is_refused():
    check_parameter_names(list(PARAMETER_NAMES))
    with pytest.raises(PopulationError, match="encoder.4.weight"):
        check_parameter_names([*PARAMETER_NAMES, "encoder.4.weight"])
