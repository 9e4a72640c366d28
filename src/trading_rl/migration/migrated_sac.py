"""The migrated agent: an SB3 SAC whose actor hidden layers are a discrete PPO checkpoint's
(``checkpoints``), copied exactly, with a mean head distilled from the discrete policy's greedy
actions (``distillation``), a new log-std head and fresh critics; the checks of a migration and its
fine-tune.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC
from torch import nn

from trading_rl.algorithms.saved import sb3_zip_bytes
from trading_rl.migration.checkpoints import (
    CheckpointError,
    DiscreteCheckpoint,
    migration_metadata,
    set_migration_metadata,
)
from trading_rl.migration.distillation import GreedyDemonstration, distil_mean_head
from trading_rl.training.sb3_logging import use_quiet_logger

SAC_LATENT_PREFIX = "actor.latent_pi."


def layer_mapping(checkpoint: DiscreteCheckpoint) -> dict[str, str]:
    """Source parameter name → migrated parameter name (input layer first)."""
    mapping = {}
    for position, prefix in enumerate(checkpoint.policy_layer_keys):
        for part in ("weight", "bias"):
            mapping[f"{prefix}.{part}"] = f"{SAC_LATENT_PREFIX}{2 * position}.{part}"
    return mapping


def build_migrated_sac(
    checkpoint: DiscreteCheckpoint,
    env,
    demonstration: GreedyDemonstration,
    *,
    critic_hidden_sizes: list[int] | tuple[int, ...] = (256, 256),
    head_gain: float = 0.01,
    log_std_init: float = -0.5,
    seed: int | None = None,
    device: str = "cpu",
    sac_kwargs: dict[str, Any] | None = None,
    run_metadata: dict[str, Any] | None = None,
) -> SAC:
    """SAC on continuous ``env`` whose actor hidden layers are the checkpoint's, copied exactly, and
    whose mean head is fitted to the checkpoint's greedy signals on ``demonstration``'s states.

    The model carries ``migration_metadata`` (a JSON-ready dict); SB3 saves it in the zip's
    ``data`` JSON and restores it on load.
    """
    if tuple(env.observation_space.shape) != (checkpoint.observation_dim,):
        raise CheckpointError(
            f"checkpoint '{checkpoint.source_name}': observation dimension {checkpoint.observation_dim}, "
            f"but the environment has {env.observation_space.shape}"
        )
    model = SAC(
        "MlpPolicy",
        env,
        policy_kwargs=dict(
            net_arch=dict(pi=list(checkpoint.hidden_sizes), qf=list(critic_hidden_sizes)),
            activation_fn=checkpoint.activation_fn,
        ),
        seed=seed,
        device=device,
        **(sac_kwargs or {}),
    )
    mu, log_std = model.policy.actor.mu, model.policy.actor.log_std
    if not (isinstance(mu, nn.Linear) and isinstance(log_std, nn.Linear)):
        raise ValueError("the migration initialises Linear mu and log_std heads; SAC with use_sde=True has none")
    mapping = layer_mapping(checkpoint)
    migrated_params = dict(model.policy.named_parameters())
    with torch.no_grad():
        for source, target in mapping.items():
            migrated_params[target].copy_(checkpoint.state_dict[source])
        nn.init.orthogonal_(log_std.weight, gain=head_gain)
        nn.init.constant_(log_std.bias, log_std_init)
    head_fit = distil_mean_head(model, demonstration)
    set_migration_metadata(
        model,
        {
            "source_file": checkpoint.source_name,
            "source_sha256": checkpoint.sha256,
            "source_algorithm": "PPO",
            "source_sb3_version": checkpoint.sb3_version,
            "migrated_at_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "layer_mapping": mapping,
            "hidden_sizes": list(checkpoint.hidden_sizes),
            "activation": checkpoint.activation,
            "observation_dim": checkpoint.observation_dim,
            "source_action_space": f"Discrete({checkpoint.n_actions})",
            "action_space": "Box(-1.0, 1.0, (1,)), tanh-squashed Gaussian (SAC)",
            "new_heads": {
                "mu": "ridge least squares on the discrete policy's greedy signals (head_fit)",
                "log_std": f"orthogonal gain {head_gain}, bias {log_std_init}",
            },
            "head_fit": head_fit,
            "critics": f"fresh, hidden sizes {list(critic_hidden_sizes)}",
            "run": dict(run_metadata or {}),
        },
    )
    return model


def hidden_weight_differences(checkpoint: DiscreteCheckpoint, model: SAC) -> dict[str, float]:
    """Max absolute difference per mapped parameter between the source and ``model``."""
    params = dict(model.policy.named_parameters())
    return {
        target: float((params[target].detach().cpu() - checkpoint.state_dict[source]).abs().max())
        for source, target in layer_mapping(checkpoint).items()
    }


def validate_migrated_model(
    checkpoint: DiscreteCheckpoint,
    model: SAC,
    n_observations: int = 1000,
    seed: int = 0,
    observation_scale: float = 3.0,
) -> dict[str, Any]:
    """Hard checks of a migration; ``passed`` is their conjunction.

    Reloads the model from its own in-memory zip on CPU (a file this process just wrote, so
    unpickling it is safe) and feeds ``n_observations`` random observations through it,
    deterministic and stochastic. They are drawn from N(0, ``observation_scale``²), clipped to the
    observation space: scaled features live in a few units, whereas the trading env's space admits
    any finite float32, whose extremes would only overflow the first layer.
    """
    before = hidden_weight_differences(checkpoint, model)
    reloaded = SAC.load(io.BytesIO(sb3_zip_bytes(model)), device="cpu")
    after = hidden_weight_differences(checkpoint, reloaded)
    space = reloaded.observation_space
    assert isinstance(space, gym.spaces.Box), "a migrated SAC observes the trading env's Box"
    draws = np.random.default_rng(seed).normal(0.0, observation_scale, (n_observations, *space.shape))
    observations = np.clip(draws, space.low, space.high).astype(space.dtype)
    deterministic, _ = reloaded.predict(observations, deterministic=True)
    stochastic, _ = reloaded.predict(observations, deterministic=False)
    actions = np.concatenate([deterministic, stochastic])
    checks = {
        "hidden_weights_max_abs_diff": max(before.values()),
        "hidden_weights_identical": max(before.values()) == 0.0,
        "reloads_in_sb3": migration_metadata(reloaded) == migration_metadata(model),
        "reloaded_weights_identical": max(after.values()) == 0.0,
        "n_random_observations": int(n_observations),
        "actions_shape_ok": deterministic.shape == (n_observations, 1),
        "actions_min": float(actions.min()),
        "actions_max": float(actions.max()),
        "actions_within_bounds": bool(np.isfinite(actions).all() and actions.min() >= -1.0 and actions.max() <= 1.0),
        "cpu_inference": reloaded.policy.device.type == "cpu",
    }
    checks["passed"] = all(
        checks[key]
        for key in (
            "hidden_weights_identical",
            "reloads_in_sb3",
            "reloaded_weights_identical",
            "actions_shape_ok",
            "actions_within_bounds",
            "cpu_inference",
        )
    )
    return checks


def fine_tune_migrated(model: SAC, env, total_timesteps: int, device: str = "cpu", callback=None) -> SAC:
    """A copy of ``model`` trained ``total_timesteps`` more steps on ``env`` (``callback``: SB3
    callbacks for ``learn``, e.g. the episode rewards for a tracker); ``model`` is unchanged.

    The copy comes from the model's own in-memory zip (written by this process, safe to unpickle)
    and records the fine-tune in its ``migration_metadata``.
    """
    if total_timesteps < 1:
        raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps}")
    tuned = SAC.load(io.BytesIO(sb3_zip_bytes(model)), env=env, device=device)
    use_quiet_logger(tuned)  # no empty tempdir/SB3-<time> folder per fine-tune
    tuned.learn(total_timesteps=total_timesteps, callback=callback)
    set_migration_metadata(tuned, {**migration_metadata(model), "fine_tune_timesteps": int(total_timesteps)})
    return tuned
