import math

import numpy as np
import pytest
import torch as th

from trading_rl.agents.icm import EmaVariance, ICMConfig, IntrinsicCuriosityModule


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


def test_ema_variance_is_the_bias_corrected_moving_average_of_batch_variances():
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, scale, size=n) for scale, n in ((2.0, 7), (0.5, 50), (9.0, 3), (1.0, 200))]
    ema = EmaVariance(decay=0.9)
    assert float(ema.std) == 1.0  # nothing seen yet
    for batch in batches:
        ema.update(th.as_tensor(batch))
    # By hand: m_t = 0.9 m_{t-1} + 0.1 var_t, then m_t / (1 - 0.9^t)
    average = 0.0
    for batch in batches:
        average = 0.9 * average + 0.1 * batch.var()
    expected = np.sqrt(average / (1 - 0.9 ** len(batches)))
    assert float(ema.std) == pytest.approx(expected, rel=1e-9)
    first = EmaVariance(decay=0.99)
    first.update(th.as_tensor(batches[0]))
    assert float(first.std) == pytest.approx(batches[0].std(), rel=1e-9)  # not shrunk towards 0


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


def test_intrinsic_reward_is_eta_times_half_squared_error_over_its_moving_std_and_clipped():
    icm = _icm(eta=0.01, reward_clip=5.0)
    obs, actions, next_obs = _batch()
    next_obs = next_obs.clone()
    next_obs[0] += 1000.0  # one wildly surprising transition, to hit the clip
    with th.no_grad():
        predicted = icm.forward_model(th.cat([icm.encoder(obs), actions], 1))
        raw = 0.01 * 0.5 * ((predicted - icm.encoder(next_obs)) ** 2).sum(1)
    assert th.allclose(icm.raw_intrinsic_reward(obs, actions, next_obs), raw)

    reward = icm.intrinsic_reward(obs, actions, next_obs)
    # First batch: the bias-corrected moving std is this batch's std; no centring, so every
    # bonus stays >= 0 and only the top is clipped.
    expected = np.minimum(raw.double().numpy() / raw.double().numpy().std(), 5.0)
    np.testing.assert_allclose(reward.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert float(reward[0]) == 5.0
    assert float(reward.min()) >= 0.0


def test_bonus_keeps_its_spread_as_the_forward_model_converges():
    """The defect this normalisation fixes: against all-time statistics the bonus of a converged
    forward model was a near-constant negative number. With the moving scale its batch std stays ~1."""
    icm = _icm(scale_decay=0.95)
    batch = _batch()
    first = None
    for step in range(300):
        reward, losses = icm.reward_and_update(*_batch(seed=step % 7))
        first = first if first is not None else losses["forward_loss"]
    assert losses["forward_loss"] < 0.1 * first  # the forward model has converged
    late = icm.intrinsic_reward(*batch)
    assert 0.5 < float(late.std()) < 2.0
    assert float(late.mean()) > 0.0


def test_models_saved_with_the_all_time_statistics_still_load():
    icm = _icm()
    state = {k: v for k, v in icm.state_dict().items() if "_scale." not in k}
    for old in ("reward_stats", "extrinsic_stats"):
        state[f"{old}.mean"] = th.tensor(0.3, dtype=th.float64)
        state[f"{old}.var"] = th.tensor(4.0, dtype=th.float64)
        state[f"{old}.count"] = th.tensor(100.0, dtype=th.float64)
    icm.load_state_dict(state)
    assert float(icm.intrinsic_scale.std) == pytest.approx(2.0)
    assert float(icm.extrinsic_scale.std) == pytest.approx(2.0)


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
    with pytest.raises(ValueError, match="icm.scale_decay"):
        ICMConfig(scale_decay=1.0)
