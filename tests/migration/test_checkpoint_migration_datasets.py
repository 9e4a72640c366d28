"""Folder datasets: legacy zips read-only, versioned byte-identical backups, SB3 model folders."""

import hashlib
import io
import zipfile

import pytest
from kedro.io import DatasetError
from kedro.io.core import Version

from trading_rl.integration.datasets.migration import (
    LegacyCheckpointFolderDataset,
    RawBytesFolderDataset,
    SB3ModelFolderDataset,
)


def _versions(path):
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


def test_legacy_folder_reads_zip_bytes_and_refuses_writes(tmp_path):
    folder = tmp_path / "legacy"
    assert LegacyCheckpointFolderDataset(str(folder)).load() == {}  # absent
    folder.mkdir()
    assert LegacyCheckpointFolderDataset(str(folder)).load() == {}  # empty
    (folder / "sp500.zip").write_bytes(b"\x00zip-a")
    (folder / "NASDAQ.ZIP").write_bytes(b"zip-b")
    (folder / "notes.txt").write_text("ignored")
    dataset = LegacyCheckpointFolderDataset(str(folder))
    assert dataset.load() == {"NASDAQ.ZIP": b"zip-b", "sp500.zip": b"\x00zip-a"}
    with pytest.raises(DatasetError, match="never written"):
        dataset.save({"x.zip": b""})


def test_backups_are_byte_identical_new_versions(tmp_path):
    path = tmp_path / "backups"
    sources = {"a.zip": _zip(bytes(range(256)) * 10), "b.zip": _zip(b"tail")}  # checkpoints are zips
    RawBytesFolderDataset(str(path), version=Version(None, "2026-11-25T00.00.00.000Z")).save(sources)
    RawBytesFolderDataset(str(path), version=Version(None, "2026-11-25T00.00.01.000Z")).save({"c.zip": _zip(b"c")})
    assert _versions(path) == ["2026-11-25T00.00.00.000Z", "2026-11-25T00.00.01.000Z"]
    first = RawBytesFolderDataset(str(path), version=Version("2026-11-25T00.00.00.000Z", None)).load()
    assert {k: hashlib.sha256(v).hexdigest() for k, v in first.items()} == {
        k: hashlib.sha256(v).hexdigest() for k, v in sources.items()
    }
    assert RawBytesFolderDataset(str(path), version=Version(None, None)).load() == {"c.zip": _zip(b"c")}


def _zip(payload: bytes) -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(zipfile.ZipInfo("data", date_time=(2026, 1, 1, 0, 0, 0)), payload)
    return archive.getvalue()


def test_failed_serialisation_writes_no_version(tmp_path):
    path = tmp_path / "backups"
    dataset = RawBytesFolderDataset(str(path), version=Version(None, "2026-11-25T00.00.00.000Z"))
    with pytest.raises(DatasetError, match="could not be serialised"):
        dataset.save({"a.zip": b"ok", "b.zip": "not bytes"})
    with pytest.raises(DatasetError, match="not a plain file name"):
        dataset.save({"../escape.zip": b"x"})
    assert not path.exists()


def test_sb3_model_folder_round_trip(tmp_path, make_checkpoint):
    from stable_baselines3 import PPO

    model, _ = make_checkpoint("PPO", 4, (3,))
    path = tmp_path / "models"
    SB3ModelFolderDataset(
        str(path), model_class="stable_baselines3.PPO", device="cpu", version=Version(None, "2026-11-25T00.00.00.000Z")
    ).save({"sp500.zip": model})
    loaded = SB3ModelFolderDataset(
        str(path), model_class="stable_baselines3.PPO", device="cpu", version=Version(None, None)
    ).load()
    assert list(loaded) == ["sp500.zip"] and isinstance(loaded["sp500.zip"], PPO)
    for key, value in model.policy.state_dict().items():
        assert (loaded["sp500.zip"].policy.state_dict()[key] == value).all()


def test_sb3_model_folder_refuses_a_model_class_that_is_no_sb3_algorithm(tmp_path, make_checkpoint):
    model, _ = make_checkpoint("PPO", 4, (3,))
    path = tmp_path / "models"
    SB3ModelFolderDataset(
        str(path), model_class="stable_baselines3.PPO", device="cpu", version=Version(None, "2026-11-25T00.00.00.000Z")
    ).save({"sp500.zip": model})
    for model_class, problem in (
        ("collections.OrderedDict", "is not a stable_baselines3 algorithm"),
        ("os.path.join", "is not a class"),
    ):
        dataset = SB3ModelFolderDataset(str(path), model_class=model_class, device="cpu", version=Version(None, None))
        with pytest.raises(DatasetError, match=f"'{model_class}' {problem}"):
            dataset.load()
