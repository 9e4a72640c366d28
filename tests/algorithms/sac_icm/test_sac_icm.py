import copy
import io
import tempfile

import numpy as np
import pytest
import torch as th
from helpers.sac_icm_toy import ToyTradingEnv, run_training, toy_agent, toy_params
from stable_baselines3 import SAC

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM, build_agent, sac_kwargs
from trading_rl.config import ConfigError
from trading_rl.training.params import AgentParams, TrainingDivergedError

PROBE_OBS = np.random.default_rng(7).normal(size=(16, 4)).astype(np.float32)


def _sample(model, seed: int, batch_size: int = 32):
    """The same replay batch for a given seed (SB3 samples indices with ``np.random``)."""
    np.random.seed(seed)
    return model.replay_buffer.sample(batch_size)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sac": {"learnin_rate": 1e-3}}, "sac_icm.agent.sac.learnin_rate"),
        ({"icm": {"etaa": 0.1}}, "sac_icm.agent.icm.etaa"),
        ({"polcy": {}}, "sac_icm.agent.polcy"),
        ({"policy": {"activation": "swish"}}, "sac_icm.agent.policy.activation"),
    ],
)
def test_unknown_or_invalid_parameters_are_rejected_by_name(params, named):
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        AgentParams.from_mapping(params, "sac_icm.agent")


def test_build_agent_applies_the_parameters():
    model, _ = toy_agent(seed=3)
    assert isinstance(model, SACWithICM)
    assert (model.batch_size, model.learning_starts, model.seed) == (32, 32, 3)
    linear = [m for m in model.actor.latent_pi if isinstance(m, th.nn.Linear)]
    assert [m.out_features for m in linear] == [32, 32]
    assert model.icm.config.feature_dim == 16 and model.icm_warmup_steps == 60
    assert (model.extrinsic_weight, model.intrinsic_weight) == (0.9, 0.1)
    off, _ = toy_agent(icm=False)
    assert off.icm is None


def test_rewards_are_untouched_before_warmup_and_mixed_after_it():
    model, _ = toy_agent()
    model.learn(50)
    assert model.num_timesteps < model.icm_warmup_steps
    stored = _sample(model, seed=0)
    before_update = copy.deepcopy(model.icm.state_dict())
    sampled = model.curious_batch(_sample(model, seed=0))
    assert th.equal(sampled.rewards, stored.rewards)
    assert any(not th.equal(v, model.icm.state_dict()[k]) for k, v in before_update.items())

    model.num_timesteps = model.icm_warmup_steps
    reference_icm = copy.deepcopy(model.icm)
    batch = _sample(model, seed=1)
    with th.no_grad():
        phi = reference_icm.encoder(batch.observations)
        predicted = reference_icm.forward_model(th.cat([phi, batch.actions], dim=1))
        raw = 0.01 * 0.5 * ((predicted - reference_icm.encoder(batch.next_observations)) ** 2).sum(dim=1)

    def after_one_more(average, value: float) -> float:
        """A moving average's value after one more batch statistic, by hand (bias-corrected)."""
        decay = average.decay
        total = decay * float(average.average) + (1 - decay) * value
        return total / (decay * float(average.weight) + (1 - decay))

    raw = raw.double().numpy()
    median = after_one_more(reference_icm.intrinsic_median, np.sort(raw)[(raw.size - 1) // 2])
    compressed = np.log1p(raw / median)
    intrinsic = np.minimum(compressed / after_one_more(reference_icm.intrinsic_spread, compressed.std()), 5)
    extrinsic = batch.rewards.double().numpy().reshape(-1)
    intrinsic = intrinsic * after_one_more(reference_icm.extrinsic_scale, extrinsic.std())  # on the P&L scale
    expected = 0.9 * extrinsic + 0.1 * intrinsic

    mixed = model.curious_batch(_sample(model, seed=1))
    np.testing.assert_allclose(mixed.rewards.numpy().reshape(-1), expected, rtol=1e-5, atol=1e-6)
    for field in ("observations", "actions", "next_observations", "dones"):
        assert th.equal(getattr(mixed, field), getattr(batch, field))
    # The ICM trained on exactly this batch: one update of the copy lands on the same weights.
    reference_icm.update(batch.observations, batch.actions, batch.next_observations)
    for name, value in reference_icm.state_dict().items():
        if not name.startswith(("intrinsic_", "extrinsic_scale.")):
            assert th.allclose(value, model.icm.state_dict()[name]), name


def test_icm_train_freq_updates_every_kth_batch():
    params = toy_params()
    params["icm"]["train_freq"] = 2
    model = build_agent(ToyTradingEnv(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=0, device="cpu")
    model.learn(40)
    changed = []
    for seed in range(4):
        before = [p.detach().clone() for p in model.icm.parameters()]
        calls = model.icm_batches
        model.curious_batch(_sample(model, seed))
        changed.append((calls % 2 == 0, any(not th.equal(p, b) for p, b in zip(model.icm.parameters(), before))))
    assert all(expected == observed for expected, observed in changed)


def test_icm_off_trains_exactly_like_plain_sb3_sac():
    params = toy_params(icm=False)  # reward scale 1: the learner sees the env's reward as it is
    # Build and train one after the other: SB3 seeds the global RNGs at construction.
    ours = build_agent(ToyTradingEnv(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=5, device="cpu").learn(
        100
    )
    plain = SAC(
        "MlpPolicy",
        ToyTradingEnv(),
        **sac_kwargs(AgentParams.from_mapping(params, "sac_icm.agent")),
        seed=5,
        device="cpu",
    ).learn(100)
    np.testing.assert_array_equal(
        ours.predict(PROBE_OBS, deterministic=True)[0], plain.predict(PROBE_OBS, deterministic=True)[0]
    )
    np.testing.assert_array_equal(ours.replay_buffer.rewards, plain.replay_buffer.rewards)


def test_training_leaves_no_sb3_log_folder_in_the_temp_dir(tmp_path, monkeypatch):
    """SB3's default logger makes an (empty) ``tempdir/SB3-<time>`` folder on every ``learn``: a
    built, a trained-again and a reloaded agent each learn, and none leaves one; the losses SB3
    records still reach the agent's training statistics."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(tmp_path)
    model, _ = toy_agent()
    model.learn(40)
    model.learn(10, reset_num_timesteps=False)
    assert "train/actor_loss" in model.pop_train_stats()
    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    SACWithICM.load(buffer, env=ToyTradingEnv(), device="cpu").learn(10)
    assert sorted(path.name for path in tmp_path.glob("SB3-*")) == []


def test_save_and_load_restore_policy_and_icm_state(tmp_path):
    model, _ = toy_agent(seed=1)
    model.learn(100)
    model.save(tmp_path / "agent.zip")
    loaded = SACWithICM.load(tmp_path / "agent.zip", device="cpu")

    np.testing.assert_array_equal(
        loaded.predict(PROBE_OBS, deterministic=True)[0], model.predict(PROBE_OBS, deterministic=True)[0]
    )
    original_state, loaded_state = model.icm.state_dict(), loaded.icm.state_dict()
    assert original_state.keys() == loaded_state.keys()
    assert all(th.equal(original_state[k], loaded_state[k]) for k in original_state)
    assert float(loaded.icm.intrinsic_median.weight) > 0.0  # the moving statistics came back, not fresh ones
    assert loaded.icm.optimizer.state_dict()["state"].keys() == model.icm.optimizer.state_dict()["state"].keys()
    assert loaded.icm.config == model.icm.config
    assert (loaded.icm_warmup_steps, loaded.intrinsic_weight, loaded.icm_batches) == (
        model.icm_warmup_steps,
        model.intrinsic_weight,
        model.icm_batches,
    )
    loaded.replay_buffer = model.replay_buffer
    loaded.num_timesteps = model.num_timesteps
    a, b = model.curious_batch(_sample(model, 3)), loaded.curious_batch(_sample(model, 3))
    assert th.equal(a.rewards, b.rewards)


def test_nan_reward_raises_training_diverged_naming_loss_and_timestep():
    model, _ = toy_agent(nan_reward_after=40)
    with pytest.raises(TrainingDivergedError, match=r"timestep \d+: non-finite .*critic_loss=nan"):
        model.learn(200)
    assert model.num_timesteps < 200


def test_nan_in_icm_raises_training_diverged_naming_the_icm_loss():
    model, _ = toy_agent()
    with th.no_grad():
        model.icm.encoder[0].weight[0, 0] = float("nan")
    with pytest.raises(TrainingDivergedError, match=r"timestep 33: non-finite icm_forward_loss=nan"):
        model.learn(100)


def test_reward_scale_multiplies_what_the_learner_sees_only():
    params = toy_params(icm=False)
    params["reward_scale"] = 50.0
    model = build_agent(ToyTradingEnv(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=0, device="cpu")
    assert model.reward_scale == 50.0
    model.learn(80)
    stored = _sample(model, seed=3)
    seen = model.learner_batch(_sample(model, seed=3))
    np.testing.assert_allclose(seen.rewards.numpy(), 50.0 * stored.rewards.numpy(), rtol=1e-6)
    assert th.equal(seen.observations, stored.observations)
    with pytest.raises(ConfigError, match=r"sac_icm\.agent\.reward_scale"):
        build_agent(
            ToyTradingEnv(),
            AgentParams.from_mapping({**params, "reward_scale": 0.0}, "sac_icm.agent"),
            seed=0,
            device="cpu",
        )
    with pytest.raises(ConfigError, match=r"'sac_icm\.agent\.reward' was renamed to 'sac_icm\.agent\.reward_scale'"):
        build_agent(
            ToyTradingEnv(),
            AgentParams.from_mapping({**params, "reward": {"scale": 50.0}}, "sac_icm.agent"),
            seed=0,
            device="cpu",
        )
    with pytest.raises(ValueError, match=r"sac_icm\.agent\.reward_scale' must be > 0"):
        saved = io.BytesIO()
        model.save(saved)
        saved.seek(0)
        type(model).load(saved, reward_scale=0.0)  # a scale given to load is checked too


def test_reward_scale_applies_before_curiosity_mixing():
    scaled_params = toy_params()
    scaled_params["reward_scale"] = 10.0
    model = build_agent(ToyTradingEnv(), AgentParams.from_mapping(scaled_params, "sac_icm.agent"), seed=0, device="cpu")
    model.learn(80)
    model.num_timesteps = model.icm_warmup_steps
    reference = copy.deepcopy(model)
    stored = _sample(model, seed=5)
    expected = reference.curious_batch(stored._replace(rewards=stored.rewards * 10.0))
    mixed = model.learner_batch(_sample(model, seed=5))
    np.testing.assert_allclose(mixed.rewards.numpy(), expected.rewards.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_effective_curiosity_share_stays_near_the_configured_weight_as_the_icm_converges():
    """Issue: with all-time statistics the share fell to 0.01-0.03 once the forward model had
    learned. Here the ICM trains on the replay buffer until its forward loss has fallen
    five-fold, and the share of the learner reward's variation stays within 0.5x-2x of 0.1."""
    model, _ = toy_agent(seed=2)
    model.learn(300)  # past the warm-up: the learner sees the mixed reward
    model.pop_train_stats()
    losses, shares = [], []
    for step in range(1500):
        model.learner_batch(_sample(model, seed=step))  # the learner's path: reward scale, then curiosity
        if step % 100 == 99:
            stats = model.pop_train_stats()
            losses.append(stats["icm/forward_loss"])
            shares.append(stats["icm/effective_share"])
    assert losses[-1] < 0.2 * losses[0]
    assert all(0.05 <= share <= 0.2 for share in shares), shares


@pytest.mark.slow
def test_training_history_records_the_effective_share(tmp_path):
    outcome = run_training(str(tmp_path), total_timesteps=400, seed=4)
    shares = [entry["icm/effective_share"] for entry in outcome.history if "icm/effective_share" in entry]
    assert shares and all(0.05 <= share <= 0.2 for share in shares), shares


def test_the_collapse_hold_threshold_is_refused_in_favour_of_the_envs():
    refused = r"sac_icm\.agent\.collapse\.hold_threshold.*env_construction\.env\.hold_threshold"
    with pytest.raises(ConfigError, match=refused):
        AgentParams.from_mapping({"collapse": {"hold_threshold": 0.2}}, "sac_icm.agent")
