"""The migrated agent's mean head, distilled in closed form from the discrete policy it replaces.

The discrete PPO's knowledge of *what to do* sits in its 7-way ``action_net``; the migration copies
the hidden layers but needs a 1-d mean head ``mu`` for SAC. A fresh head (near zero) makes the
migrated agent sit flat where the discrete agent traded. Instead, the discrete policy is rolled
deterministically through the discrete env, each visited state's greedy action is turned into the
continuous signal it means (``ActionSpaceMigrator.to_continuous``, which resolves ADD_TO_WINNER
from the observation), and ``mu`` is the ridge least-squares fit of ``atanh(clip(signal, ±c))`` on
the copied last hidden layer's activations, so that SAC's deterministic action ``tanh(mu(h(s)))``
follows the greedy signal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trading_rl.envs.hybrid import ActionSpaceMigrator

# Signals reach ±1, where atanh is infinite. 0.95 (atanh ≈ 1.83) keeps BUY_LARGE and SELL_ALL
# nearest to their own levels (the boundaries to BUY_MEDIUM and SELL_PARTIAL are 0.83 and -0.75)
# while no single level dominates the squared error.
SIGNAL_CLIP = 0.95
# Per-state ridge on the head's weights (not its bias): conditioning only, for correlated or
# saturated hidden units; small next to the O(1) variance of tanh features.
RIDGE = 1e-3


@dataclass(frozen=True, eq=False)
class GreedyDemonstration:
    """States a discrete policy visited, its greedy action in each and the signal that action means."""

    observations: np.ndarray  # (n, observation_dim)
    actions: np.ndarray  # (n,) discrete greedy actions
    signals: np.ndarray  # (n,) continuous signals of those actions in those states
    migrator: ActionSpaceMigrator
    source: str  # where the states come from, for the report


@dataclass(frozen=True)
class HeadFit:
    """A least-squares mean head: ``mu(h) = weight @ h + bias``; ``r2`` in the atanh target space
    (``None`` when the targets do not vary, e.g. a policy that always holds)."""

    weight: np.ndarray
    bias: float
    r2: float | None
    n_states: int


def greedy_demonstration(policy, env, migrator: ActionSpaceMigrator, source: str, seed: int | None = None):
    """One deterministic episode of SB3 ``policy`` through discrete ``env``, every state recorded."""
    observations: list[np.ndarray] = []
    actions: list[int] = []
    observation, _ = env.reset(seed=seed)
    done = False
    while not done:
        action, _ = policy.predict(observation, deterministic=True)
        observations.append(np.asarray(observation, dtype=np.float32))
        actions.append(int(np.asarray(action).item()))
        observation, _, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    states, chosen = np.stack(observations), np.asarray(actions, dtype=np.int64)
    signals = np.asarray(migrator.to_continuous(chosen, states), dtype=np.float64)
    return GreedyDemonstration(states, chosen, signals, migrator, source)


def fit_mean_head(features: np.ndarray, signals: np.ndarray, clip: float = SIGNAL_CLIP, ridge: float = RIDGE):
    """Ridge least squares of ``atanh(clip(signals, ±clip))`` on ``features`` (n × d), bias unpenalised.

    Minimises ``mean((features @ w + b - target)²) + ridge · |w|²`` exactly, in float64, by centring.
    """
    features = np.asarray(features, dtype=np.float64)
    signals = np.asarray(signals, dtype=np.float64).reshape(-1)
    if features.ndim != 2 or features.shape[0] != signals.size or signals.size < 2:
        raise ValueError(
            f"features must be (n, d) with n >= 2 matching the signals, got {features.shape} and {signals.shape}"
        )
    if not 0.0 < clip < 1.0 or ridge < 0.0:
        raise ValueError(f"clip must lie in (0, 1) and ridge be >= 0, got clip={clip}, ridge={ridge}")
    targets = np.arctanh(np.clip(signals, -clip, clip))
    mean_feature, mean_target = features.mean(axis=0), targets.mean()
    centred = features - mean_feature
    n, d = features.shape
    gram = centred.T @ centred / n + ridge * np.eye(d)
    weight = np.linalg.solve(gram, centred.T @ (targets - mean_target) / n)
    bias = float(mean_target - mean_feature @ weight)
    residual = float(np.sum((features @ weight + bias - targets) ** 2))
    spread = float(np.sum((targets - mean_target) ** 2))
    return HeadFit(weight, bias, 1.0 - residual / spread if spread > 0 else None, int(n))


def last_hidden_features(model, observations: np.ndarray) -> np.ndarray:
    """The SAC actor's last hidden activations ``h(s)`` (the mean head's input) for a batch."""
    actor = model.policy.actor
    with torch.no_grad():
        obs, _ = model.policy.obs_to_tensor(np.asarray(observations, dtype=np.float32))
        latent = actor.latent_pi(actor.extract_features(obs, actor.features_extractor))
    return latent.cpu().numpy().astype(np.float64)


def distil_mean_head(model, demonstration: GreedyDemonstration) -> dict[str, Any]:
    """Set ``model``'s ``mu`` to the fit on ``demonstration``; the fit's record for the metadata."""
    fit = fit_mean_head(last_hidden_features(model, demonstration.observations), demonstration.signals)
    mu = model.policy.actor.mu
    with torch.no_grad():
        mu.weight.copy_(torch.as_tensor(fit.weight, dtype=mu.weight.dtype).reshape(mu.weight.shape))
        mu.bias.fill_(fit.bias)
    in_sample = greedy_agreement(model, demonstration)
    return {
        "states": demonstration.source,
        "n_states": fit.n_states,
        "target": f"atanh(clip(greedy signal, ±{SIGNAL_CLIP}))",
        "ridge": RIDGE,
        "r2": fit.r2,
        **{key: in_sample[key] for key in ("agreement", "side_agreement", "correlation")},
    }


def greedy_agreement(model, demonstration: GreedyDemonstration) -> dict[str, Any]:
    """How closely ``model``'s deterministic actions follow the greedy signals of ``demonstration``.

    ``agreement``: share of states where both map to the same discrete level (``to_discrete``);
    ``side_agreement``: the same for the side alone (sell, hold or buy: outside the hold band and
    its sign); ``correlation``: Pearson's between action and signal (``None`` if either is constant);
    ``*_active_share``: share of states outside the hold band (the agent asks for a position or a
    trade). ``passed`` fails only the degenerate case the fresh head produced: the discrete policy
    is active somewhere and the migrated agent nowhere.
    """
    migrator = demonstration.migrator
    actions = np.asarray(model.predict(demonstration.observations, deterministic=True)[0], np.float64).reshape(-1)
    signals = demonstration.signals
    migrated_levels = np.asarray(migrator.to_discrete(actions)).reshape(-1)
    greedy_levels = np.asarray(migrator.to_discrete(signals)).reshape(-1)
    varies = actions.std() > 0 and signals.std() > 0
    threshold = migrator.hold_threshold
    discrete_active = float(np.mean(np.abs(signals) > threshold))
    migrated_active = float(np.mean(np.abs(actions) > threshold))
    return {
        "states": demonstration.source,
        "n_states": int(actions.size),
        "agreement": float(np.mean(migrated_levels == greedy_levels)),
        "side_agreement": float(np.mean(_side(actions, threshold) == _side(signals, threshold))),
        "correlation": float(np.corrcoef(actions, signals)[0, 1]) if varies else None,
        "discrete_active_share": discrete_active,
        "migrated_active_share": migrated_active,
        "passed": not (discrete_active > 0 and migrated_active == 0),
    }


def _side(values: np.ndarray, hold_threshold: float) -> np.ndarray:
    """-1 (sell), 0 (hold) or 1 (buy) per signal."""
    return np.where(np.abs(values) > hold_threshold, np.sign(values), 0.0)
