"""A SAC+ICM zip saved before its classes moved (``trading_rl.agents`` -> ``algorithms`` /
``training``, ``evaluation.regimes`` -> ``evaluation.validation.regimes``) still loads."""

from __future__ import annotations

import base64
import importlib
import io
import json
import sys
import types
import zipfile

import cloudpickle
import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config

from trading_rl.algorithms.sac_icm.auxiliary import AuxiliaryReplayBuffer, MarketEncoder
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM, build_agent
from trading_rl.algorithms.saved import sb3_zip_bytes
from trading_rl.envs import build_env_spec
from trading_rl.evaluation.validation.regimes import RegimeParams
from trading_rl.training.moved_classes import MOVED_MODULES
from trading_rl.training.params import AgentParams, AuxiliaryConfig, ICMConfig

SPLITS = {
    "train": {"start": "2004-01-01", "end": "2006-12-31"},
    "validation": {"start": "2007-01-01", "end": "2007-12-31"},
}
# Where each class a SAC+ICM zip names was defined before the move.
OLD_MODULES = {
    ICMConfig: "trading_rl.agents.icm",
    AuxiliaryConfig: "trading_rl.agents.auxiliary",
    MarketEncoder: "trading_rl.agents.auxiliary",
    AuxiliaryReplayBuffer: "trading_rl.agents.auxiliary",
    RegimeParams: "trading_rl.evaluation.regimes",
}


@pytest.fixture(scope="module")
def model():
    prices = sp500.load().loc["2003-01-01":"2007-12-31"].rename(columns=str.lower)
    log_close = np.log(prices["close"])
    features = pd.DataFrame({"r1": log_close.diff(), "r5": log_close.diff(5)}, index=prices.index)
    spec = build_env_spec("sp500", prices, features, SPLITS, seeds_env_config(episode_length=100), 252.0)
    params = AgentParams.from_mapping(
        {
            "sac": {"learning_starts": 64, "batch_size": 32, "buffer_size": 2000},
            "policy": {"net_arch": [32, 32]},
            "auxiliary": {"enabled": True, "latent_dim": 16, "hidden_dim": 32},
            "icm": {"enabled": True},
        },
        "sac_icm.agent",
    )
    return build_agent(spec.make_env("train"), params, seed=0, device="cpu")


def saved_before_the_move(model, monkeypatch) -> bytes:
    """The zip of ``model`` with every moved class named by its old module path: while it is saved,
    the classes carry their old ``__module__`` and the old modules exist, as when such files were
    written."""
    with monkeypatch.context() as patch:
        old_modules = {old: types.ModuleType(old) for old in set(OLD_MODULES.values())}
        for cls, old in OLD_MODULES.items():
            setattr(old_modules[old], cls.__name__, cls)
            patch.setattr(cls, "__module__", old)
        for old, module in old_modules.items():
            patch.setitem(sys.modules, old, module)
        return sb3_zip_bytes(model)


def pickled_entries(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        data = json.loads(archive.read("data"))
    return {
        key: base64.b64decode(item[":serialized:"])
        for key, item in data.items()
        if isinstance(item, dict) and ":serialized:" in item
    }


def test_a_zip_that_names_the_old_module_paths_loads(model, monkeypatch):
    raw = saved_before_the_move(model, monkeypatch)
    entries = pickled_entries(raw)
    assert b"trading_rl.agents.icm" in entries["icm_config"]
    assert b"trading_rl.evaluation.regimes" in entries["auxiliary_config"]
    assert b"trading_rl.agents.auxiliary" in entries["policy_kwargs"]
    assert b"trading_rl.agents.auxiliary" in entries["replay_buffer_class"]
    with pytest.raises(ModuleNotFoundError, match="trading_rl.agents"):
        cloudpickle.loads(entries["icm_config"])  # what SB3's own load would do with it

    loaded = SACWithICM.load(io.BytesIO(raw), device="cpu")

    assert loaded.icm_config == model.icm_config and type(loaded.icm_config) is ICMConfig
    assert loaded.auxiliary_config == model.auxiliary_config
    assert type(loaded.auxiliary_config.regimes) is RegimeParams
    assert loaded.policy_kwargs["features_extractor_class"] is MarketEncoder
    assert loaded.replay_buffer_class is AuxiliaryReplayBuffer
    observations = model.get_env().reset()
    np.testing.assert_array_equal(
        loaded.predict(observations, deterministic=True)[0], model.predict(observations, deterministic=True)[0]
    )


def test_a_zip_saved_today_loads_as_sb3_reads_it(model):
    raw = sb3_zip_bytes(model)
    assert not any(b"trading_rl.agents" in entry for entry in pickled_entries(raw).values())
    loaded = SACWithICM.load(io.BytesIO(raw), device="cpu")
    assert loaded.icm_config == model.icm_config and loaded.auxiliary_config == model.auxiliary_config


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_every_moved_module_has_a_place_now(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    for new in MOVED_MODULES[old]:
        importlib.import_module(new)
