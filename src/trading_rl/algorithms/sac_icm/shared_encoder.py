"""The shared encoder of many-symbol training: one representation of the market learned from all
symbols, injected into each symbol's SAC(+ICM) as a frozen SB3 features extractor (its parameters
and the per-symbol training task are ``phases.multi_symbol``).

The encoder is trained once on every symbol's observations, then frozen and injected into each
symbol's agent. Why (docs/scale_out.md, "Shared encoder"): one representation of the market learned
from all symbols, with only the small per-symbol actor/critic heads trained per symbol. Here the
encoder is the encoder half of an MLP autoencoder fitted to observations of every symbol's
*training* split (random-action rollouts, so the portfolio part of the observation varies too);
nothing from a validation or test split reaches it.

Each agent holds its own frozen copy inside its policy (saved in the model zip), so a model loads and
runs without the encoder dataset, and no training step of one symbol can move another's features.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.envs import EnvSpec
from trading_rl.training.params import AgentParams

ModuleT = TypeVar("ModuleT", bound=nn.Module)


class SharedEncoder(nn.Module):
    """Observation -> ``latent_dim`` features (Linear-ReLU-Linear-Tanh: bounded features for the heads)."""

    def __init__(self, obs_dim: int, hidden_dim: int, latent_dim: int) -> None:
        super().__init__()
        self.config = {"obs_dim": obs_dim, "hidden_dim": hidden_dim, "latent_dim": latent_dim}
        self.net = nn.Sequential(
            nn.Linear(obs_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, latent_dim), nn.Tanh()
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SharedEncoder:
        return cls(int(config["obs_dim"]), int(config["hidden_dim"]), int(config["latent_dim"]))

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.net(observations.flatten(1).float())


def collect_observations(specs: Sequence[EnvSpec], steps_per_symbol: int, seed: int) -> np.ndarray:
    """``steps_per_symbol`` observations of each symbol's training split under uniform random actions."""
    batches = []
    for index, spec in enumerate(specs):
        env = spec.make_env("train", seed=seed + index)
        env.action_space.seed(seed + index)
        observation, _ = env.reset(seed=seed + index)
        rows: list[np.ndarray] = []
        while len(rows) < steps_per_symbol:
            rows.append(observation)
            observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                observation, _ = env.reset()
        batches.append(np.asarray(rows, dtype=np.float32))
    return np.concatenate(batches)


def fit_shared_encoder(
    observations: np.ndarray, config: Mapping[str, Any], seed: int
) -> tuple[SharedEncoder, list[float]]:
    """Fit an autoencoder (MSE reconstruction, Adam, shuffled mini-batches) and return its encoder,
    frozen, with the mean reconstruction loss of every epoch. ``config``: a resolved
    ``shared_encoder`` section."""
    generator = th.Generator().manual_seed(seed)
    th.manual_seed(seed)
    data = th.as_tensor(observations, dtype=th.float32)
    encoder = SharedEncoder(data.shape[1], config["hidden_dim"], config["latent_dim"])
    decoder = nn.Sequential(
        nn.Linear(config["latent_dim"], config["hidden_dim"]), nn.ReLU(), nn.Linear(config["hidden_dim"], data.shape[1])
    )
    optimizer = th.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=float(config["learning_rate"]))
    losses = []
    for _ in range(config["epochs"]):
        total = 0.0
        for batch in th.randperm(len(data), generator=generator).split(config["batch_size"]):
            loss = nn.functional.mse_loss(decoder(encoder(data[batch])), data[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss) * len(batch)
        losses.append(total / len(data))
    return freeze(encoder), losses


def freeze(module: ModuleT) -> ModuleT:
    """Eval mode, no gradients: the module is a fixed function from here on."""
    module.requires_grad_(False)
    return module.eval()


def parameters_to_buffers(module: nn.Module) -> nn.Module:
    """Turn every parameter of ``module`` into a buffer of the same name, in place.

    Buffers are saved and moved with the module like parameters, but no optimiser and no SB3 Polyak
    update sees them: ``(1 - τ)·x + τ·x`` is not bit-exactly ``x``, so a target critic would
    otherwise drift away from the frozen weights in the last bits.
    """
    for submodule in module.modules():
        for name, parameter in list(submodule.named_parameters(recurse=False)):
            delattr(submodule, name)
            submodule.register_buffer(name, parameter.detach().clone())
    return module.eval()


class FrozenEncoderExtractor(BaseFeaturesExtractor):
    """SB3 features extractor applying a frozen copy of a ``SharedEncoder`` (held as buffers, so
    actor, critic and target critic all read the same fixed features while their heads train)."""

    def __init__(self, observation_space: gym.spaces.Box, encoder: SharedEncoder) -> None:
        obs_dim = int(np.prod(observation_space.shape))
        if encoder.config["obs_dim"] != obs_dim:
            raise ValueError(
                f"the shared encoder was fitted on {encoder.config['obs_dim']}-dim observations, this env has "
                f"{obs_dim}: every symbol must use the same features and window_size"
            )
        super().__init__(observation_space, features_dim=int(encoder.config["latent_dim"]))
        self.encoder = parameters_to_buffers(copy.deepcopy(encoder))

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.encoder(observations)


def build_agent_with_encoder(
    env: gym.Env, agent_params: AgentParams, seed: int, device: str, encoder: SharedEncoder | None
):
    """``trading_rl.algorithms.sac_icm.sac_icm.build_agent``, with ``encoder`` (when given) as the features extractor.

    ``build_agent`` takes no policy keyword arguments, so the agent is built as usual and its networks
    are built again with the extractor; SB3's ``_setup_model`` re-seeds with the agent's seed first,
    so the result is as reproducible as a direct build.
    """
    model = build_agent(env, agent_params, seed=seed, device=device)
    if encoder is not None:
        model.policy_kwargs = {
            **model.policy_kwargs,
            "features_extractor_class": FrozenEncoderExtractor,
            "features_extractor_kwargs": {"encoder": encoder},
        }
        model._setup_model()
    return model
