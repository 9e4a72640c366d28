"""Fault suite, files under data/ that would run code: hostile pickles are refused, never executed,
and a model zip that changed since it was saved is named and not loaded. Also: an MLflow run whose
process was SIGKILLed does not stay RUNNING."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import yaml
from helpers.hostile_files import hostile_pickle, tree_digest
from helpers.mlflow_store import empty_store
from helpers.sac_icm_toy import ToyTradingEnv, toy_params
from kedro.io import DataCatalog, DatasetError
from stable_baselines3 import PPO, SAC

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.training.params import AgentParams

PROJECT = Path(__file__).resolve().parents[2]


def _catalog_entry(catalog_file: str, name: str, filepath: Path) -> dict:
    config = yaml.safe_load((PROJECT / "conf" / "base" / catalog_file).read_text())[name]
    return {**config, "filepath": str(filepath)}


ENV_SPEC_ENTRIES = {
    "env_spec": ("catalog.yml", "env_spec"),
    "multi_symbol_env_spec": ("catalog_multi_symbol.yml", "{symbol}.env_spec"),
}


@pytest.mark.parametrize("catalog_file,name", ENV_SPEC_ENTRIES.values(), ids=ENV_SPEC_ENTRIES.keys())
def test_a_hostile_env_spec_is_refused_without_running_it(tmp_path, marker, catalog_file, name):
    data = tmp_path / "data"
    path = data / "env_spec" / "2026-01-01T00.00.00.000Z" / "env_spec"
    path.parent.mkdir(parents=True)
    path.write_bytes(hostile_pickle(marker))
    before = tree_digest(data)
    catalog = DataCatalog.from_config({"env_spec": _catalog_entry(catalog_file, name, data / "env_spec")})
    with pytest.raises(DatasetError, match=r"env_spec.*not an env spec archive.*env_construction"):
        catalog.load("env_spec")
    assert not marker.exists()
    assert tree_digest(data) == before


@pytest.fixture(scope="module")
def sac_model():
    return build_agent(
        ToyTradingEnv(), AgentParams.from_mapping(toy_params(icm=False), "sac_icm.agent"), seed=0, device="cpu"
    )


def _model_dataset(tmp_path: Path, dataset_type: str = "trading_rl.integration.datasets.SB3ModelDataset"):
    entry = {
        "type": dataset_type,
        "filepath": str(tmp_path / "data" / "model.zip"),
        "model_class": "stable_baselines3.SAC",
        "device": "cpu",
        "versioned": True,
    }
    return DataCatalog.from_config({"model": entry})


def _hostile_sb3_zip(raw: bytes, marker: Path) -> bytes:
    """``raw`` with a cloudpickled entry of ``data`` replaced: ``SAC.load`` would run it."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    data["lr_schedule"] = {
        ":type:": "<class 'function'>",
        ":serialized:": base64.b64encode(hostile_pickle(marker)).decode(),
    }
    members["data"] = json.dumps(data).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, member in members.items():
            archive.writestr(name, member)
    return out.getvalue()


def _saved_file(tmp_path: Path) -> Path:
    (path,) = (tmp_path / "data" / "model.zip").glob("*/model.zip")
    return path


TAMPERING = {
    "hostile_pickle_in_zip": lambda path, marker: path.write_bytes(_hostile_sb3_zip(path.read_bytes(), marker)),
    "one_byte_flipped": lambda path, marker: path.write_bytes(
        path.read_bytes()[:-1] + bytes([path.read_bytes()[-1] ^ 1])
    ),
    "manifest_removed": lambda path, marker: (
        path.with_name(path.name + ".sha256").unlink(),
        path.write_bytes(_hostile_sb3_zip(path.read_bytes(), marker)),
    ),
    "manifest_rewritten_for_another_file": lambda path, marker: path.with_name(path.name + ".sha256").write_text(
        "0" * 64 + "  model.zip\n"
    ),
}


@pytest.mark.parametrize("tamper", TAMPERING.values(), ids=TAMPERING.keys())
def test_a_model_zip_changed_after_saving_is_named_and_not_loaded(tmp_path, marker, sac_model, tamper):
    catalog = _model_dataset(tmp_path)
    catalog.save("model", sac_model)
    path = _saved_file(tmp_path)
    tamper(path, marker)
    before = tree_digest(tmp_path / "data")
    with pytest.raises(DatasetError, match=re.escape(str(path)) + r".*(hash manifest|sha256)"):
        catalog.load("model")
    assert not marker.exists()
    assert tree_digest(tmp_path / "data") == before


def test_a_saved_model_zip_round_trips_with_its_manifest(tmp_path, sac_model):
    catalog = _model_dataset(tmp_path)
    catalog.save("model", sac_model)
    path = _saved_file(tmp_path)
    assert path.with_name("model.zip.sha256").read_text().endswith("  model.zip\n")
    assert isinstance(catalog.load("model"), SAC)


def _folder_catalog(tmp_path: Path) -> DataCatalog:
    entry = {
        "type": "trading_rl.integration.datasets.migration.SB3ModelFolderDataset",
        "filepath": str(tmp_path / "data" / "models"),
        "model_class": "stable_baselines3.SAC",
        "device": "cpu",
        "versioned": True,
    }
    return DataCatalog.from_config({"models": entry})


def _saved_without_manifest(tmp_path: Path, sac_model, folder: bool) -> tuple[DataCatalog, str, Path]:
    """A model saved before manifests existed: the catalog, its dataset name and the trust target."""
    if folder:
        catalog = _folder_catalog(tmp_path)
        catalog.save("models", {"sp500.zip": sac_model})
        (version,) = (tmp_path / "data" / "models").glob("*/models")
        (version / ".sha256sums").unlink()
        return catalog, "models", version
    catalog = _model_dataset(tmp_path)
    catalog.save("model", sac_model)
    path = _saved_file(tmp_path)
    path.with_name("model.zip.sha256").unlink()
    return catalog, "model", path


@pytest.mark.slow
@pytest.mark.parametrize("folder", [False, True], ids=["model_file", "model_folder"])
def test_a_trusted_older_model_loads_after_its_manifest_is_written(tmp_path, sac_model, folder):
    catalog, name, target = _saved_without_manifest(tmp_path, sac_model, folder)
    with pytest.raises(
        DatasetError,
        match=r"no hash manifest.*python -m trading_rl\.integration\.datasets\.bytes_dataset " + re.escape(str(target)),
    ):
        catalog.load(name)
    subprocess.run(
        [sys.executable, "-m", "trading_rl.integration.datasets.bytes_dataset", str(target)],
        check=True,
        capture_output=True,
    )
    loaded = catalog.load(name)
    assert isinstance(loaded["sp500.zip"] if folder else loaded, SAC)


def test_a_hostile_zip_in_a_model_folder_is_not_loaded(tmp_path, marker, sac_model):
    catalog = _folder_catalog(tmp_path)
    catalog.save("models", {"sp500.zip": sac_model})
    (path,) = (tmp_path / "data" / "models").glob("*/models/sp500.zip")
    path.write_bytes(_hostile_sb3_zip(path.read_bytes(), marker))
    with pytest.raises(DatasetError, match=re.escape(str(path)) + r".*hash manifest"):
        catalog.load("models")
    assert not marker.exists()


def _hierarchical_zip(sac_model, controller: bytes) -> bytes:
    sac = io.BytesIO()
    sac_model.save(sac)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("low_level_sac.zip", sac.getvalue())
        archive.writestr("settings.json", json.dumps({"option_params": {}, "her": None, "env_overrides": {}}))
        archive.writestr("controller.pt", controller)
    return out.getvalue()


def test_a_hostile_controller_is_refused_by_the_weights_only_loader(marker, sac_model):
    from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent

    with pytest.raises(Exception, match=r"(?i)weights_only|unpickl"):
        HierarchicalAgent.from_bytes(_hierarchical_zip(sac_model, hostile_pickle(marker)))
    assert not marker.exists()


def test_a_hierarchical_agent_file_changed_after_saving_is_not_loaded(tmp_path, marker, sac_model):
    entry = {
        "type": "trading_rl.integration.datasets.hierarchical.HierarchicalAgentDataset",
        "filepath": str(tmp_path / "data" / "agent.zip"),
        "device": "cpu",
        "versioned": True,
    }
    path = tmp_path / "data" / "agent.zip" / "2026-01-01T00.00.00.000Z" / "agent.zip"
    path.parent.mkdir(parents=True)
    path.write_bytes(_hierarchical_zip(sac_model, hostile_pickle(marker)))
    with pytest.raises(DatasetError, match=re.escape(str(path)) + r".*no hash manifest"):
        DataCatalog.from_config({"agent": entry}).load("agent")
    assert not marker.exists()


class _DiscreteEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    action_space = gym.spaces.Discrete(7)


def _legacy_zip() -> bytes:
    from trading_rl.migration import sb3_zip_bytes

    return sb3_zip_bytes(PPO("MlpPolicy", _DiscreteEnv(), policy_kwargs={"net_arch": [8]}, seed=0, device="cpu"))


def _discrete_catalog(tmp_path: Path) -> DataCatalog:
    entry = _catalog_entry("catalog_checkpoint_migration.yml", "discrete_checkpoints", tmp_path / "data" / "discrete")
    return DataCatalog.from_config({"discrete_checkpoints": entry})


def test_a_legacy_zip_that_passes_inspection_is_stored_as_extracted_data(tmp_path):
    from trading_rl.migration.params import CheckpointMigrationParams
    from trading_rl.phases.checkpoint_migration import provide_discrete_checkpoints

    base = yaml.safe_load((PROJECT / "conf" / "base" / "parameters_checkpoint_migration.yml").read_text())
    params = CheckpointMigrationParams.from_mapping(base["checkpoint_migration"], "checkpoint_migration")
    spec = SimpleNamespace(layout=SimpleNamespace(dim=5), symbol="sp500")
    checkpoints = provide_discrete_checkpoints({"sp500.zip": _legacy_zip()}, spec, params, seed=0)
    catalog = _discrete_catalog(tmp_path)
    catalog.save("discrete_checkpoints", checkpoints)
    stored = [p for p in (tmp_path / "data" / "discrete").rglob("*") if p.is_file()]
    assert [p.name for p in stored] == ["sp500.zip.pt"]
    assert "data" not in zipfile.ZipFile(stored[0]).namelist(), "not an SB3 zip that PPO.load would unpickle"
    loaded = catalog.load("discrete_checkpoints")["sp500.zip"]
    assert loaded.hidden_sizes == (8,) and loaded.sha256 == checkpoints["sp500.zip"].sha256


def test_a_hostile_extracted_checkpoint_is_refused_without_running_it(tmp_path, marker):
    folder = tmp_path / "data" / "discrete" / "2026-01-01T00.00.00.000Z" / "discrete"
    folder.mkdir(parents=True)
    (folder / "sp500.zip.pt").write_bytes(hostile_pickle(marker))
    with pytest.raises(DatasetError, match=r"discrete.*more than plain data"):
        _discrete_catalog(tmp_path).load("discrete_checkpoints")
    assert not marker.exists()


def test_no_unguarded_unpickling_remains_in_src_or_conf():
    pattern = re.compile(r"pickle\.load|weights_only=False|PickleDataset")
    hits = [
        f"{path.relative_to(PROJECT)}:{number}"
        for folder in ("src", "conf")
        for path in (PROJECT / folder).rglob("*")
        if path.suffix in (".py", ".yml", ".yaml")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


@pytest.mark.slow
def test_a_sigkilled_run_is_marked_killed_on_the_next_start(tmp_path):
    """A run whose process was SIGKILLed stays RUNNING in MLflow until the next start ends it."""
    import mlflow

    from trading_rl.integration.hooks import MlflowRunHygieneHooks
    from trading_rl.monitoring.stale_runs import HOST_TAG, PID_TAG, process_tags

    uri = empty_store(tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.set_experiment("trading_rl").experiment_id
    client = mlflow.MlflowClient(uri)
    training = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    killed_run = client.create_run(
        experiment, tags={HOST_TAG: process_tags()[HOST_TAG], PID_TAG: str(training.pid)}
    ).info.run_id
    training.send_signal(signal.SIGKILL)
    training.wait(timeout=30)
    assert client.get_run(killed_run).info.status == "RUNNING"

    with mlflow.start_run() as current:
        MlflowRunHygieneHooks().before_pipeline_run()
        live_tags = client.get_run(current.info.run_id).data.tags
    assert client.get_run(killed_run).info.status == "KILLED"
    assert f"process {training.pid}" in client.get_run(killed_run).data.tags["trading_rl.ended_by"]
    assert live_tags[PID_TAG] == str(os.getpid())
