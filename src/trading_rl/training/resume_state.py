"""The parts of a resume checkpoint taken from a model, checked before anything is put back.

``snapshot`` copies the model's tensors, optimiser states and step counters (``apply_snapshot``
puts them back after ``check_snapshot``); ``buffer_snapshot`` takes the filled part of the replay
buffer (``_check_buffer``, then ``_restore_buffer``). Anything that does not fit the model raises
``CheckpointRejected``. The file that holds them: ``resume_file``; which run may take it: ``resume``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

# Step counters of SB3 (and SACWithICM's ICM batches): everything else a fresh model already has
# from the run's own configuration, which is exactly what a resumed run must not take from a file.
_COUNTERS = ("num_timesteps", "_n_updates", "_episode_num", "icm_batches")


class CheckpointRejected(ValueError):
    """A checkpoint that cannot be used by this run; the message says why."""


def weights_digest(model: BaseAlgorithm) -> str:
    """sha256 of the model's tensors: tells runs that start from other weights (seed, source) apart."""
    digest = hashlib.sha256()
    tensors = torch_state(model)[0]
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def torch_state(model: BaseAlgorithm) -> tuple[dict[str, th.Tensor], dict[str, Any]]:
    """The model's module and variable tensors (``{"<object>/<key>": tensor}``), and its optimiser
    state dicts (``{object name: state dict}``), as SB3's ``_get_torch_save_params`` lists them."""
    state_dicts, variables = model._get_torch_save_params()
    tensors: dict[str, th.Tensor] = {}
    optimizers: dict[str, Any] = {}
    for name in state_dicts:
        obj = _attribute(model, name)
        if isinstance(obj, th.optim.Optimizer):
            optimizers[name] = obj.state_dict()
        else:
            tensors.update({f"{name}/{key}": value for key, value in obj.state_dict().items()})
    for name in variables:
        tensors[f"{name}/"] = _attribute(model, name)
    return tensors, optimizers


def snapshot(model: BaseAlgorithm) -> dict[str, Any]:
    """A CPU copy of the model's tensors and step counters (what ``apply_snapshot`` puts back)."""
    tensors, optimizers = torch_state(model)
    return {
        "tensors": {key: value.detach().cpu().clone() for key, value in tensors.items()},
        "optimizers": _to_cpu(optimizers),
        "counters": {name: int(getattr(model, name)) for name in _COUNTERS if hasattr(model, name)},
    }


def check_snapshot(model: BaseAlgorithm, saved: Mapping[str, Any], source: str) -> None:
    """``CheckpointRejected`` (naming ``source``) unless every tensor, optimiser state and counter of
    ``saved`` fits ``model``."""
    tensors, optimizers = torch_state(model)
    try:
        _check_tensors(saved["tensors"], tensors, source)
        _check_optimizers(saved["optimizers"], optimizers, model, source)
    except (KeyError, TypeError, AttributeError) as exc:  # nested containers of the wrong kind
        raise CheckpointRejected(
            f"{source}: malformed optimiser or tensor state ({type(exc).__name__}: {exc})"
        ) from exc
    expected_counters = {name for name in _COUNTERS if hasattr(model, name)}
    if set(saved["counters"]) != expected_counters:
        raise CheckpointRejected(
            f"{source}: step counters {sorted(saved['counters'])}, expected {sorted(expected_counters)}"
        )


def apply_snapshot(model: BaseAlgorithm, saved: Mapping[str, Any], source: str) -> None:
    """Check ``saved`` against ``model`` first, then load it: a snapshot that does not fit raises
    ``CheckpointRejected`` and leaves ``model`` untouched."""
    check_snapshot(model, saved, source)
    tensors, _ = torch_state(model)
    with th.no_grad():
        for key, value in saved["tensors"].items():
            tensors[key].copy_(value.to(tensors[key].device))
    for name, state in saved["optimizers"].items():
        # The optimiser's moments come from the file; its settings (lr, weight decay …) stay this
        # run's, so `resume: force` with a lowered learning rate trains at the lowered rate.
        optimizer = _attribute(model, name)
        settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        optimizer.load_state_dict(state)
        for group, own in zip(optimizer.param_groups, settings):
            group.update(own)
    for name, value in saved["counters"].items():
        setattr(model, name, value)


def _attribute(model: BaseAlgorithm, dotted: str) -> Any:
    obj: Any = model
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _to_cpu(value: Any) -> Any:
    if isinstance(value, th.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(item) for item in value)
    return value


def _check_tensors(saved: Mapping[str, Any], expected: Mapping[str, th.Tensor], source: str) -> None:
    if set(saved) != set(expected):
        missing, extra = sorted(set(expected) - set(saved)), sorted(set(saved) - set(expected))
        raise CheckpointRejected(f"{source}: the network does not match (missing {missing[:3]}, extra {extra[:3]})")
    for key, tensor in expected.items():
        value = saved[key]
        if not isinstance(value, th.Tensor) or value.shape != tensor.shape or value.dtype != tensor.dtype:
            shape = tuple(value.shape) if isinstance(value, th.Tensor) else type(value).__name__
            raise CheckpointRejected(
                f"{source}: '{key}' has shape {shape}, this run's network needs {tuple(tensor.shape)} "
                "(another observation size or network size)"
            )


def _check_optimizers(saved: Mapping[str, Any], expected: Mapping[str, Any], model: BaseAlgorithm, source: str) -> None:
    """Each saved optimiser must have this run's parameter groups, and its per-parameter state the
    shapes of those parameters (torch would only notice at the next step)."""
    if set(saved) != set(expected):
        raise CheckpointRejected(f"{source}: optimisers {sorted(saved)}, this run has {sorted(expected)}")
    for name, state in saved.items():
        groups = _attribute(model, name).param_groups
        saved_groups = state["param_groups"]
        if len(saved_groups) != len(groups) or any(
            len(s["params"]) != len(g["params"]) for s, g in zip(saved_groups, groups)
        ):
            raise CheckpointRejected(f"{source}: optimiser '{name}' has other parameter groups than this run's")
        for saved_group, group in zip(saved_groups, groups):
            for index, parameter in zip(saved_group["params"], group["params"]):
                for key, value in state["state"].get(index, {}).items():
                    if isinstance(value, th.Tensor) and value.ndim and value.shape != parameter.shape:
                        raise CheckpointRejected(
                            f"{source}: optimiser '{name}' state '{key}' has shape {tuple(value.shape)}, "
                            f"its parameter {tuple(parameter.shape)}"
                        )


def _buffer_arrays(buffer: Any) -> dict[str, np.ndarray]:
    """The replay buffer's arrays (``observations``, ``actions`` …; dict observations as ``name.key``)."""
    arrays = {}
    for name, value in vars(buffer).items():
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
            arrays.update({f"{name}.{key}": v for key, v in value.items()})
    return arrays


def _buffer_target(buffer: Any, name: str) -> np.ndarray:
    attribute, _, key = name.partition(".")
    value = getattr(buffer, attribute)
    return value[key] if key else value


def replay_buffer_of(model: BaseAlgorithm) -> ReplayBuffer:
    """``model``'s replay buffer; a resume checkpoint holds one, so it needs an off-policy model."""
    if not isinstance(model, OffPolicyAlgorithm) or model.replay_buffer is None:
        raise ValueError(
            f"a resume checkpoint holds the replay buffer, and {type(model).__name__} has none: "
            "training.resume needs an off-policy model such as SAC"
        )
    return model.replay_buffer


def buffer_snapshot(buffer: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The filled part of every buffer array, and its position (``pos``, ``full``)."""
    filled = buffer.buffer_size if buffer.full else buffer.pos
    arrays = {
        name: (value[:filled] if value.ndim and value.shape[0] == buffer.buffer_size else value)
        for name, value in _buffer_arrays(buffer).items()
    }
    return arrays, {"pos": int(buffer.pos), "full": bool(buffer.full), "buffer_size": int(buffer.buffer_size)}


def _check_buffer(buffer: Any, arrays: Mapping[str, np.ndarray], position: Mapping[str, Any], source: str) -> None:
    expected = _buffer_arrays(buffer)
    if set(arrays) != set(expected):
        raise CheckpointRejected(f"{source}: replay buffer arrays {sorted(arrays)}, this run has {sorted(expected)}")
    if int(position["buffer_size"]) != buffer.buffer_size:
        raise CheckpointRejected(
            f"{source}: replay buffer of {position['buffer_size']} transitions, this run's holds {buffer.buffer_size}"
        )
    filled = buffer.buffer_size if position["full"] else int(position["pos"])
    for name, target in expected.items():
        value = arrays[name]
        sized = target.ndim and target.shape[0] == buffer.buffer_size
        wanted = (filled, *target.shape[1:]) if sized else target.shape
        if value.shape != wanted or value.dtype != target.dtype:
            raise CheckpointRejected(
                f"{source}: replay buffer '{name}' is {value.dtype}{list(value.shape)}, this run needs "
                f"{target.dtype}{list(wanted)} (another observation size?)"
            )


def _restore_buffer(buffer: Any, arrays: Mapping[str, np.ndarray], position: Mapping[str, Any]) -> None:
    """Put checked arrays back (``_check_buffer`` first)."""
    for name, value in arrays.items():
        target = _buffer_target(buffer, name)
        target[: len(value)] = value
    buffer.pos, buffer.full = int(position["pos"]), bool(position["full"])
