import math

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.running_mean_std import RunningMeanStd as SB3RunningMeanStd

from trading_rl.agents.icm import ICMConfig, IntrinsicCuriosityModule, RunningMeanStd


def _batch(seed: int = 0, n: int = 64, obs_dim: int = 5):
    g = th.Generator().manual_seed(seed)
    obs = th.randn(n, obs_dim, generator=g)
    actions = th.rand(n, 1, generator=g) * 2 - 1
    # A learnable transition: the next observation depends on the observation and the action.
    next_obs = 0.9 * obs + actions * th.linspace(-1, 1, obs_dim)
    return obs, actions, next_obs


def _icm(**config) -> IntrinsicCuriosityModule:
    th.manual_seed(0)
    return IntrinsicCuriosityModule(5, 1, ICMConfig(feature_dim=8, hidden_dim=32, **config))


def test_running_mean_std_matches_numpy_over_all_batches():
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, 2.0, size=n) for n in (7, 50, 1, 200)]
    stats = RunningMeanStd(epsilon=1e-12)
    for batch in batches:
        stats.update(th.as_tensor(batch))
    everything = np.concatenate(batches)
    assert float(stats.mean) == pytest.approx(everything.mean(), rel=1e-9)
    assert float(stats.var) == pytest.approx(everything.var(), rel=1e-9)
    assert float(stats.count) == pytest.approx(everything.size)


def test_one_update_changes_every_parameter_and_uses_the_documented_loss():
    icm = _icm(beta=0.2)
    obs, actions, next_obs = _batch()
    before = {name: p.detach().clone() for name, p in icm.named_parameters()}

    losses = icm.losses(obs, actions, next_obs)
    with th.no_grad():
        phi, phi_next = icm.encoder(obs), icm.encoder(next_obs)
        predicted = icm.forward_model(th.cat([phi, actions], 1))
        forward_by_hand = (0.5 * ((predicted - phi_next) ** 2).sum(1)).mean()
        inverse_by_hand = ((icm.inverse_model(th.cat([phi, phi_next], 1)) - actions) ** 2).mean()
    losses = {name: float(value.detach().mean()) for name, value in losses.items()}
    assert losses["forward_loss"] == pytest.approx(float(forward_by_hand), rel=1e-5)
    assert losses["inverse_loss"] == pytest.approx(float(inverse_by_hand), rel=1e-5)
    assert losses["total_loss"] == pytest.approx(0.8 * float(inverse_by_hand) + 0.2 * float(forward_by_hand), rel=1e-5)

    icm.update(obs, actions, next_obs)
    unchanged = [name for name, p in icm.named_parameters() if th.equal(p, before[name])]
    assert unchanged == []


def test_forward_loss_falls_on_a_fixed_batch():
    icm = _icm()
    batch = _batch()
    first = icm.update(*batch)["forward_loss"]
    for _ in range(49):
        last = icm.update(*batch)["forward_loss"]
    assert last < 0.5 * first


def test_gradients_are_clipped_to_max_norm():
    icm = _icm(grad_clip=1e-3)
    obs, actions, next_obs = _batch()
    icm.update(obs * 100, actions, next_obs * 100)
    norm = th.linalg.vector_norm(th.stack([p.grad.norm() for p in icm.parameters()]))
    assert float(norm) <= 1e-3 * (1 + 1e-4)


def test_intrinsic_reward_is_eta_times_half_squared_error_normalised_and_clipped():
    icm = _icm(eta=0.01, reward_clip=5.0)
    obs, actions, next_obs = _batch()
    next_obs = next_obs.clone()
    next_obs[0] += 1000.0  # one wildly surprising transition, to hit the clip
    with th.no_grad():
        predicted = icm.forward_model(th.cat([icm.encoder(obs), actions], 1))
        raw = 0.01 * 0.5 * ((predicted - icm.encoder(next_obs)) ** 2).sum(1)
    assert th.allclose(icm.raw_intrinsic_reward(obs, actions, next_obs), raw)

    reward = icm.intrinsic_reward(obs, actions, next_obs)
    reference = SB3RunningMeanStd(epsilon=1e-4, shape=())  # an independent implementation
    reference.update(raw.double().numpy())
    mean, var = reference.mean, reference.var
    expected = np.clip((raw.double().numpy() - mean) / np.sqrt(var + 1e-8), -5, 5)
    np.testing.assert_allclose(reward.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert float(reward[0]) == 5.0


def test_non_finite_loss_skips_the_step_and_is_reported():
    icm = _icm()
    obs, actions, next_obs = _batch()
    before = [p.detach().clone() for p in icm.parameters()]
    obs = obs.clone()
    obs[3, 0] = math.nan
    losses = icm.update(obs, actions, next_obs)
    assert math.isnan(losses["forward_loss"])
    assert all(th.equal(p, b) for p, b in zip(icm.parameters(), before))


def test_config_rejects_out_of_range_values():
    with pytest.raises(ValueError, match="icm.beta"):
        ICMConfig(beta=1.5)
    with pytest.raises(ValueError, match="icm.train_freq"):
        ICMConfig(train_freq=0)
