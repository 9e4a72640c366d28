"""The resume checkpoint format: what it puts back, and that it checks before it applies."""

import numpy as np
import pytest
import torch as th
from helpers.sac_icm_toy import ToyTradingEnv, toy_agent

from trading_rl.training.resume import ResumeSlot
from trading_rl.training.resume_file import RunIdentity
from trading_rl.training.resume_state import (
    CheckpointRejected,
    apply_snapshot,
    replay_buffer_of,
    snapshot,
    torch_state,
)

IDENTITY = RunIdentity("toy", "TOY", {"seed": 0})
RUN_STATE = {"history": [{"timestep": 80, "eval/sharpe": np.float32(0.5)}], "best_score": -np.inf}


def _trained(steps: int = 80):
    model, _ = toy_agent(seed=0, total_timesteps=steps)
    model.learn(steps)
    return model


def test_a_checkpoint_puts_back_weights_optimisers_counters_and_replay_buffer(tmp_path):
    trained = _trained()
    slot = ResumeSlot(tmp_path, IDENTITY, "auto")
    slot.open()
    slot.save(trained, RUN_STATE, snapshot(trained))
    slot.close()

    fresh, _ = toy_agent(seed=1)
    reader = ResumeSlot(tmp_path, IDENTITY, "auto")
    reader.open()
    checkpoint = reader.load(fresh, set(RUN_STATE))
    reader.close()

    assert checkpoint.run_state == {"history": [{"timestep": 80, "eval/sharpe": 0.5}], "best_score": -np.inf}
    assert checkpoint.best is not None and checkpoint.best["counters"]["num_timesteps"] == 80
    for key, tensor in torch_state(trained)[0].items():
        assert th.equal(tensor, torch_state(fresh)[0][key]), key
    moments = trained.actor.optimizer.state_dict()["state"][0]["exp_avg"]
    assert th.equal(fresh.actor.optimizer.state_dict()["state"][0]["exp_avg"], moments)
    assert (fresh.num_timesteps, fresh._n_updates, fresh.icm_batches) == (80, trained._n_updates, trained.icm_batches)
    buffer, source = fresh.replay_buffer, trained.replay_buffer
    assert (buffer.pos, buffer.full) == (source.pos, source.full) == (80, False)
    np.testing.assert_array_equal(buffer.observations[:80], source.observations[:80])
    np.testing.assert_array_equal(buffer.rewards[:80], source.rewards[:80])


def test_a_snapshot_that_does_not_fit_leaves_the_model_untouched():
    trained = _trained()
    other, _ = toy_agent(seed=1)
    saved = snapshot(trained)
    saved["tensors"]["policy/actor.mu.weight"] = th.zeros(1, 7)
    before = {key: value.clone() for key, value in torch_state(other)[0].items()}
    with pytest.raises(CheckpointRejected, match=r"'policy/actor\.mu\.weight' has shape \(1, 7\)"):
        apply_snapshot(other, saved, "test")
    assert all(th.equal(before[key], value) for key, value in torch_state(other)[0].items())


def test_a_resume_checkpoint_needs_a_model_with_a_replay_buffer():
    from stable_baselines3 import PPO

    sac, _ = toy_agent(seed=0)
    assert replay_buffer_of(sac) is sac.replay_buffer
    with pytest.raises(ValueError, match="PPO has none: training.resume needs an off-policy model"):
        replay_buffer_of(PPO("MlpPolicy", ToyTradingEnv(), n_steps=16, batch_size=16, device="cpu"))
