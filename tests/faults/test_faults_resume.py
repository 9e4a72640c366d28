"""Fault suite, resume checkpoints: a checkpoint is continued only by the run it belongs to.

Every case first leaves a checkpoint behind (a run interrupted at its second evaluation, step 60 of
90, with the checkpoint of step 30), then starts a run that must not take it — other parameters,
another symbol or seed, a damaged or hostile file, a run still holding it —
and checks the message names the file, the run starts fresh and the
files under the work dir are unchanged (or moved intact into ``set_aside/``).
"""

from __future__ import annotations

import copy
import io
import json
import logging
import zipfile
from pathlib import Path

import pytest
import torch as th
from helpers.hostile_files import hostile_pickle, tree_digest
from helpers.sac_icm_toy import ToyTradingEnv, toy_params

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.file_lock import FileLock
from trading_rl.training.loop import train_agent
from trading_rl.training.params import AgentParams
from trading_rl.training.resume import SET_ASIDE_DIR, _lock_path

TOTAL = 90
CHECKPOINT_STEP = 30


class Interrupted(RuntimeError):
    """Stands in for a killed process: training stops at the second evaluation."""


def _params(**changes) -> dict:
    params = toy_params(total_timesteps=TOTAL, eval_freq=CHECKPOINT_STEP, resume_every=CHECKPOINT_STEP)
    params["sac"]["learning_starts"] = 16  # the checkpoint at step 30 then holds optimiser moments
    for dotted, value in changes.items():
        if "." in dotted:
            section, key = dotted.split(".")
            params.setdefault(section, {})[key] = value
        else:
            params[dotted] = value
    return params


def _run(work_dir: Path, params: dict, seed: int = 0, symbol: str = "TOY", phase: str = "toy", interrupt: bool = False):
    model = build_agent(ToyTradingEnv(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=seed, device="cpu")

    def stop(_metrics, step):
        if interrupt and step > CHECKPOINT_STEP:
            raise Interrupted(step)

    return train_agent(
        model,
        ToyTradingEnv,
        AgentParams.from_mapping(params, "sac_icm.agent"),
        work_dir,
        metrics_callback=stop,
        periods_per_year=252.0,
        phase=phase,
        symbol=symbol,
    )


@pytest.fixture(scope="module")
def left_behind(tmp_path_factory) -> Path:
    """A work dir holding the checkpoint of an interrupted run (built once, copied per test)."""
    work_dir = tmp_path_factory.mktemp("interrupted")
    with pytest.raises(Interrupted):
        _run(work_dir, _params(), interrupt=True)
    return work_dir


@pytest.fixture
def work_dir(left_behind, tmp_path) -> Path:
    import shutil

    target = tmp_path / "resume"
    shutil.copytree(left_behind, target)
    return target


def _checkpoint(work_dir: Path) -> Path:
    (path,) = work_dir.glob("resume-*.ckpt")
    return path


def _warnings(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_the_same_run_resumes_its_own_checkpoint(work_dir):
    outcome = _run(work_dir, _params())
    assert outcome.resumed_from == CHECKPOINT_STEP
    assert outcome.model.num_timesteps == TOTAL
    assert not list(work_dir.glob("resume-*.ckpt")), "a completed run removes its checkpoint"


CHANGED_RUNS = {
    "learning_rate": dict(params=_params(**{"sac.learning_rate": 1e-2}), named="sac.learning_rate"),
    "net_size": dict(params={**_params(), "policy": {"net_arch": [16, 16], "activation": "relu"}}, named="net_arch"),
    "gamma": dict(params=_params(**{"sac.gamma": 0.9}), named="sac.gamma"),
    "icm_switched_off": dict(params=_params(**{"icm.enabled": False}), named="icm.enabled"),
    "reward_scale": dict(params=_params(reward_scale=10.0), named="reward_scale"),
    "seed": dict(params=_params(), seed=1, named="initial_weights"),
    "symbol": dict(params=_params(), symbol="OTHER", named="symbol: 'TOY' -> 'OTHER'"),
}


@pytest.mark.parametrize("case", CHANGED_RUNS.values(), ids=CHANGED_RUNS.keys())
def test_a_run_with_other_settings_starts_fresh_and_leaves_the_checkpoint(work_dir, case, caplog):
    checkpoint = _checkpoint(work_dir)
    before = tree_digest(work_dir)
    with caplog.at_level(logging.WARNING):
        outcome = _run(
            work_dir, copy.deepcopy(case["params"]), seed=case.get("seed", 0), symbol=case.get("symbol", "TOY")
        )
    assert outcome.resumed_from is None and outcome.model.num_timesteps == TOTAL
    message = _warnings(caplog)
    assert str(checkpoint) in message and case["named"] in message and "force" in message
    assert {k: v for k, v in tree_digest(work_dir).items() if k.startswith("resume-") and k.endswith(".ckpt")} == {
        k: v for k, v in before.items() if k.endswith(".ckpt")
    }, "the other run's checkpoint is kept byte for byte"


def test_a_rate_that_diverged_is_not_restored_from_the_checkpoint(work_dir):
    """Lowering the learning rate after a divergence must train at the new rate, not the saved one."""
    outcome = _run(work_dir, _params(**{"sac.learning_rate": 1e-5}))
    assert outcome.resumed_from is None
    assert outcome.model.actor.optimizer.param_groups[0]["lr"] == pytest.approx(1e-5)


def test_resume_force_continues_a_checkpoint_written_with_other_parameters(work_dir, caplog):
    checkpoint = _checkpoint(work_dir)
    with caplog.at_level(logging.WARNING):
        outcome = _run(work_dir, _params(**{"sac.learning_rate": 1e-2, "icm.lr": 5e-3, "training.resume": "force"}))
    assert outcome.resumed_from == CHECKPOINT_STEP and outcome.model.num_timesteps == TOTAL
    assert str(checkpoint) in _warnings(caplog) and "sac.learning_rate" in _warnings(caplog)
    # Continued at the run's own rates, not the checkpoint's.
    assert outcome.model.actor.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2)
    assert outcome.model.icm.optimizer.param_groups[0]["lr"] == pytest.approx(5e-3)


@pytest.mark.slow
def test_resume_force_with_another_network_size_leaves_the_checkpoint_to_its_owner(work_dir, caplog):
    """It was moved to set_aside/ before, and its owner could no longer resume it."""
    checkpoint = _checkpoint(work_dir)
    raw = checkpoint.read_bytes()
    params = {**_params(**{"training.resume": "force"}), "policy": {"net_arch": [16, 16], "activation": "relu"}}
    with caplog.at_level(logging.WARNING):
        outcome = _run(work_dir, params)
    assert outcome.resumed_from is None and outcome.model.num_timesteps == TOTAL
    message = _warnings(caplog)
    assert str(checkpoint) in message and "shape" in message and "stays in place" in message
    assert "starts fresh" in message
    assert checkpoint.read_bytes() == raw and not (work_dir / SET_ASIDE_DIR).exists()
    assert _run(work_dir, _params()).resumed_from == CHECKPOINT_STEP  # its owner still continues it


def test_an_unknown_resume_mode_is_refused_by_name(work_dir):
    before = tree_digest(work_dir)
    with pytest.raises(ValueError, match=r"training\.resume' must be one of \['auto', 'force'\], got 'always'"):
        _run(work_dir, _params(**{"training.resume": "always"}))
    assert tree_digest(work_dir) == before


def _rewrite_member(path: Path, member: str, payload: bytes) -> None:
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members[member] = payload
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _wrong_observation_size(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        tensors = th.load(io.BytesIO(archive.read("tensors.pt")), weights_only=True)
    for key, value in list(tensors["model"]["tensors"].items()):
        if value.ndim == 2 and value.shape[1] == 4:  # layers reading the 4-value observation
            tensors["model"]["tensors"][key] = th.zeros(value.shape[0], 7)
    buffer = io.BytesIO()
    th.save(tensors, buffer)
    _rewrite_member(path, "tensors.pt", buffer.getvalue())


def _other_symbol_inside(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        identity = json.loads(archive.read("identity.json"))
    _rewrite_member(path, "identity.json", json.dumps({**identity, "symbol": "OTHER"}).encode())


def _edit_state(path: Path, edit) -> None:
    with zipfile.ZipFile(path) as archive:
        state = json.loads(archive.read("state.json"))
    edit(state)
    _rewrite_member(path, "state.json", json.dumps(state).encode())


def _edit_tensors(path: Path, edit) -> None:
    with zipfile.ZipFile(path) as archive:
        tensors = th.load(io.BytesIO(archive.read("tensors.pt")), weights_only=True)
    edit(tensors)
    buffer = io.BytesIO()
    th.save(tensors, buffer)
    _rewrite_member(path, "tensors.pt", buffer.getvalue())


def _optimiser_moment_of_other_shape(tensors: dict) -> None:
    tensors["model"]["optimizers"]["actor.optimizer"]["state"][0]["exp_avg"] = th.zeros(3, 3)


def _best_model_of_other_shape(tensors: dict) -> None:
    tensors["best"]["tensors"]["policy/actor.mu.weight"] = th.zeros(1, 7)


DAMAGE = {
    "truncated": (lambda p, m: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "unreadable"),
    "garbage": (lambda p, m: p.write_bytes(b"\x00garbage" * 100), "unreadable"),
    "empty": (lambda p, m: p.write_bytes(b""), "unreadable"),
    "hostile_pickle_in_tensors": (lambda p, m: _rewrite_member(p, "tensors.pt", hostile_pickle(m)), "unreadable"),
    "hostile_pickle_as_file": (lambda p, m: p.write_bytes(hostile_pickle(m)), "unreadable"),
    "wrong_observation_size": (lambda p, m: _wrong_observation_size(p), "observation size"),
    "identity_of_another_symbol": (lambda p, m: _other_symbol_inside(p), "belongs to"),
    "state_not_json": (lambda p, m: _rewrite_member(p, "state.json", b"{not json"), "unreadable"),
    "run_state_field_missing": (lambda p, m: _edit_state(p, lambda s: s["run"].pop("best_score")), "run state fields"),
    "counter_not_an_integer": (
        lambda p, m: _edit_state(p, lambda s: s["counters"].update(num_timesteps="30")),
        "malformed",
    ),
    "optimiser_moment_of_other_shape": (
        lambda p, m: _edit_tensors(p, _optimiser_moment_of_other_shape),
        "optimiser 'actor.optimizer'",
    ),
    "best_model_of_other_shape": (lambda p, m: _edit_tensors(p, _best_model_of_other_shape), "(best model)"),
}


@pytest.mark.parametrize("damage,named", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_checkpoint_is_named_set_aside_and_the_run_starts_fresh(work_dir, marker, damage, named, caplog):
    checkpoint = _checkpoint(work_dir)
    damage(checkpoint, marker)
    damaged = checkpoint.read_bytes()
    with caplog.at_level(logging.WARNING):
        outcome = _run(work_dir, _params())
    assert outcome.resumed_from is None and outcome.model.num_timesteps == TOTAL
    message = _warnings(caplog)
    assert str(checkpoint) in message and named in message and SET_ASIDE_DIR in message
    (kept,) = (work_dir / SET_ASIDE_DIR).iterdir()
    assert kept.read_bytes() == damaged, "set aside intact, not deleted"
    assert not marker.exists(), "loading the checkpoint ran code from it"


def test_an_old_pickle_checkpoint_is_never_unpickled(work_dir, marker, caplog):
    legacy = work_dir / "resume_checkpoint.pkl"
    legacy.write_bytes(hostile_pickle(marker))
    with caplog.at_level(logging.WARNING):
        outcome = _run(work_dir, _params())
    assert not marker.exists()
    assert outcome.resumed_from == CHECKPOINT_STEP, "the run's own checkpoint is still used"
    assert str(legacy) in _warnings(caplog) and "pickle" in _warnings(caplog)
    (kept,) = (work_dir / SET_ASIDE_DIR).iterdir()
    assert kept.read_bytes() == hostile_pickle(marker)


def test_a_concurrent_run_with_the_same_settings_neither_takes_nor_deletes_the_checkpoint(work_dir, caplog):
    checkpoint = _checkpoint(work_dir)
    raw = checkpoint.read_bytes()
    other_run = FileLock(_lock_path(checkpoint))
    assert other_run.acquire()  # the first run is still training and holds its checkpoint
    try:
        with caplog.at_level(logging.WARNING):
            outcome = _run(work_dir, _params())
    finally:
        other_run.release()
    assert outcome.resumed_from is None
    assert checkpoint.read_bytes() == raw, "the first run's checkpoint is untouched"
    assert str(checkpoint) in _warnings(caplog) and "-run-" in _warnings(caplog)
    assert [p.name for p in work_dir.glob("resume-*.ckpt")] == [checkpoint.name], (
        "the second run cleaned up only its own"
    )


def test_a_concurrent_run_with_other_settings_leaves_a_held_damaged_checkpoint_alone(work_dir):
    """A file another live run holds is never moved, even when this run cannot read it."""
    checkpoint = _checkpoint(work_dir)
    checkpoint.write_bytes(b"being written")
    other_run = FileLock(_lock_path(checkpoint))
    assert other_run.acquire()
    try:
        outcome = _run(work_dir, _params(**{"sac.learning_rate": 1e-2}))
    finally:
        other_run.release()
    assert outcome.resumed_from is None
    assert checkpoint.read_bytes() == b"being written" and not (work_dir / SET_ASIDE_DIR).exists()


def test_two_phases_on_one_symbol_keep_separate_checkpoints(work_dir):
    checkpoint = _checkpoint(work_dir)
    raw = checkpoint.read_bytes()
    outcome = _run(work_dir, _params(), phase="other_phase")
    assert outcome.resumed_from is None
    assert checkpoint.read_bytes() == raw


def test_the_checkpoint_of_a_killed_concurrent_run_is_continued_by_the_next_run_with_its_settings(work_dir):
    checkpoint = _checkpoint(work_dir)
    orphan = checkpoint.with_name(f"{checkpoint.stem}-run-4242-deadbeef.ckpt")
    checkpoint.rename(orphan)
    outcome = _run(work_dir, _params())
    assert outcome.resumed_from == CHECKPOINT_STEP
    assert not list(work_dir.glob("resume-*.ckpt")), "adopted as the run's own and removed on completion"


def test_lock_files_do_not_accumulate_and_a_held_one_is_left_alone(work_dir):
    """Empty ``*.ckpt.lock`` files piled up, one per checkpoint ever written."""
    orphan = work_dir / "resume-toy-0123456789abcdef.ckpt.lock"
    orphan.touch()  # its checkpoint was set aside or completed long ago
    live = work_dir / "resume-toy-fedcba9876543210.ckpt.lock"
    holder = FileLock(live)
    assert holder.acquire()  # a live run of other settings, between writing its lock and its checkpoint
    try:
        assert _run(work_dir, _params()).resumed_from == CHECKPOINT_STEP
        assert sorted(p.name for p in work_dir.glob("*.lock")) == [live.name]
    finally:
        holder.release()


def test_a_lock_swept_between_open_and_flock_is_not_trusted(work_dir, monkeypatch):
    """The sweeper unlinks a lock file while holding it. A run that opened the old file just before
    locks that orphaned file once the sweeper lets go; it must notice and lock the path's new file,
    or it and the next run would both believe they hold the same checkpoint."""
    import fcntl

    path = work_dir / "resume-toy-aaaa.ckpt.lock"
    sweeper = FileLock(path)
    assert sweeper.acquire()
    real_flock, swept = fcntl.flock, []

    def sweep_then_flock(fd, operation):
        if not swept:
            swept.append(fd)
            sweeper.unlink_held()
            sweeper.release()
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", sweep_then_flock)
    runner = FileLock(path)
    assert runner.acquire()
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert path.exists() and not FileLock(path).acquire(), "the runner holds the file the path names"
    runner.release()
