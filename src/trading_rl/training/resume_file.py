"""The resume checkpoint file: a zip of JSON (identity, counters, run state), ``tensors.pt`` (plain
tensors, read with ``torch.load(weights_only=True)``) and ``replay_buffer.npz`` (read with
``np.load(allow_pickle=False)``), written atomically and read back without unpickling code.
``RunIdentity`` is who may resume it (``resume``).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm

from trading_rl.archives import check_member_sizes
from trading_rl.provenance import config_hash
from trading_rl.training.resume_state import CheckpointRejected, buffer_snapshot, replay_buffer_of, snapshot

FORMAT_VERSION = 1
_MEMBERS = ("identity.json", "state.json", "tensors.pt", "replay_buffer.npz")


@dataclass(frozen=True)
class RunIdentity:
    """Who may resume a checkpoint: ``phase``, ``symbol`` and the parameters that define the run."""

    phase: str
    symbol: str
    parameters: Mapping[str, Any]

    @property
    def config_hash(self) -> str:
        return config_hash(dict(self.parameters))

    @property
    def key(self) -> str:
        """Hash of symbol and parameters: the checkpoint's file name (the phase is spelled out)."""
        return config_hash({"symbol": self.symbol, "config_hash": self.config_hash})

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "symbol": self.symbol,
            "config_hash": self.config_hash,
            "parameters": json.loads(json.dumps(self.parameters, sort_keys=True, default=str)),
        }


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON data")


@dataclass
class Checkpoint:
    """A checkpoint read back (nothing of it applied yet)."""

    path: Path
    identity: dict[str, Any]
    model: dict[str, Any]
    best: dict[str, Any] | None
    run_state: dict[str, Any]
    buffer_arrays: dict[str, np.ndarray]
    buffer_position: dict[str, Any]


def _tensor_part(saved: Mapping[str, Any]) -> dict[str, Any]:
    return {"tensors": saved["tensors"], "optimizers": saved["optimizers"]}


def write_checkpoint(
    path: Path,
    identity: RunIdentity,
    model: BaseAlgorithm,
    run_state: Mapping[str, Any],
    best: Mapping[str, Any] | None,
) -> None:
    """Write atomically (temporary file, fsync, rename): a kill mid-write keeps the previous one."""
    current = snapshot(model)
    tensors = io.BytesIO()
    th.save({"model": _tensor_part(current), "best": None if best is None else _tensor_part(best)}, tensors)
    arrays, position = buffer_snapshot(replay_buffer_of(model))
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    state = {
        "format": FORMAT_VERSION,
        "counters": current["counters"],
        "best_counters": None if best is None else best["counters"],
        "run": dict(run_state),
        "replay_buffer": position,
    }
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("identity.json", json.dumps(identity.to_dict(), sort_keys=True))
        archive.writestr("state.json", json.dumps(state, default=_json_default))
        archive.writestr("tensors.pt", tensors.getvalue())
        archive.writestr("replay_buffer.npz", buffer.getvalue())
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _snapshot_from(tensors: Any, counters: Any) -> dict[str, Any]:
    return {
        "tensors": dict(tensors["tensors"]),
        "optimizers": dict(tensors["optimizers"]),
        "counters": {str(name): _integer(value) for name, value in counters.items()},
    }


def read_checkpoint(path: Path) -> Checkpoint:
    """Parse a checkpoint without executing anything from it; ``CheckpointRejected`` names the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            check_member_sizes(archive, str(path))
            missing = [name for name in _MEMBERS if name not in archive.namelist()]
            if missing:
                raise CheckpointRejected(f"{path}: lacks {missing} (not a resume checkpoint of this version)")
            identity = json.loads(archive.read("identity.json"))
            state = json.loads(archive.read("state.json"))
            tensors = th.load(io.BytesIO(archive.read("tensors.pt")), map_location="cpu", weights_only=True)
            with np.load(io.BytesIO(archive.read("replay_buffer.npz")), allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
    except CheckpointRejected:
        raise
    except Exception as exc:  # zip, JSON, torch and numpy each raise their own types on bad bytes
        raise CheckpointRejected(f"{path}: unreadable ({type(exc).__name__}: {exc})") from exc
    try:
        if state["format"] != FORMAT_VERSION:
            raise ValueError(f"format {state['format']!r}, expected {FORMAT_VERSION}")
        position = state["replay_buffer"]
        return Checkpoint(
            path=path,
            identity=dict(identity),
            model=_snapshot_from(tensors["model"], state["counters"]),
            best=None if tensors["best"] is None else _snapshot_from(tensors["best"], state["best_counters"]),
            run_state=dict(state["run"]),
            buffer_arrays=arrays,
            buffer_position={
                "pos": _integer(position["pos"]),
                "full": bool(position["full"]),
                "buffer_size": _integer(position["buffer_size"]),
            },
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # well-formed files, wrong content
        raise CheckpointRejected(f"{path}: malformed ({type(exc).__name__}: {exc})") from exc
