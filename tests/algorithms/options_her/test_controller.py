"""Option controller: masking, temperature annealing, learning the best option on a toy problem."""

import numpy as np
import pytest
import torch

from trading_rl.algorithms.options_her.controller import ControllerConfig, OptionLearner

torch.set_num_threads(1)

SMALL = {"hidden_dim": 32, "dropout": 0.0, "buffer_size": 4096, "batch_size": 64, "warmup_steps": 0, "train_freq": 1}


def test_masked_options_are_never_chosen():
    learner = OptionLearner(4, 5, ControllerConfig(**SMALL), seed=0)
    states = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
    masks = np.ones((300, 5), dtype=bool)
    masks[:, 1] = False
    masks[::2, 3] = False
    probs = learner.probabilities(states, masks)
    assert (probs[~masks] == 0).all() and np.allclose(probs.sum(axis=1), 1.0)
    chosen = learner.select(states, masks)
    assert masks[np.arange(300), chosen].all()
    greedy = learner.select(states, masks, deterministic=True)
    assert np.array_equal(greedy, np.where(masks, probs, -1).argmax(axis=1))
    only_wait = np.zeros((2, 5), dtype=bool)
    only_wait[:, 4] = True
    assert learner.select(states[:2], only_wait).tolist() == [4, 4]


def test_controller_learns_the_clearly_best_option():
    rng = np.random.default_rng(0)
    learner = OptionLearner(4, 4, ControllerConfig(**SMALL, lr=1e-3), seed=0)
    for _ in range(300):
        states = rng.normal(size=(64, 4)).astype(np.float32)
        masks = np.ones((64, 4), dtype=bool)
        options = rng.integers(0, 4, 64)
        returns = np.where(options == 2, 1.0, 0.0) + rng.normal(0, 0.1, 64)
        learner.update(states, masks, options, returns)
    test_states = rng.normal(size=(200, 4)).astype(np.float32)
    probs = learner.probabilities(test_states, np.ones((200, 4), dtype=bool))
    assert probs[:, 2].mean() > 0.9
    # where option 2 is not allowed it is never picked, and the rest share the mass
    masks = np.ones((200, 4), dtype=bool)
    masks[:, 2] = False
    assert (learner.select(test_states, masks) != 2).all()


def test_temperature_anneals_to_its_floor():
    config = ControllerConfig(**SMALL, temperature_decay=0.5, min_temperature=0.1)
    learner = OptionLearner(3, 2, config, seed=0)
    rng = np.random.default_rng(0)
    temps = []
    for _ in range(6):
        stats = learner.update(
            rng.normal(size=(8, 3)), np.ones((8, 2), bool), rng.integers(0, 2, 8), rng.normal(size=8)
        )
        temps.append(stats["temperature"])
        assert stats["grad_norm"] >= 0 and np.isfinite(stats["entropy"])
    assert temps == pytest.approx([0.5, 0.25, 0.125, 0.1, 0.1, 0.1])
    default = ControllerConfig()
    assert (default.temperature, default.temperature_decay, default.min_temperature) == (1.0, 0.9995, 0.1)


def test_training_schedule_respects_warmup_and_frequency():
    config = ControllerConfig(**{**SMALL, "warmup_steps": 100, "train_freq": 8, "batch_size": 4})
    learner = OptionLearner(3, 2, config, seed=0)
    learner.store(np.zeros((4, 3)), np.ones((4, 2), bool), np.zeros(4, int), np.zeros(4))
    assert learner.maybe_train(99) is None
    assert learner.maybe_train(100) is not None
    assert learner.maybe_train(107) is None
    assert learner.maybe_train(108) is not None
    assert learner.n_updates == 2


def test_gradients_are_clipped():
    config = ControllerConfig(**{**SMALL, "grad_clip": 0.5, "lr": 0.0})
    learner = OptionLearner(3, 2, config, seed=0)
    rng = np.random.default_rng(0)
    learner.update(
        rng.normal(size=(16, 3)) * 100, np.ones((16, 2), bool), rng.integers(0, 2, 16), rng.normal(size=16) * 100
    )
    norm = torch.sqrt(sum((p.grad**2).sum() for p in learner.controller.parameters()))
    assert float(norm) <= 0.5 + 1e-5


def test_state_round_trip():
    learner = OptionLearner(3, 4, ControllerConfig(**SMALL), seed=0)
    learner.temperature = 0.37
    clone = OptionLearner.from_state(learner.state(), seed=1)
    states = np.random.default_rng(0).normal(size=(10, 3))
    masks = np.ones((10, 4), bool)
    assert np.array_equal(clone.probabilities(states, masks), learner.probabilities(states, masks))
    assert clone.temperature == 0.37
