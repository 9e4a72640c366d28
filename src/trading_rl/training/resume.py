"""Resume checkpoints that belong to one run and load without executing code.

A killed training run restarts from its last checkpoint — but only a run with the same identity
(phase, symbol and the hash of everything that defines the run: parameters, seed, data, spaces,
starting weights) may take it. The hash is part of the file name, so a run with other parameters
never sees it as its own; ``resume: force`` adopts the newest checkpoint of the same phase and
symbol anyway (the shapes must still fit).

Each checkpoint has a lock (``fcntl.flock`` on ``<name>.lock``) held for the whole run: a second run
with the same identity gets its own file (``…-run-<id>.ckpt``) instead of sharing or deleting the
first one's. A checkpoint that does not read back, or does not fit the model, is renamed into
``set_aside/`` with a WARNING naming it; the run starts fresh. Nothing here deletes a file that
another live run holds.

The file is a zip of JSON (identity, counters, run state), ``tensors.pt`` (networks, optimisers and
the best model's weights as plain tensors, read with ``torch.load(weights_only=True)``) and
``replay_buffer.npz`` (read with ``np.load(allow_pickle=False)``) — no unpickling of code.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from trading_rl.archives import check_member_sizes
from trading_rl.file_lock import FileLock
from trading_rl.provenance import config_hash

logger = logging.getLogger(__name__)

RESUME_MODES = ("auto", "force")
CHECKPOINT_SUFFIX = ".ckpt"
SET_ASIDE_DIR = "set_aside"
FORMAT_VERSION = 1
# Step counters of SB3 (and SACWithICM's ICM batches): everything else a fresh model already has
# from the run's own configuration, which is exactly what a resumed run must not take from a file.
_COUNTERS = ("num_timesteps", "_n_updates", "_episode_num", "icm_batches")
_MEMBERS = ("identity.json", "state.json", "tensors.pt", "replay_buffer.npz")


class CheckpointRejected(ValueError):
    """A checkpoint that cannot be used by this run; the message says why."""


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


def _lock_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".lock")


def sweep_orphan_locks(work_dir: Path) -> None:
    """Remove the empty ``*.lock`` files whose checkpoint is gone (completed, set aside) and that no
    live run holds, so they do not accumulate."""
    for lock_path in work_dir.glob(f"*{CHECKPOINT_SUFFIX}.lock"):
        lock = FileLock(lock_path)
        if lock.acquire():
            if not lock_path.with_name(lock_path.name.removesuffix(".lock")).exists():
                lock.unlink_held()
            lock.release()


def set_aside(path: Path, reason: str) -> Path:
    """Rename ``path`` into ``set_aside/`` (kept, never deleted) and log a WARNING naming both."""
    target_dir = path.parent / SET_ASIDE_DIR
    target_dir.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = target_dir / f"{stamp}-{path.name}"
    os.replace(path, target)
    logger.warning("resume checkpoint %s is not used and was set aside as %s: %s", path, target, reason)
    return target


def describe_difference(recorded: Mapping[str, Any], ours: RunIdentity) -> str:
    """What differs between a checkpoint's recorded identity and this run's, for the WARNING."""
    changes = []
    if recorded.get("symbol") != ours.symbol:
        changes.append(f"symbol: {recorded.get('symbol')!r} -> {ours.symbol!r}")
    changes += _parameter_changes(recorded.get("parameters"), ours.to_dict()["parameters"])
    shown = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "")
    return shown or "its recorded identity differs"


def _parameter_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``key: old -> new`` for every leaf that differs (what the user changed since that run)."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes = []
        for key in sorted(set(old) | set(new)):
            changes += _parameter_changes(old.get(key), new.get(key), f"{prefix}{key}.")
        return changes
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


class ResumeSlot:
    """This run's checkpoint file in ``work_dir``, held under a lock from ``open`` to ``close``."""

    def __init__(self, work_dir: Path, identity: RunIdentity, mode: str) -> None:
        if mode not in RESUME_MODES:
            raise ValueError(f"parameter 'training.resume' is {mode!r}; expected one of {list(RESUME_MODES)}")
        self.work_dir = work_dir
        self.identity = identity
        self.mode = mode
        self.path = work_dir / f"resume-{identity.phase}-{identity.key}{CHECKPOINT_SUFFIX}"
        self._lock = FileLock(_lock_path(self.path))
        self._held: list[FileLock] = []

    def open(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        sweep_orphan_locks(self.work_dir)
        if self._lock.acquire():
            return
        run_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        shared = self.path
        self.path = shared.with_name(f"{shared.stem}-run-{run_id}{CHECKPOINT_SUFFIX}")
        self._lock = FileLock(_lock_path(self.path))
        self._lock.acquire()
        logger.warning(
            "another run with the same parameters holds %s; this run keeps its own checkpoint %s and starts fresh",
            shared,
            self.path,
        )

    def close(self) -> None:
        for lock in (*self._held, self._lock):
            lock.release()
        self._held = []

    def discard(self) -> None:
        """Training completed: its checkpoint (and its lock file) have served their purpose."""
        self.path.unlink(missing_ok=True)
        self._lock.unlink_held()

    def save(self, model: BaseAlgorithm, run_state: Mapping[str, Any], best: Mapping[str, Any] | None) -> None:
        write_checkpoint(self.path, self.identity, model, run_state, best)

    def load(self, model: BaseAlgorithm, run_state_fields: set[str]) -> Checkpoint | None:
        """Restore ``model`` (weights, optimisers, counters, replay buffer) from this run's own
        checkpoint — or, with ``resume: force``, from the newest one of the same phase and symbol.
        Returns the checkpoint (its run state has exactly ``run_state_fields``) or ``None`` for a
        fresh start."""
        self._set_aside_legacy()
        if self.path.exists():
            return self._restore(model, self.path, run_state_fields)
        for path, identity in self._other_checkpoints():
            same_symbol = identity.get("symbol") == self.identity.symbol
            same_run = same_symbol and identity.get("config_hash") == self.identity.config_hash
            changes = describe_difference(identity, self.identity)
            if not same_run and (self.mode != "force" or not same_symbol):
                logger.warning(
                    "resume checkpoint %s belongs to another run (%s); not resuming it, it stays for a run "
                    "with those settings (training.resume: force continues one of the same symbol)",
                    path,
                    changes,
                )
                continue
            lock = FileLock(_lock_path(path))
            if not lock.acquire():
                continue
            self._held.append(lock)
            checkpoint = self._restore(model, path, run_state_fields, own=same_run)
            if checkpoint is None:
                continue
            if same_run:
                # Left by a concurrent run with the same settings that was killed: this run's own.
                os.replace(path, self.path)
                logger.info("continuing %s, left by an earlier run with the same settings", path)
            else:
                logger.warning(
                    "training.resume is force: continuing %s, written with other parameters (%s)", path, changes
                )
            return checkpoint
        return None

    def _restore(
        self, model: BaseAlgorithm, path: Path, run_state_fields: set[str], own: bool = True
    ) -> Checkpoint | None:
        """Everything checked before anything is applied; a rejected file of this run's settings
        (``own``) is set aside. One of other settings that ``resume: force`` cannot continue (another
        network size) stays where it is: its own run can still resume it."""
        try:
            checkpoint = read_checkpoint(path)
            self._check_identity(checkpoint)
            if set(checkpoint.run_state) != run_state_fields:
                raise CheckpointRejected(
                    f"{path}: run state fields {sorted(checkpoint.run_state)}, expected {sorted(run_state_fields)}"
                )
            _check_buffer(replay_buffer_of(model), checkpoint.buffer_arrays, checkpoint.buffer_position, str(path))
            if checkpoint.best is not None:
                check_snapshot(model, checkpoint.best, f"{path} (best model)")
            apply_snapshot(model, checkpoint.model, str(path))
        except CheckpointRejected as rejected:
            reason = str(rejected).removeprefix(f"{path}: ")
            if own:
                set_aside(path, reason)
            else:
                logger.warning(
                    "training.resume is force, but %s does not fit this run (%s); it belongs to a run with other "
                    "settings and stays in place for it. This run starts fresh",
                    path,
                    reason,
                )
            return None
        _restore_buffer(replay_buffer_of(model), checkpoint.buffer_arrays, checkpoint.buffer_position)
        return checkpoint

    def _check_identity(self, checkpoint: Checkpoint) -> None:
        identity = checkpoint.identity
        ours = self.identity
        found = (identity.get("phase"), identity.get("symbol"))
        if found != (ours.phase, ours.symbol):
            raise CheckpointRejected(
                f"{checkpoint.path}: belongs to (phase, symbol) {found}, not ({ours.phase!r}, {ours.symbol!r})"
            )
        if self.mode != "force" and identity.get("config_hash") != ours.config_hash:
            raise CheckpointRejected(
                f"{checkpoint.path}: its recorded parameters do not match its name or this run "
                f"({describe_difference(identity, ours)})"
            )

    def _other_checkpoints(self) -> list[tuple[Path, dict[str, Any]]]:
        """Checkpoints of this phase in ``work_dir`` that no live run holds, newest first, with their
        recorded identity (unreadable ones are set aside here). No lock is kept: a run with those
        parameters may still start and take its own file."""
        found = []
        pattern = f"resume-{self.identity.phase}-*{CHECKPOINT_SUFFIX}"
        for path in sorted(self.work_dir.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True):
            if path == self.path:
                continue
            lock = FileLock(_lock_path(path))
            if not lock.acquire():
                logger.info("resume checkpoint %s belongs to a run in progress; leaving it alone", path)
                continue
            try:
                with zipfile.ZipFile(path) as archive:
                    check_member_sizes(archive, str(path))
                    identity = json.loads(archive.read("identity.json"))
            except Exception as exc:  # any damage: the file cannot be attributed to a run
                set_aside(path, f"unreadable ({type(exc).__name__}: {exc})")
                continue
            finally:
                lock.release()
            found.append((path, identity if isinstance(identity, dict) else {}))
        return found

    def _set_aside_legacy(self) -> None:
        """Checkpoints of the old pickle format load by unpickling: never read, only moved away."""
        legacy = self.work_dir / "resume_checkpoint.pkl"
        if legacy.exists():
            set_aside(legacy, "old pickle format, which would execute code on loading; it is not read")
