"""Migration of a PPO checkpoint into SAC: exact weights, new heads, bounds, metadata, bad input."""

import base64
import hashlib
import io
import json
import pickle
import tempfile
import zipfile
from datetime import UTC, datetime

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO, SAC

from trading_rl.migration import (
    CheckpointError,
    build_migrated_sac,
    discrete_policy_from_checkpoint,
    fine_tune_migrated,
    inspect_discrete_checkpoint,
    sb3_zip_bytes,
    train_discrete_baseline,
    validate_migrated_model,
)
from trading_rl.training.streaming import with_episode_rewards

OBS_DIM = 6
HIDDEN = (16, 8)


@pytest.fixture(scope="module")
def ppo_and_bytes(make_checkpoint):
    return make_checkpoint("PPO", OBS_DIM, HIDDEN, seed=3)


@pytest.fixture(scope="module")
def migrated(ppo_and_bytes, toy_env, demonstrate):
    ppo, raw = ppo_and_bytes
    checkpoint = inspect_discrete_checkpoint(raw, "sp500.zip", OBS_DIM, list(HIDDEN))
    model = build_migrated_sac(
        checkpoint,
        toy_env(OBS_DIM, continuous=True),
        demonstrate(ppo, OBS_DIM),
        critic_hidden_sizes=(32, 32),
        log_std_init=-0.7,
        seed=0,
        sac_kwargs=dict(buffer_size=100, learning_starts=10, batch_size=16),
        run_metadata={"seed": 0, "git_commit": "abc"},
    )
    return checkpoint, model


def test_inspection_reads_shapes_activation_and_checksum(ppo_and_bytes):
    _, raw = ppo_and_bytes
    checkpoint = inspect_discrete_checkpoint(raw, "sp500.zip")
    assert checkpoint.hidden_sizes == HIDDEN and checkpoint.observation_dim == OBS_DIM
    assert checkpoint.n_actions == 7 and checkpoint.activation == "Tanh"  # PPO's default activation
    assert checkpoint.sha256 == hashlib.sha256(raw).hexdigest()


def test_hidden_layers_are_copied_exactly_and_compute_the_same_features(ppo_and_bytes, migrated):
    ppo, _ = ppo_and_bytes
    _, sac = migrated
    ppo_linears = [m for m in ppo.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    sac_linears = [m for m in sac.policy.actor.latent_pi if isinstance(m, torch.nn.Linear)]
    assert len(ppo_linears) == len(sac_linears) == len(HIDDEN)
    for source, target in zip(ppo_linears, sac_linears):
        assert torch.equal(source.weight, target.weight) and torch.equal(source.bias, target.bias)
    obs = torch.randn(64, OBS_DIM)
    with torch.no_grad():
        assert torch.equal(ppo.policy.mlp_extractor.forward_actor(obs), sac.policy.actor.latent_pi(obs))


def test_log_std_head_is_small_orthogonal_and_mu_is_the_distilled_fit(migrated):
    _, sac = migrated
    actor = sac.policy.actor
    # A 1 x n orthogonal matrix is a unit row; the gain scales its norm to 0.01.
    assert float(actor.log_std.weight.detach().norm()) == pytest.approx(0.01, rel=1e-5)
    assert torch.allclose(actor.log_std.bias, torch.tensor([-0.7]))
    # mu is the least-squares head (test_head_distillation checks its values), not the 0.01 init
    assert actor.mu.weight.shape == (1, HIDDEN[-1]) and float(actor.mu.weight.detach().norm()) > 0.1
    head_fit = sac.migration_metadata["head_fit"]
    assert head_fit["n_states"] == 400 and head_fit["states"] == "toy env"
    assert 0.0 < head_fit["r2"] <= 1.0 and 0.0 <= head_fit["agreement"] <= 1.0


def test_critics_are_fresh_sac_critics(migrated):
    _, sac = migrated
    first_layer = sac.policy.critic.qf0[0]
    assert first_layer.in_features == OBS_DIM + 1 and first_layer.out_features == 32


def test_validation_passes_and_actions_stay_in_bounds(migrated):
    checkpoint, sac = migrated
    checks = validate_migrated_model(checkpoint, sac, n_observations=1000, seed=1)
    assert checks["passed"] and checks["hidden_weights_max_abs_diff"] == 0.0
    assert checks["n_random_observations"] == 1000 and checks["cpu_inference"]
    assert -1.0 <= checks["actions_min"] <= checks["actions_max"] <= 1.0


def test_validation_detects_a_changed_hidden_weight(migrated, toy_env):
    checkpoint, sac = migrated
    tampered = SAC.load(io.BytesIO(sb3_zip_bytes(sac)), device="cpu")
    with torch.no_grad():
        tampered.policy.actor.latent_pi[2].weight[0, 0] += 1e-6
    checks = validate_migrated_model(checkpoint, tampered, n_observations=10)
    assert not checks["passed"] and checks["hidden_weights_max_abs_diff"] > 0


def test_metadata_is_stored_in_the_zip_and_survives_reload(ppo_and_bytes, migrated):
    _, raw = ppo_and_bytes
    _, sac = migrated
    zipped = sb3_zip_bytes(sac)
    # Readable as plain JSON inside the zip, without loading the model.
    stored = json.loads(zipfile.ZipFile(io.BytesIO(zipped)).read("data"))["migration_metadata"]
    reloaded = SAC.load(io.BytesIO(zipped), device="cpu").migration_metadata
    assert stored == reloaded == sac.migration_metadata
    assert stored["source_file"] == "sp500.zip"
    assert stored["source_sha256"] == hashlib.sha256(raw).hexdigest()
    assert stored["hidden_sizes"] == list(HIDDEN) and stored["source_action_space"] == "Discrete(7)"
    assert stored["layer_mapping"] == {
        "mlp_extractor.policy_net.0.weight": "actor.latent_pi.0.weight",
        "mlp_extractor.policy_net.0.bias": "actor.latent_pi.0.bias",
        "mlp_extractor.policy_net.2.weight": "actor.latent_pi.2.weight",
        "mlp_extractor.policy_net.2.bias": "actor.latent_pi.2.bias",
    }
    migrated_at = datetime.fromisoformat(stored["migrated_at_utc"])
    assert migrated_at.utcoffset().total_seconds() == 0
    assert abs((datetime.now(UTC) - migrated_at).total_seconds()) < 3600
    assert stored["run"] == {"seed": 0, "git_commit": "abc"}


def test_other_activation_is_carried_over(make_checkpoint, toy_env, demonstrate):
    ppo, raw = make_checkpoint("PPO", OBS_DIM, (5,), activation_fn=torch.nn.ReLU)
    checkpoint = inspect_discrete_checkpoint(raw, "relu.zip")
    assert checkpoint.activation == "ReLU"
    sac = build_migrated_sac(
        checkpoint, toy_env(OBS_DIM, continuous=True), demonstrate(ppo, OBS_DIM), sac_kwargs=dict(buffer_size=10)
    )
    obs = torch.randn(32, OBS_DIM)
    with torch.no_grad():
        assert torch.equal(ppo.policy.mlp_extractor.forward_actor(obs), sac.policy.actor.latent_pi(obs))


def test_discrete_policy_rebuilt_from_tensors_acts_like_the_loaded_model(ppo_and_bytes, toy_env):
    _, raw = ppo_and_bytes
    rebuilt = discrete_policy_from_checkpoint(inspect_discrete_checkpoint(raw, "sp500.zip"), toy_env(OBS_DIM))
    trusted = PPO.load(io.BytesIO(raw), device="cpu")  # test-made file: safe to unpickle
    obs = np.random.default_rng(5).normal(size=(300, OBS_DIM)).astype(np.float32)
    np.testing.assert_array_equal(
        rebuilt.predict(obs, deterministic=True)[0], trusted.predict(obs, deterministic=True)[0]
    )


@pytest.mark.slow
def test_fine_tune_returns_a_trained_copy_and_leaves_the_migration_alone(migrated, toy_env):
    checkpoint, sac = migrated
    before = {k: v.clone() for k, v in sac.policy.state_dict().items()}
    streamed = []
    tuned = fine_tune_migrated(
        sac,
        toy_env(OBS_DIM, continuous=True),
        total_timesteps=40,
        callback=with_episode_rewards(None, lambda metrics, step: streamed.append((step, metrics))),
    )
    # every finished 16-step episode at the step it ended, with the reward SB3's Monitor recorded
    assert [step for step, _ in streamed] == [16, 32]
    assert [m["train/episode_length"] for _, m in streamed] == [16, 16]
    assert [m["train/episode_reward"] for _, m in streamed] == pytest.approx(
        [i["r"] for i in tuned.ep_info_buffer], abs=1e-5
    )
    assert all(torch.equal(before[k], v) for k, v in sac.policy.state_dict().items())
    assert not torch.equal(tuned.policy.actor.mu.weight.cpu(), sac.policy.actor.mu.weight)
    assert tuned.migration_metadata["fine_tune_timesteps"] == 40
    assert tuned.migration_metadata["source_sha256"] == checkpoint.sha256


def test_training_leaves_no_sb3_log_folder_in_the_temp_dir(migrated, toy_env, tmp_path, monkeypatch):
    """SB3's default logger makes an (empty) ``tempdir/SB3-<time>`` folder on every ``learn``:
    neither the discrete baseline's training nor a fine-tune leaves one."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    ppo = {"n_steps": 16, "batch_size": 16, "n_epochs": 1}
    train_discrete_baseline(toy_env(OBS_DIM), hidden_sizes=(8,), total_timesteps=16, seed=0, ppo_kwargs=ppo)
    fine_tune_migrated(migrated[1], toy_env(OBS_DIM, continuous=True), total_timesteps=20)
    assert sorted(path.name for path in tmp_path.glob("SB3-*")) == []


# --- bad input --------------------------------------------------------------------------------------


def _rezip(raw: bytes, replace: dict[str, bytes]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            target.writestr(name, replace.get(name, source.read(name)))
    return out.getvalue()


@pytest.mark.parametrize(
    "case, expected",
    [
        ("hidden_sizes", "hidden sizes [16, 8], expected [256, 128]"),
        ("observation_dim", "observation dimension 6, but the environment has 9"),
        ("truncated", "corrupt or truncated"),
        ("corrupt", "corrupt"),
        ("not_a_zip", "not a readable zip archive"),
        ("dqn", "DQNPolicy (DQN)"),
        ("sac", "SACPolicy (SAC)"),
        ("a2c", "not PPO (A2C?)"),
        ("five_actions", "5 discrete actions, expected 7"),
        ("declared_arch", "declare hidden sizes [32, 8] but the tensors have [16, 8]"),
        ("garbled_class", "found policy class unreadable"),
    ],
)
def test_bad_checkpoints_are_rejected_naming_file_and_mismatch(case, expected, ppo_and_bytes, make_checkpoint):
    _, raw = ppo_and_bytes
    kwargs = {}
    if case == "hidden_sizes":
        kwargs["expected_hidden_sizes"] = [256, 128]
    elif case == "observation_dim":
        kwargs["expected_observation_dim"] = 9
    elif case == "truncated":
        raw = raw[: len(raw) // 2]
    elif case == "corrupt":
        policy_offset = raw.index(b"policy.pth")  # flip bytes inside a stored member
        raw = (
            raw[: policy_offset + 200]
            + bytes(b ^ 0xFF for b in raw[policy_offset + 200 : policy_offset + 260])
            + raw[policy_offset + 260 :]
        )
    elif case == "not_a_zip":
        raw = b"this is not a checkpoint"
    elif case in ("dqn", "sac", "a2c"):
        raw = make_checkpoint(case.upper(), OBS_DIM, HIDDEN)[1]
    elif case == "five_actions":
        raw = make_checkpoint("PPO", OBS_DIM, HIDDEN, n_actions=5)[1]
    elif case in ("declared_arch", "garbled_class"):
        data = json.loads(zipfile.ZipFile(io.BytesIO(raw)).read("data"))
        if case == "declared_arch":
            data["policy_kwargs"]["net_arch"]["pi"] = [32, 8]
        else:
            data["policy_class"][":serialized:"] = data["policy_class"][":serialized:"][:12]
        raw = _rezip(raw, {"data": json.dumps(data).encode()})
    with pytest.raises(CheckpointError) as error:
        inspect_discrete_checkpoint(raw, "legacy/sp500.zip", **kwargs)
    assert "'legacy/sp500.zip'" in str(error.value) and expected in str(error.value)


class _Marker:
    """Unpickling this touches a file: proof that code in a checkpoint ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_pickled_code_in_a_checkpoint_is_never_executed(ppo_and_bytes, tmp_path):
    _, raw = ppo_and_bytes
    marker = tmp_path / "executed"
    payload = io.BytesIO()
    torch.save({"mlp_extractor.policy_net.0.weight": _Marker(marker)}, payload)
    data = json.loads(zipfile.ZipFile(io.BytesIO(raw)).read("data"))
    data["policy_class"][":serialized:"] = base64.b64encode(pickle.dumps(_Marker(marker))).decode()
    with pytest.raises(CheckpointError, match="not a plain tensor state dict"):
        inspect_discrete_checkpoint(_rezip(raw, {"policy.pth": payload.getvalue()}), "evil.zip")
    with pytest.raises(CheckpointError, match="found policy class io.open"):
        inspect_discrete_checkpoint(_rezip(raw, {"data": json.dumps(data).encode()}), "evil.zip")
    assert not marker.exists()
