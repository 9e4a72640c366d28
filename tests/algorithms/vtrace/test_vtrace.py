"""V-trace against a direct transcription of the paper's definition and against n-step returns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trading_rl.algorithms.vtrace.vtrace import vtrace_from_importance_weights


def paper_vtrace(log_rhos, discounts, rewards, values, bootstrap_value, rho_bar, pg_rho_bar, c_bar):
    """Espeholt et al. 2018, eq. (1), written as the explicit sum, one trajectory and step at a time:
    v_s = V(x_s) + Σ_{t=s}^{T-1} (Π_{i=s}^{t-1} γ_i)(Π_{i=s}^{t-1} c_i) δ_t V, with
    δ_t V = ρ_t (r_t + γ_t V(x_{t+1}) − V(x_t)); advantage ρ_pg,s (r_s + γ_s v_{s+1} − V(x_s))."""
    n_steps, n_batch = rewards.shape
    vs = np.zeros((n_steps, n_batch))
    advantages = np.zeros((n_steps, n_batch))
    clip = lambda ratio, bar: ratio if bar is None else min(bar, ratio)  # noqa: E731
    value = lambda t, b: bootstrap_value[b] if t == n_steps else values[t, b]  # noqa: E731
    ratio = lambda t, b: float(np.exp(log_rhos[t, b]))  # noqa: E731
    for b in range(n_batch):
        for s in range(n_steps):
            total = value(s, b)
            for t in range(s, n_steps):
                weight = 1.0
                for i in range(s, t):
                    weight *= discounts[i, b] * clip(ratio(i, b), c_bar)
                delta = clip(ratio(t, b), rho_bar) * (rewards[t, b] + discounts[t, b] * value(t + 1, b) - value(t, b))
                total += weight * delta
            vs[s, b] = total
        for s in range(n_steps):
            next_v = bootstrap_value[b] if s == n_steps - 1 else vs[s + 1, b]
            advantages[s, b] = clip(ratio(s, b), pg_rho_bar) * (rewards[s, b] + discounts[s, b] * next_v - values[s, b])
    return vs, advantages


def random_batch(seed, n_steps=9, n_batch=4, gamma=0.97):
    rng = np.random.default_rng(seed)
    discounts = np.full((n_steps, n_batch), gamma)
    discounts[rng.random((n_steps, n_batch)) < 0.2] = 0.0  # episode ends anywhere, several per column
    discounts[3, 0] = 0.0
    return {
        "log_rhos": rng.normal(0.0, 0.8, (n_steps, n_batch)),  # ratios well below and above 1
        "discounts": discounts,
        "rewards": rng.normal(0.0, 1.0, (n_steps, n_batch)),
        "values": rng.normal(0.0, 1.0, (n_steps, n_batch)),
        "bootstrap_value": rng.normal(0.0, 1.0, n_batch),
    }


def as_torch(batch):
    return {key: torch.tensor(value, dtype=torch.float64) for key, value in batch.items()}


@pytest.mark.parametrize(
    "seed, rho_bar, pg_rho_bar, c_bar",
    [(0, 1.0, 1.0, 1.0), (1, 0.5, 0.7, 0.3), (2, None, None, None), (3, 2.0, 0.8, 0.9), (4, 0.9, None, 0.6)],
)
def test_matches_the_papers_sum_with_episode_ends_and_clipping(seed, rho_bar, pg_rho_bar, c_bar):
    batch = random_batch(seed)
    vs, advantages = vtrace_from_importance_weights(
        **as_torch(batch), clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, clip_c_threshold=c_bar
    )
    expected_vs, expected_advantages = paper_vtrace(**batch, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar, c_bar=c_bar)
    np.testing.assert_allclose(vs.numpy(), expected_vs, atol=1e-6, rtol=0)
    np.testing.assert_allclose(advantages.numpy(), expected_advantages, atol=1e-6, rtol=0)
    # clipping at these thresholds really changes the result (the test would notice a missing clip)
    if rho_bar is not None and rho_bar < 1:
        unclipped, _ = vtrace_from_importance_weights(
            **as_torch(batch), clip_rho_threshold=None, clip_c_threshold=c_bar
        )
        assert not torch.allclose(unclipped, vs)


def n_step_returns(rewards, discounts, bootstrap_value):
    """Σ_{t≥s} (Π_{i<t} γ_i) r_t + (Π_i γ_i) V(x_T): the on-policy bootstrapped return to the end."""
    n_steps = rewards.shape[0]
    returns = np.zeros_like(rewards)
    for s in range(n_steps):
        scale = np.ones(rewards.shape[1])
        for t in range(s, n_steps):
            returns[s] += scale * rewards[t]
            scale = scale * discounts[t]
        returns[s] += scale * bootstrap_value
    return returns


def test_on_policy_targets_are_n_step_bootstrapped_returns():
    batch = random_batch(7, n_steps=12, n_batch=3)
    batch["log_rhos"] = np.zeros_like(batch["log_rhos"])
    vs, advantages = vtrace_from_importance_weights(**as_torch(batch))
    expected = n_step_returns(batch["rewards"], batch["discounts"], batch["bootstrap_value"])
    np.testing.assert_allclose(vs.numpy(), expected, atol=1e-10)
    next_returns = np.vstack([expected[1:], batch["bootstrap_value"][None]])
    np.testing.assert_allclose(
        advantages.numpy(), batch["rewards"] + batch["discounts"] * next_returns - batch["values"], atol=1e-10
    )


def test_targets_carry_no_gradient_and_shapes_are_checked():
    batch = as_torch(random_batch(5))
    values = batch["values"].clone().requires_grad_(True)
    log_rhos = batch["log_rhos"].clone().requires_grad_(True)
    vs, advantages = vtrace_from_importance_weights(
        log_rhos, batch["discounts"], batch["rewards"], values, batch["bootstrap_value"]
    )
    assert not vs.requires_grad and not advantages.requires_grad
    assert vs.shape == advantages.shape == values.shape
    with pytest.raises(ValueError, match="bootstrap_value"):
        vtrace_from_importance_weights(log_rhos, batch["discounts"], batch["rewards"], values, batch["values"])
    with pytest.raises(ValueError, match="clip_c_threshold"):
        vtrace_from_importance_weights(**batch, clip_c_threshold=0.0)
