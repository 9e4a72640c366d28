"""Fault suite, hardened formats: zip members that would inflate past memory, an env spec whose frames
disagree with its feature columns, model zips rewritten together with their manifest, and trial ledger
files that are empty, garbage or hold text where numbers belong are refused naming the file (and the
member, frame, column), never a bare ``<Buffer>``/``BytesIO``, ``MemoryError`` or SB3 shape error."""

from __future__ import annotations

import io
import os
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.sac_icm_toy import toy_agent
from helpers.synthetic_prices import tiny_env_spec
from kedro.io import DatasetError
from kedro.io.core import Version

from trading_rl.archives import ArchiveTooLargeError, check_member_sizes
from trading_rl.evaluation.ledger import ledger
from trading_rl.evaluation.metrics.metrics import return_moments
from trading_rl.integration.datasets import SB3ModelDataset, TrialLedgerDataset
from trading_rl.integration.datasets.bytes_dataset import sha256_line
from trading_rl.integration.datasets.env_spec import EnvSpecDataset
from trading_rl.training.resume_file import read_checkpoint
from trading_rl.training.resume_state import CheckpointRejected

DECLARED = 12 * 1024**3  # the review's member: 12 GB once inflated


@pytest.fixture(scope="module")
def spec():
    return tiny_env_spec()


def declare_size(raw: bytes, member: str, size: int) -> bytes:
    """``raw`` with ``member``'s declared uncompressed size set to ``size`` in the central directory
    (as zip64 when it does not fit 32 bits): what a hostile archive would declare."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        names = archive.namelist()
    rebuilt = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as target:
        for name in names:
            target.writestr(name, source.read(name))
    data = bytearray(rebuilt.getvalue())
    encoded = member.encode()
    position = data.find(b"PK\x01\x02")
    while position != -1:
        name_length, extra_length = struct.unpack_from("<HH", data, position + 28)
        if bytes(data[position + 46 : position + 46 + name_length]) == encoded:
            break
        position = data.find(b"PK\x01\x02", position + 46 + name_length + extra_length)
    assert position != -1, member
    if size < 0xFFFFFFFF:
        struct.pack_into("<I", data, position + 24, size)
        return bytes(data)
    # zip64: the 32-bit field says "see the extra field", which carries the real size
    struct.pack_into("<I", data, position + 24, 0xFFFFFFFF)
    name_length, extra_length, comment_length = struct.unpack_from("<HHH", data, position + 28)
    extra_at = position + 46 + name_length
    zip64 = struct.pack("<HHQ", 0x0001, 8, size)
    data[extra_at:extra_at] = zip64
    struct.pack_into("<H", data, position + 30, extra_length + len(zip64))
    end = data.rfind(b"PK\x05\x06")
    directory_size, directory_offset = struct.unpack_from("<II", data, end + 12)
    struct.pack_into("<I", data, end + 12, directory_size + len(zip64))
    return bytes(data)


def _save_version(folder: Path, name: str, raw: bytes, version: str = "2026-01-01T00.00.00.000Z") -> Path:
    path = folder / name / version / name
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    return path


def test_a_member_declaring_12_gb_is_refused_before_reading(spec, tmp_path):
    raw = declare_size(spec.to_bytes(), "features/train.parquet", DECLARED)
    path = _save_version(tmp_path, "env_spec.zip", raw)
    with pytest.raises(DatasetError) as raised:
        EnvSpecDataset(str(tmp_path / "env_spec.zip"), version=Version(None, None)).load()
    message = str(raised.value)
    for expected in (
        str(path),
        "'features/train.parquet'",
        f"{DECLARED:,} bytes",
        "Nothing of it was read",
        "Fix: restore the file, or rerun the phase that writes it",
    ):
        assert expected in message, (expected, message)


def test_the_total_limit_and_the_ratio_limit():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("a", os.urandom(1000))
        zipped.writestr("random", os.urandom(2 << 20))
        zipped.writestr("zeros", b"\0" * (8 << 20))  # 8 MiB of zeros deflate over 1000:1
    with zipfile.ZipFile(archive) as zipped:
        with pytest.raises(ArchiveTooLargeError, match=r"x: zip member 'random'.*over the 1,000 bytes"):
            check_member_sizes(zipped, "x", limit=1000)
        with pytest.raises(ArchiveTooLargeError, match=r"x: zip member 'zeros'.*compresses \d+:1 \(over 1000:1\)"):
            check_member_sizes(zipped, "x", limit=1 << 30)


def test_a_checkpoint_member_declaring_12_gb_is_rejected_unread(tmp_path):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("identity.json", "state.json", "tensors.pt", "replay_buffer.npz"):
            zipped.writestr(name, b"{}")
    path = tmp_path / "resume-toy-0.ckpt"
    path.write_bytes(declare_size(archive.getvalue(), "replay_buffer.npz", DECLARED))
    with pytest.raises(CheckpointRejected, match=r"ArchiveTooLargeError.*'replay_buffer.npz' declares 12,884,901,888"):
        read_checkpoint(path)


@pytest.fixture(scope="module")
def model_zip() -> bytes:
    model, _ = toy_agent(total_timesteps=10)
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def _model_version(tmp_path: Path, raw: bytes) -> Path:
    path = _save_version(tmp_path, "model.zip", raw)
    Path(f"{path}.sha256").write_text(sha256_line(raw, path.name))  # both rewritten together
    return path


@pytest.mark.parametrize(
    ("rewrite", "named"),
    [
        (lambda raw: b"not a zip at all" * 10, "not a zip archive"),
        (lambda raw: declare_size(raw, "data", DECLARED), "zip member 'data' declares 12,884,901,888 bytes"),
    ],
    ids=["garbage", "member_of_12_gb"],
)
def test_a_model_zip_rewritten_with_its_manifest_is_named_by_path(model_zip, tmp_path, rewrite, named):
    path = _model_version(tmp_path, rewrite(model_zip))
    dataset = SB3ModelDataset(
        str(tmp_path / "model.zip"),
        "trading_rl.algorithms.sac_icm.sac_icm.SACWithICM",
        device="cpu",
        version=Version(None, None),
    )
    with pytest.raises(DatasetError) as raised:
        dataset.load()
    message = str(raised.value)
    assert str(path) in message and named in message and "Fix: restore the file" in message, message
    assert "BytesIO object" not in message


def test_an_env_spec_frame_without_one_feature_column_is_named(spec, tmp_path):
    """SB3 failed with "Unexpected observation shape (265,) ... (255,)" instead."""
    frames = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(spec.to_bytes())) as source, zipfile.ZipFile(frames, "w") as target:
        for name in source.namelist():
            content = source.read(name)
            if name == "features/validation.parquet":
                content = pd.read_parquet(io.BytesIO(content)).drop(columns="b").to_parquet()
            target.writestr(name, content)
    path = _save_version(tmp_path, "env_spec.zip", frames.getvalue())
    with pytest.raises(DatasetError) as raised:
        EnvSpecDataset(str(tmp_path / "env_spec.zip"), version=Version(None, None)).load()
    message = str(raised.value)
    for expected in (str(path), "frame 'features/validation'", "missing ['b']", "--pipelines env_construction"):
        assert expected in message, (expected, message)


# ---------- the trial ledger ----------


def _row() -> pd.DataFrame:
    return ledger.trial_row(
        source="walk_forward",
        symbol="X",
        split="walk_forward",
        period_start="2020-01-01",
        period_end="2020-03-01",
        agent="sac_icm",
        configuration={"agent": "sac_icm"},
        moments=return_moments(np.random.default_rng(0).normal(0.001, 0.01, 50)),
        n_runs=3,
        periods_per_year=252.0,
        run={"save_version": "v1", "git_commit": "abc"},
    )


def _high_sharpe(path: Path) -> None:
    frame = pd.read_parquet(path)
    frame["sharpe"] = "high"
    frame.to_parquet(path)


LEDGER_CASES = {
    "zero_bytes": (lambda path: path.write_bytes(b""), "is empty (0 bytes)"),
    "garbage": (lambda path: path.write_bytes(b"garbage" * 20), "is not a readable parquet table"),
    "sharpe_high": (_high_sharpe, "column 'sharpe' holds 'high' at row 0, not a number"),
}


@pytest.mark.parametrize("case", sorted(LEDGER_CASES))
def test_a_broken_ledger_file_is_named_with_the_fix(tmp_path, case):
    damage, named = LEDGER_CASES[case]
    folder = tmp_path / "trial_ledger"
    dataset = TrialLedgerDataset(str(folder))
    dataset.save(pd.DataFrame([_row()]))
    dataset.save(pd.DataFrame([_row()]))
    broken = sorted(folder.glob("*.parquet"))[-1]
    damage(broken)
    with pytest.raises(DatasetError) as raised:
        TrialLedgerDataset(str(folder), read_only=True).load()
    message = str(raised.value)
    for expected in (f"trial ledger file {broken}", named, f"mv {broken} {broken}.unreadable"):
        assert expected in message, (expected, message)
    assert "<Buffer>" not in message.split("(")[0]
    os.rename(broken, f"{broken}.unreadable")  # the documented fix: the other file's row is read again
    assert len(TrialLedgerDataset(str(folder), read_only=True).load()) == 1


def test_staging_files_of_killed_appends_are_swept_once_stale(tmp_path):
    folder = tmp_path / "trial_ledger"
    dataset = TrialLedgerDataset(str(folder))
    dataset.save(pd.DataFrame([_row()]))
    stale = folder / ".20260101T000000000000Z-deadbeef.parquet.0123abcd.tmp"
    fresh = folder / ".20260101T000000000001Z-deadbeef.parquet.4567ef01.tmp"  # an append in progress
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    hour_ago = time.time() - 2 * ledger.STALE_STAGING_S
    os.utime(stale, (hour_ago, hour_ago))
    dataset.save(pd.DataFrame([_row()]))
    assert not stale.exists() and fresh.exists()
    assert len(dataset.load()) == 2
