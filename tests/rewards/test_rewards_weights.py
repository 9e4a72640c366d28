"""Objective-weight network: prior at initialisation, training target, gates (and that they can fail)."""

import math

import numpy as np
import pytest
import torch

from trading_rl.rewards import ObjectiveWeightNetwork, forward_risk_adjusted_return, train_weight_network, weight_gates
from trading_rl.rewards.objectives import OBJECTIVES
from trading_rl.rewards.weights import WeightGateParams, WeightNetworkParams

PRIOR = np.array([0.40, 0.25, 0.15, 0.10, 0.10])


def test_initial_network_outputs_the_prior_everywhere():
    network = ObjectiveWeightNetwork(6, 32)
    weights = network(torch.randn(50, 6)).detach().numpy()
    np.testing.assert_allclose(weights, np.tile(PRIOR, (50, 1)), atol=1e-6)


def test_forward_risk_adjusted_return_matches_brute_force():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=14)
    episodes = np.array([0] * 9 + [1] * 5)
    target = forward_risk_adjusted_return(rewards, episodes, horizon=4)
    for t in range(14):
        end = min(t + 4, 9 if t < 9 else 14)
        window = rewards[t:end]
        expected = window.sum() / (window.std(ddof=1) * math.sqrt(window.size)) if window.size >= 2 else 0.0
        assert target[t] == pytest.approx(expected)


def _problem(seed=0, n=1500):
    """Components whose profit column alone explains the target; other columns are noise."""
    rng = np.random.default_rng(seed)
    contexts = rng.normal(size=(n, 5))
    components = rng.normal(size=(n, 5)) * np.array([0.5, 3.0, 1.0, 0.2, 2.0])
    target = components[:, 0] + 0.1 * rng.normal(size=n)
    return contexts, components, target


def _gates(network, contexts, history):
    with torch.no_grad():
        weights = network(torch.as_tensor(contexts, dtype=torch.float32)).numpy()
    mean_history = [[row[f"weight_{name}"] for name in OBJECTIVES] for row in history]
    return {row["gate"]: row for row in weight_gates(weights, mean_history, WeightGateParams())}, weights


def test_trained_weights_favour_the_predictive_objective_and_pass_the_gates():
    contexts, components, target = _problem()
    network, history = train_weight_network(
        contexts,
        components,
        target,
        WeightNetworkParams(hidden_dim=32, learning_rate=1e-3, epochs=30, batch_size=128),
        seed=0,
    )
    gates, weights = _gates(network, contexts, history)
    assert weights[:, 0].mean() > PRIOR[0] + 0.02, "profit predicts the target: its weight must grow"
    assert history[-1]["correlation"] > history[0]["correlation"]
    assert all(row["passed"] for row in gates.values()), gates
    assert gates["max_weight"]["value"] <= 0.6 and gates["weight_entropy"]["value"] > 0.5
    scale = network.component_scale.numpy()
    np.testing.assert_allclose(scale, np.sqrt(np.mean(components**2, axis=0)), rtol=1e-5)


def test_without_the_balance_regulariser_the_gates_catch_a_dominant_weight():
    contexts, components, target = _problem()
    network, history = train_weight_network(
        contexts,
        components,
        target,
        WeightNetworkParams(hidden_dim=32, learning_rate=3e-3, epochs=30, batch_size=128, balance_coef=0.0),
        seed=0,
    )
    gates, _ = _gates(network, contexts, history)
    assert not gates["max_weight"]["passed"] and gates["max_weight"]["value"] > 0.6


def test_weight_gates_by_hand():
    weights = np.array([[0.5, 0.2, 0.1, 0.1, 0.1], [0.7, 0.1, 0.1, 0.05, 0.05]])
    history = [[0.3, 0.2, 0.2, 0.2, 0.1]] * 3 + [[0.33, 0.2, 0.2, 0.17, 0.1]]
    gates = {row["gate"]: row for row in weight_gates(weights, history, WeightGateParams(last_updates=2))}
    assert gates["max_weight"]["value"] == 0.7 and not gates["max_weight"]["passed"]
    entropy = np.mean([-(w * np.log(w)).sum() for w in weights])
    assert gates["weight_entropy"]["value"] == pytest.approx(entropy)
    assert gates["weight_stability"]["value"] == pytest.approx(0.03 / 0.185)  # objective 4: (0.2 − 0.17) / 0.185
    assert not gates["weight_stability"]["passed"]
