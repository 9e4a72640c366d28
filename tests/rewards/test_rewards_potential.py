"""Potential-based shaping: telescoping, policy invariance (value iteration), returns, adaptive β."""

import numpy as np
import pytest
import torch

from trading_rl.rewards import AdaptiveShapingWeight, discounted_returns, potential_shaping, train_potential
from trading_rl.rewards.potential import PotentialParams


@pytest.mark.parametrize("terminal", [False, True])
def test_shaping_telescopes_over_a_trajectory(terminal):
    rng = np.random.default_rng(0)
    gamma, steps = 0.97, 40
    phi = rng.normal(size=steps + 1)
    done = np.zeros(steps, dtype=bool)
    done[-1] = terminal
    shaping = potential_shaping(phi[:-1], phi[1:], gamma, done)
    discounted = np.sum(gamma ** np.arange(steps) * shaping)
    expected = (0.0 if terminal else gamma**steps * phi[-1]) - phi[0]
    assert discounted == pytest.approx(expected, abs=1e-12)
    as_torch = potential_shaping(torch.as_tensor(phi[:-1]), torch.as_tensor(phi[1:]), gamma, torch.as_tensor(done))
    assert isinstance(as_torch, torch.Tensor)
    np.testing.assert_allclose(as_torch.numpy(), shaping, rtol=0, atol=1e-15)


def _value_iteration(P, R, gamma, iterations=3000):
    """Q*(s, a) of a finite MDP with ``P[s, a, s']`` and ``R[s, a, s']``."""
    q = np.zeros(P.shape[:2])
    expected_reward = np.einsum("ijk,ijk->ij", P, R)
    for _ in range(iterations):
        q = expected_reward + gamma * P @ q.max(axis=1)
    return q


@pytest.mark.parametrize("seed", range(5))
def test_optimal_policy_is_unchanged_by_potential_shaping(seed):
    rng = np.random.default_rng(seed)
    states, actions, gamma = 7, 3, 0.9
    P = rng.dirichlet(np.ones(states), size=(states, actions))
    terminal = states - 1  # absorbing, reward 0
    P[terminal] = 0.0
    P[terminal, :, terminal] = 1.0
    R = rng.normal(size=(states, actions, states))
    R[terminal] = 0.0
    phi = rng.normal(scale=5.0, size=states)
    done = np.zeros(states, dtype=bool)
    done[terminal] = True
    shaping = potential_shaping(phi[:, None, None], phi[None, None, :], gamma, done[None, None, :])
    shaping[terminal] = 0.0  # nothing happens after the episode has ended
    q = _value_iteration(P, R, gamma)
    q_shaped = _value_iteration(P, R + shaping, gamma)
    live = np.arange(states) != terminal
    assert (q.argmax(axis=1)[live] == q_shaped.argmax(axis=1)[live]).all()
    # Ng et al.: Q'(s, a) = Q(s, a) − Φ(s) for live states
    np.testing.assert_allclose(q_shaped[live], q[live] - phi[live, None], atol=1e-8)


def test_discounted_returns_match_a_loop():
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=25)
    ends = np.zeros(25, dtype=bool)
    ends[[6, 15, 24]] = True
    expected = np.empty(25)
    running = 0.0
    for t in range(24, -1, -1):
        running = rewards[t] + (0.0 if ends[t] else 0.95 * running)
        expected[t] = running
    np.testing.assert_allclose(discounted_returns(rewards, ends, 0.95), expected)


def test_potential_regresses_returns():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(600, 3))
    returns = 3.0 * x[:, 0] - x[:, 1] + 10.0
    network, history = train_potential(
        x, returns, PotentialParams(hidden_dim=32, learning_rate=3e-3, epochs=40, batch_size=64), seed=0
    )
    assert history[-1]["standardised_mse"] < 0.05 < history[0]["standardised_mse"]
    with torch.no_grad():
        predicted = network(torch.as_tensor(x, dtype=torch.float32)).numpy()
    assert np.corrcoef(predicted, returns)[0, 1] > 0.97


def test_adaptive_weight_rises_on_collapse_and_falls_on_high_sharpe():
    weight = AdaptiveShapingWeight(initial=0.1, rate=0.05, hold_threshold=0.1)
    collapsed = weight.update(np.full(100, 0.9), np.zeros(100), 252)
    assert collapsed["action_entropy"] == 0.0 and weight.value == pytest.approx(0.15)
    rng = np.random.default_rng(0)
    diverse = rng.uniform(-1, 1, 200)
    strong = weight.update(diverse, 0.01 + 0.001 * rng.normal(size=200), 252)
    assert strong["sharpe"] > 1.0 and weight.value == pytest.approx(0.10)
    for _ in range(10):
        weight.update(diverse, 0.01 + 0.001 * rng.normal(size=200), 252)
    assert weight.value == 0.0
    neutral = AdaptiveShapingWeight(initial=0.3, hold_threshold=0.1)
    neutral.update(diverse, 0.001 * rng.normal(size=200), 252)
    assert neutral.value == 0.3
