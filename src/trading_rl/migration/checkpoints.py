"""Discrete SB3 PPO checkpoint → continuous SB3 SAC agent, without unpickling the source.

An SB3 zip holds ``data`` (JSON, some entries cloudpickled and base64-encoded), ``policy.pth``
(a torch state dict) and other members. Loading it with ``PPO.load`` unpickles code from the file, so
a legacy checkpoint is read here member by member: the zip is parsed, ``policy.pth`` goes through
``torch.load(..., weights_only=True)`` (plain tensors only), ``data`` is read as JSON, and the one
pickled entry needed to recognise the algorithm (the policy class) is disassembled with
``pickletools`` — its opcodes are listed, never executed.

The migrated agent is an SB3 SAC whose actor ``latent_pi`` has the discrete policy network's hidden
sizes and activation; its Linear layers receive the PPO ``mlp_extractor.policy_net`` weights exactly.
The 7-way ``action_net`` cannot be copied into SAC's 1-d mean head; that head is instead fitted to
the discrete policy's greedy signals (``distillation``), so the migrated agent acts like its source.
The log-std head has small weights and a configurable bias; SAC squashes the mean with tanh.
Critics are fresh: the PPO value net estimates state values, SAC needs action values
(``migrated_sac``).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickletools
import re
import zipfile
from base64 import b64decode
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
from stable_baselines3 import PPO, SAC
from torch import nn

PPO_POLICY_CLASS = "stable_baselines3.common.policies.ActorCriticPolicy"
# Hyperparameters only PPO stores; A2C shares the policy class but has neither.
PPO_ONLY_KEYS = ("clip_range", "n_epochs")
ALGORITHM_BY_POLICY_MODULE = {
    "stable_baselines3.dqn.policies": "DQN",
    "stable_baselines3.sac.policies": "SAC",
    "stable_baselines3.td3.policies": "TD3",
    "stable_baselines3.ddpg.policies": "DDPG",
}
POLICY_NET_PREFIX = "mlp_extractor.policy_net."
VALUE_NET_PREFIX = "mlp_extractor.value_net."
REQUIRED_MEMBERS = ("data", "policy.pth")
# PPO's default activation (``ActorCriticPolicy``) when ``policy_kwargs`` does not name one.
DEFAULT_PPO_ACTIVATION = "Tanh"
_ACTIVATION_REPR = re.compile(r"^<class 'torch\.nn\.modules\.activation\.(\w+)'>$")


Fail = Callable[[str], NoReturn]


class CheckpointError(ValueError):
    """A checkpoint that cannot be migrated; the message names the file and what does not match."""


@dataclass(frozen=True)
class DiscreteCheckpoint:
    """What a legacy PPO zip holds, read without unpickling."""

    source_name: str
    sha256: str
    observation_dim: int
    n_actions: int
    hidden_sizes: tuple[int, ...]
    activation: str
    state_dict: dict[str, torch.Tensor]
    sb3_version: str

    @property
    def policy_layer_keys(self) -> list[str]:
        """``mlp_extractor.policy_net.<i>`` prefixes of the hidden Linear layers, input first."""
        return _layer_prefixes(self.state_dict, POLICY_NET_PREFIX)

    @property
    def activation_fn(self) -> type[nn.Module]:
        return getattr(nn, self.activation)

    def to_payload(self) -> dict[str, Any]:
        """Plain data (JSON-like fields and tensors) for ``torch.save``; read back with
        ``torch.load(weights_only=True)`` and ``from_payload`` — a stored checkpoint is never a zip
        that ``PPO.load`` would unpickle."""
        return {
            "metadata": {
                "source_name": self.source_name,
                "sha256": self.sha256,
                "observation_dim": self.observation_dim,
                "n_actions": self.n_actions,
                "hidden_sizes": list(self.hidden_sizes),
                "activation": self.activation,
                "sb3_version": self.sb3_version,
            },
            "state_dict": {key: value.detach().cpu() for key, value in self.state_dict.items()},
        }

    @classmethod
    def from_payload(cls, payload: Any, source: str) -> DiscreteCheckpoint:
        """The checkpoint ``to_payload`` stored; ``CheckpointError`` naming ``source`` otherwise."""
        fields = {f for f in cls.__dataclass_fields__ if f != "state_dict"}
        metadata = payload.get("metadata") if isinstance(payload, dict) else None
        state_dict = payload.get("state_dict") if isinstance(payload, dict) else None
        if not isinstance(metadata, dict) or set(metadata) != fields or not isinstance(state_dict, dict):
            raise CheckpointError(
                f"{source}: not an extracted discrete checkpoint (metadata {fields} and a state dict)"
            )
        if not all(isinstance(value, torch.Tensor) for value in state_dict.values()):
            raise CheckpointError(f"{source}: the state dict holds something other than tensors")
        if not hasattr(nn, str(metadata["activation"])):
            raise CheckpointError(f"{source}: unknown activation {metadata['activation']!r}")
        return cls(
            **{**metadata, "hidden_sizes": tuple(int(s) for s in metadata["hidden_sizes"])}, state_dict=state_dict
        )

    def check_observation_dim(self, expected: int) -> None:
        if self.observation_dim != expected:
            raise CheckpointError(
                f"checkpoint '{self.source_name}': observation dimension {self.observation_dim}, "
                f"but the environment has {expected} (dataset 'env_spec'): load the env_spec it was trained "
                "with (`--load-versions env_spec:<version>`) or rebuild env_spec with its features and window_size"
            )


def sha256_hex(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _layer_prefixes(state_dict: dict[str, torch.Tensor], prefix: str) -> list[str]:
    """``<prefix><i>`` for every Sequential index ``i`` with parameters, in layer order."""
    indices = sorted({int(key[len(prefix) :].split(".")[0]) for key in state_dict if key.startswith(prefix)})
    return [f"{prefix}{i}" for i in indices]


def _pickled_global(entry: Any) -> str | None:
    """``module.Name`` of the class a base64 cloudpickle entry refers to, read from its opcodes only."""
    if not isinstance(entry, dict) or ":serialized:" not in entry:
        return None
    strings: list[str] = []
    try:
        for opcode, arg, _ in pickletools.genops(b64decode(entry[":serialized:"])):
            if opcode.name == "GLOBAL":
                return str(arg).replace(" ", ".")
            if opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                return f"{strings[-2]}.{strings[-1]}"
            if isinstance(arg, str):
                strings.append(arg)
    except Exception:  # malformed base64 or opcodes raise various errors; the class is unreadable
        return None
    return None


def _readable_int(value: Any) -> int | None:
    """SB3 writes numpy scalars of a pickled space as their ``str``; plain JSON ints pass through."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _activation_name(policy_kwargs: Any, fail: Fail) -> str:
    if not isinstance(policy_kwargs, dict) or "activation_fn" not in policy_kwargs:
        return DEFAULT_PPO_ACTIVATION
    match = _ACTIVATION_REPR.match(str(policy_kwargs["activation_fn"]))
    activation = getattr(nn, match.group(1), None) if match else None
    if match is None or not (isinstance(activation, type) and issubclass(activation, nn.Module)):
        fail(f"unsupported activation_fn {policy_kwargs['activation_fn']!r}; expected a torch.nn activation")
    return match.group(1)


def _declared_policy_arch(policy_kwargs: Any) -> list[int] | None:
    net_arch = policy_kwargs.get("net_arch") if isinstance(policy_kwargs, dict) else None
    if isinstance(net_arch, dict) and isinstance(net_arch.get("pi"), list):
        return [int(size) for size in net_arch["pi"]]
    if isinstance(net_arch, list) and all(isinstance(size, int) for size in net_arch):
        return list(net_arch)
    return None


def _read_members(raw: bytes, fail: Fail) -> tuple[dict[str, Any], dict[str, torch.Tensor], str]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile as exc:
        fail(f"not a readable zip archive ({exc}); the file is corrupt or truncated")
    with archive:
        missing = [name for name in REQUIRED_MEMBERS if name not in archive.namelist()]
        if missing:
            fail(f"zip lacks member(s) {missing}: not a Stable-Baselines3 checkpoint")
        try:
            damaged = archive.testzip()
            data_text = archive.read("data")
            policy_bytes = archive.read("policy.pth")
            version = (
                archive.read("_stable_baselines3_version").decode().strip()
                if "_stable_baselines3_version" in archive.namelist()
                else "unknown"
            )
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            fail(f"zip member could not be read ({exc}); the file is corrupt or truncated")
        if damaged is not None:
            fail(f"zip member {damaged!r} fails its CRC check; the file is corrupt")
    try:
        data = json.loads(data_text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"member 'data' is not valid JSON ({exc})")
    try:
        state_dict = torch.load(io.BytesIO(policy_bytes), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for malformed or non-tensor payloads
        fail(f"member 'policy.pth' is not a plain tensor state dict ({type(exc).__name__}: {exc})")
    if not isinstance(data, dict) or not isinstance(state_dict, dict):
        fail("members 'data'/'policy.pth' do not hold the expected mappings")
    return data, state_dict, version


def _check_algorithm(data: dict[str, Any], fail: Fail) -> None:
    policy_class = _pickled_global(data.get("policy_class"))
    if policy_class != PPO_POLICY_CLASS:
        module = policy_class.rpartition(".")[0] if policy_class else ""
        algorithm = ALGORITHM_BY_POLICY_MODULE.get(module, "unknown algorithm")
        fail(
            f"expected a PPO checkpoint with policy {PPO_POLICY_CLASS}, found policy class "
            f"{policy_class or 'unreadable'} ({algorithm})"
        )
    if not all(key in data for key in PPO_ONLY_KEYS):
        fail(f"actor-critic checkpoint without PPO's {list(PPO_ONLY_KEYS)}: not PPO (A2C?)")


def inspect_discrete_checkpoint(
    raw: bytes,
    source_name: str,
    expected_observation_dim: int | None = None,
    expected_hidden_sizes: list[int] | tuple[int, ...] | None = None,
    expected_n_actions: int | None = 7,
) -> DiscreteCheckpoint:
    """Parse and check a PPO zip; raise :class:`CheckpointError` naming ``source_name`` on any mismatch.

    Hidden sizes come from the checkpoint's tensors; ``expected_*`` (``None``: accept any) compare
    them, the observation dimension and the number of actions with what the caller needs.
    """

    def fail(reason: str) -> NoReturn:
        raise CheckpointError(f"checkpoint '{source_name}': {reason}")

    data, state_dict, version = _read_members(raw, fail)
    _check_algorithm(data, fail)

    action_space = data.get("action_space", {})
    if "Discrete" not in str(action_space.get(":type:", "")):
        fail(f"action space is {action_space.get(':type:', 'unknown')}, expected gymnasium Discrete")
    observation_space = data.get("observation_space", {})
    shape = observation_space.get("_shape")
    if "Box" not in str(observation_space.get(":type:", "")) or not isinstance(shape, list) or len(shape) != 1:
        fail(f"observation space must be a 1-d Box, found {observation_space.get(':type:')} shape {shape}")

    allowed = (POLICY_NET_PREFIX, VALUE_NET_PREFIX, "action_net.", "value_net.")
    unexpected = sorted(key for key in state_dict if not key.startswith(allowed))
    if unexpected:
        fail(f"policy has parameters outside an MLP actor-critic (custom feature extractor?): {unexpected[:4]}")
    prefixes = _layer_prefixes(state_dict, POLICY_NET_PREFIX)
    if not prefixes or "action_net.weight" not in state_dict:
        fail("policy.pth has no mlp_extractor.policy_net layers or no action_net")

    observation_dim = int(shape[0])
    previous = observation_dim
    hidden_sizes = []
    for prefix in prefixes:
        weight, bias = state_dict.get(f"{prefix}.weight"), state_dict.get(f"{prefix}.bias")
        if weight is None or bias is None or weight.ndim != 2 or bias.shape != (weight.shape[0],):
            fail(f"{prefix} is not a Linear layer with weight and bias")
        if weight.shape[1] != previous:
            fail(f"{prefix}.weight takes {weight.shape[1]} inputs, expected {previous}")
        hidden_sizes.append(int(weight.shape[0]))
        previous = int(weight.shape[0])
    action_weight = state_dict["action_net.weight"]
    n_actions = int(action_weight.shape[0])
    declared_n = _readable_int(action_space.get("n"))
    if action_weight.shape[1] != previous or declared_n != n_actions:
        fail(f"action_net {tuple(action_weight.shape)} does not match the action space (n={declared_n})")
    declared_arch = _declared_policy_arch(data.get("policy_kwargs"))
    if declared_arch is not None and declared_arch != hidden_sizes:
        fail(f"policy_kwargs declare hidden sizes {declared_arch} but the tensors have {hidden_sizes}")

    if expected_hidden_sizes is not None and hidden_sizes != [int(s) for s in expected_hidden_sizes]:
        fail(f"hidden sizes {hidden_sizes}, expected {list(expected_hidden_sizes)}")
    if expected_n_actions is not None and n_actions != expected_n_actions:
        fail(f"{n_actions} discrete actions, expected {expected_n_actions}")

    checkpoint = DiscreteCheckpoint(
        source_name=source_name,
        sha256=sha256_hex(raw),
        observation_dim=observation_dim,
        n_actions=n_actions,
        hidden_sizes=tuple(hidden_sizes),
        activation=_activation_name(data.get("policy_kwargs"), fail),
        state_dict=state_dict,
        sb3_version=version,
    )
    if expected_observation_dim is not None:
        checkpoint.check_observation_dim(expected_observation_dim)
    return checkpoint


MIGRATION_METADATA_ATTRIBUTE = "migration_metadata"


def migration_metadata(model: SAC) -> dict[str, Any]:
    """What the migration recorded on ``model`` (an attribute SB3 saves in the zip)."""
    return getattr(model, MIGRATION_METADATA_ATTRIBUTE)


def set_migration_metadata(model: SAC, metadata: dict[str, Any]) -> None:
    setattr(model, MIGRATION_METADATA_ATTRIBUTE, metadata)


def discrete_policy_from_checkpoint(checkpoint: DiscreteCheckpoint, env, device: str = "cpu") -> PPO:
    """A PPO on ``env`` carrying the checkpoint's policy tensors: evaluates a legacy policy unpickled."""
    model = PPO(
        "MlpPolicy",
        env,
        policy_kwargs=dict(
            net_arch=dict(pi=list(checkpoint.hidden_sizes), vf=_value_sizes(checkpoint)),
            activation_fn=checkpoint.activation_fn,
        ),
        device=device,
    )
    model.policy.load_state_dict(checkpoint.state_dict, strict=True)
    return model


def _value_sizes(checkpoint: DiscreteCheckpoint) -> list[int]:
    return [
        int(checkpoint.state_dict[f"{prefix}.weight"].shape[0])
        for prefix in _layer_prefixes(checkpoint.state_dict, VALUE_NET_PREFIX)
    ]
