import math

import numpy as np
import pytest
import torch as th

from trading_rl.algorithms.sac_icm.icm import IntrinsicCuriosityModule, MovingAverage
from trading_rl.training.params import ICMConfig


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


def test_moving_average_is_bias_corrected():
    values = [2.0, 0.5, 9.0, 1.0]
    average = MovingAverage(decay=0.9)
    assert float(average.value) == 1.0  # nothing seen yet
    for value in values:
        average.update(th.tensor(value))
    # By hand: m_t = 0.9 m_{t-1} + 0.1 x_t, then m_t / (1 - 0.9^t)
    expected = 0.0
    for value in values:
        expected = 0.9 * expected + 0.1 * value
    assert float(average.value) == pytest.approx(expected / (1 - 0.9 ** len(values)), rel=1e-12)
    first = MovingAverage(decay=0.99)
    first.update(th.tensor(3.0))
    assert float(first.value) == pytest.approx(3.0)  # not shrunk towards 0


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


def test_intrinsic_reward_is_the_log_compressed_surprise_over_its_spread_and_clipped():
    icm = _icm(eta=0.01, reward_clip=5.0)
    obs, actions, next_obs = _batch()
    next_obs = next_obs.clone()
    next_obs[0] += 1000.0  # one wildly surprising transition, to hit the clip
    with th.no_grad():
        predicted = icm.forward_model(th.cat([icm.encoder(obs), actions], 1))
        raw = 0.01 * 0.5 * ((predicted - icm.encoder(next_obs)) ** 2).sum(1)
    assert th.allclose(icm.raw_intrinsic_reward(obs, actions, next_obs), raw)

    reward = icm.intrinsic_reward(obs, actions, next_obs)
    # First batch (bias-corrected averages = this batch's statistics), by hand with numpy:
    values = raw.double().numpy()
    lower_median = np.sort(values)[(values.size - 1) // 2]  # torch.median: the lower middle value
    compressed = np.log1p(values / lower_median)
    expected = np.minimum(compressed / compressed.std(), 5.0)
    np.testing.assert_allclose(reward.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert float(reward[0]) == 5.0
    assert float(reward.min()) >= 0.0  # not centred: a bonus


def test_bonus_keeps_its_spread_on_heavy_tailed_errors():
    """The defect this normalisation fixes: the error is heavy-tailed (a few transitions thousands of
    times the median). Scaled by the std, every typical bonus was ~0; relative to the median and
    log-compressed, the batch's bonuses keep a spread of about one unit."""
    icm = _icm()
    rng = np.random.default_rng(0)
    for _ in range(30):
        raw = th.as_tensor(rng.lognormal(mean=-14.0, sigma=3.0, size=256))  # max ~3,000x the median
        bonus = icm._normalised(raw)
    by_std = (raw / raw.std()).numpy()
    assert np.median(by_std) < 0.02  # what scaling by the std gave the typical transition
    assert 0.7 < float(bonus.std()) < 1.3 and float(bonus.median()) > 0.3


def test_models_saved_with_earlier_statistics_still_load():
    icm = _icm()
    state = {k: v for k, v in icm.state_dict().items() if not k.startswith(("intrinsic_", "extrinsic_scale."))}
    for old in ("reward_stats", "extrinsic_stats"):
        state[f"{old}.mean"] = th.tensor(0.3, dtype=th.float64)
        state[f"{old}.var"] = th.tensor(4.0, dtype=th.float64)
        state[f"{old}.count"] = th.tensor(100.0, dtype=th.float64)
    state["intrinsic_scale.average"] = th.tensor(2.0, dtype=th.float64)
    icm.load_state_dict(state)
    assert float(icm.intrinsic_median.weight) == 0.0  # the normalisation restarts from the next batch


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
