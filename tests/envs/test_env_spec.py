"""EnvSpec construction, pickling, split coverage and the env check report."""

import dataclasses
import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config

from trading_rl.envs import (
    ContinuousTradingEnv,
    DiscreteTradingEnv,
    EnvConfig,
    EnvSpec,
    HybridTradingEnv,
    build_env_spec,
    env_check_report,
)
from trading_rl.envs.compatibility import model_signature
from trading_rl.provenance import config_hash

SPLITS = {
    "train": {"start": "2010-01-01", "end": "2014-12-31", "n_bars": 0},
    "validation": {"start": "2015-01-01", "end": "2016-06-30"},
    "test": {"start": "2016-07-01", "end": "2018-12-31"},
    "gap_bars": 0,
}


@pytest.fixture(scope="module")
def market():
    raw = sp500.load()
    prices = raw.loc["2009-06-01":].rename(columns=str.lower)
    prices = prices.rename(columns={"adj close": "adj_close"})
    log_close = np.log(prices["close"])
    features = pd.DataFrame(
        {"ret_1": log_close.diff(), "ret_20": log_close.diff(20), "vol_20": log_close.diff().rolling(20).std()},
        index=prices.index,
    )
    scaled = (features - features.mean()) / features.std()  # NaN warm-up rows stay in
    return prices, scaled


@pytest.fixture(scope="module")
def spec(market):
    prices, scaled = market
    return build_env_spec("sp500", prices, scaled, SPLITS, seeds_env_config(episode_length=100), 252.0)


def test_each_split_starts_trading_on_its_first_bar(spec, market):
    prices, _ = market
    assert spec.feature_columns == ["ret_1", "ret_20", "vol_20"]
    assert spec.config.periods_per_year == 252.0 and spec.config.episode_length == 100
    assert list(spec.prices["train"].columns) == ["open", "high", "low", "close", "volume"]
    for name in ("train", "validation", "test"):
        frame = spec.prices[name]
        assert frame.index.equals(spec.features[name].index)
        assert not spec.features[name].isna().any().any()
        in_split = prices.loc[SPLITS[name]["start"] : SPLITS[name]["end"]].index
        assert frame.index[-1] == in_split[-1]
        assert frame.index[9] == in_split[0]  # window_size - 1 = 9 context rows before the start
        assert frame.index[0] < pd.Timestamp(SPLITS[name]["start"])
        env = spec.make_env(name, evaluation=True)
        _, info = env.reset()
        assert info["timestamp"] == in_split[0]


def test_warm_up_rows_are_dropped_and_short_splits_are_named(market):
    prices, scaled = market
    early = {"train": {"start": "2009-06-01", "end": "2009-07-31"}, "test": SPLITS["test"]}
    spec = build_env_spec("sp500", prices, scaled, early, seeds_env_config(), 252.0)
    first_finite = scaled.dropna().index[0]
    assert spec.features["train"].index[0] == first_finite  # no context exists before the data
    too_short = {"train": {"start": "2009-06-01", "end": "2009-07-08"}, "test": SPLITS["test"]}
    with pytest.raises(ValueError, match="split 'train'"):
        build_env_spec("sp500", prices, scaled, too_short, seeds_env_config(), 252.0)
    holed = scaled.copy()
    holed.iloc[300, 0] = np.nan
    with pytest.raises(ValueError, match="ret_1"):
        build_env_spec("sp500", prices, holed, SPLITS, seeds_env_config(), 252.0)
    with pytest.raises(ValueError, match="smoothing"):
        build_env_spec("sp500", prices, scaled, SPLITS, EnvConfig.from_mapping({"smoothing": 3}), 252.0)


def test_make_env_kinds_defaults_and_overrides(spec):
    assert isinstance(spec.make_env(), ContinuousTradingEnv)
    assert isinstance(spec.make_env("test", kind="discrete"), DiscreteTradingEnv)
    assert isinstance(spec.make_env("test", kind="hybrid"), HybridTradingEnv)
    assert spec.make_env("train").config.evaluation is False
    assert spec.make_env("validation").config.evaluation is True
    assert spec.make_env("validation", evaluation=False).config.evaluation is False
    assert spec.make_env("train", allow_short=True).config.allow_short is True
    with pytest.raises(TypeError, match="episode_len"):
        spec.make_env("train", episode_len=5)
    with pytest.raises(ValueError, match="unknown split"):
        spec.make_env("holdout")
    with pytest.raises(ValueError, match="unknown env kind"):
        spec.make_env(kind="options")
    first = spec.make_env("train", seed=5)
    second = spec.make_env("train", seed=5)
    assert [first.reset()[1]["bar_index"] for _ in range(3)] == [second.reset()[1]["bar_index"] for _ in range(3)]


def rollout_equities(env):
    _, info = env.reset()
    equities, step, done = [info["equity"]], 0, False
    while not done:
        _, _, terminated, truncated, info = env.step(np.array([np.sin(step * 0.4)], dtype=np.float32))
        equities.append(info["equity"])
        step += 1
        done = terminated or truncated
    return equities


def test_spec_round_trips_as_data_and_rebuilds_identical_envs(spec):
    restored = EnvSpec.from_bytes(spec.to_bytes())
    assert isinstance(restored, EnvSpec)
    assert restored.splits == spec.splits and restored.config == spec.config
    assert restored.feature_columns == spec.feature_columns and restored.periods_per_year == spec.periods_per_year
    for name in spec.prices:
        pd.testing.assert_frame_equal(restored.prices[name], spec.prices[name])
        pd.testing.assert_frame_equal(restored.features[name], spec.features[name])
    pd.testing.assert_series_equal(restored.closes, spec.closes)
    assert restored.digest() == spec.digest()
    assert EnvSpec(**{**spec.__dict__, "symbol": "other"}).digest() != spec.digest()
    scaler = {
        "method": "robust",
        "clip": 5.0,
        "columns": ["ret_20"],
        "center": {"ret_20": 0.01},
        "scale": {"ret_20": 0.04},
    }
    with_scaler = dataclasses.replace(spec, feature_scaler=scaler)
    assert EnvSpec.from_bytes(with_scaler.to_bytes()).feature_scaler == scaler  # the options' zero reference survives
    original = rollout_equities(spec.make_env("test"))
    assert rollout_equities(restored.make_env("test")) == original
    in_test = spec.prices["test"].loc[SPLITS["test"]["start"] :]
    assert len(original) == len(in_test)  # one equity per split bar: the whole split is covered


def _with_stored_config(raw: bytes, edit) -> bytes:
    """The archive ``raw`` with its spec.json's env config passed through ``edit``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "spec.json":
                fields = json.loads(data)
                fields["config"] = edit(fields["config"])
                data = json.dumps(fields, sort_keys=True).encode()
            target.writestr(name, data)
    return out.getvalue()


def test_a_spec_is_read_with_a_typed_config_and_a_bad_stored_one_is_named(spec):
    restored = EnvSpec.from_bytes(spec.to_bytes(), source="data/05_model_input/env_spec.zip")
    assert isinstance(restored.config, EnvConfig) and restored.config == spec.config
    bad = _with_stored_config(spec.to_bytes(), lambda config: {**config, "window_size": "ten"})
    with pytest.raises(
        ValueError, match=r"env_spec\.zip: .*'config\.window_size' must be an integer.*env_construction"
    ):
        EnvSpec.from_bytes(bad, source="data/05_model_input/env_spec.zip")
    renamed = _with_stored_config(spec.to_bytes(), lambda config: {**config, "smoothing": 3})
    with pytest.raises(ValueError, match=r"env_spec\.zip: .*unknown parameter 'config\.smoothing'"):
        EnvSpec.from_bytes(renamed, source="data/05_model_input/env_spec.zip")


def test_a_spec_written_before_an_env_setting_existed_reads_its_default_and_keeps_its_identity(spec):
    """An archive whose config lacks ``risk_aversion`` (written before the setting existed): the same
    envs, and the digest and model signature of the file as it is, so models trained on it fit it."""
    old = _with_stored_config(spec.to_bytes(), lambda config: {k: v for k, v in config.items() if k != "risk_aversion"})
    restored = EnvSpec.from_bytes(old)
    assert restored.config == spec.config  # risk_aversion read at its default
    assert "risk_aversion" not in restored.config_data()
    stored = json.loads(zipfile.ZipFile(io.BytesIO(old)).read("spec.json"))
    assert restored._fields() == stored  # what its digest and a rewritten archive hold
    assert model_signature(restored)["env_config_hash"] == config_hash(stored["config"])
    assert model_signature(EnvSpec.from_bytes(spec.to_bytes())) == model_signature(spec)
    assert rollout_equities(restored.make_env("test")) == rollout_equities(spec.make_env("test"))


def test_env_check_report_passes_and_is_json(spec):
    report = env_check_report(spec)
    json.dumps(report)
    assert report["passed"], report
    for kind in ("continuous", "discrete", "hybrid"):
        for checker in ("gymnasium", "sb3"):
            result = report["checks"][kind][checker]
            assert result["passed"] and result["message"] == "", (kind, checker, result)
            assert result["warnings"] == [], (kind, checker, result)
    assert report["obs_dim"] == 10 * 3 + 5
    assert "feature:vol_20" in report["layout_names"] and "cash_fraction" in report["layout_names"]
    for split, rollout in report["rollouts"].items():
        assert rollout["passed"] and rollout["steps"] == rollout["expected_steps"], split
        assert rollout["trades"] > 0 and rollout["reward_identity_error"] < 1e-9


def test_env_check_report_records_a_failing_checker(spec, monkeypatch):
    def broken_step(self, action):
        raise RuntimeError("broken step")

    monkeypatch.setattr(HybridTradingEnv, "step", broken_step)
    report = env_check_report(spec)
    assert report["passed"] is False
    assert "broken step" in report["checks"]["hybrid"]["gymnasium"]["message"]
    assert report["checks"]["continuous"]["gymnasium"]["passed"]


def test_close_history_reaches_back_before_each_split_and_stops_at_its_end(spec, market):
    prices, _ = market
    for name in ("train", "validation", "test"):
        history = spec.close_history(name)
        assert history.index[0] == prices.index[0]  # warm-up and earlier splits included
        assert history.index[-1] == spec.prices[name].index[-1]  # nothing after the split
        env = spec.make_env(name, evaluation=True)
        np.testing.assert_array_equal(env.close_history[env.history_positions], env.close_prices)
        assert env.history_positions[0] > 0


def test_env_rejects_a_close_history_that_does_not_cover_or_match_its_bars(spec):
    frame, features = spec.prices["validation"], spec.features["validation"]
    history = spec.close_history("validation")
    with pytest.raises(ValueError, match="close_history lacks"):
        ContinuousTradingEnv(frame, features, seeds_env_config(), close_history=history.iloc[:-1])
    with pytest.raises(ValueError, match="disagrees"):
        ContinuousTradingEnv(frame, features, seeds_env_config(), close_history=history * 1.01)
    stale = EnvSpec(**{**spec.__dict__, "closes": None})
    with pytest.raises(ValueError, match="env_construction"):
        stale.make_env("train")


def test_scaled_zero_is_where_a_raw_zero_lands_and_needs_the_scaler(spec):
    scaler = {
        "method": "robust",
        "clip": 5.0,
        "columns": ["ret_20"],
        "center": {"ret_20": 0.008},
        "scale": {"ret_20": 0.032},
    }
    with_scaler = dataclasses.replace(spec, feature_scaler=scaler)
    assert with_scaler.scaled_zero("ret_20") == pytest.approx(-0.25)
    with pytest.raises(ValueError, match="no feature scaler.*env_construction"):
        dataclasses.replace(spec, feature_scaler=None).scaled_zero("ret_20")
