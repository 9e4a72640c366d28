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
``replay_buffer.npz`` (read with ``np.load(allow_pickle=False)``) — no unpickling of code
(``resume_file``); what it takes from the model and checks before putting back: ``resume_state``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
import zipfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm

from trading_rl.archives import check_member_sizes
from trading_rl.file_lock import FileLock
from trading_rl.training.resume_file import Checkpoint, RunIdentity, read_checkpoint, write_checkpoint
from trading_rl.training.resume_state import (
    CheckpointRejected,
    _check_buffer,
    _restore_buffer,
    apply_snapshot,
    check_snapshot,
    replay_buffer_of,
)

logger = logging.getLogger(__name__)

RESUME_MODES = ("auto", "force")
CHECKPOINT_SUFFIX = ".ckpt"
SET_ASIDE_DIR = "set_aside"


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
