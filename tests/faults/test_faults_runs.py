"""Fault suite, runs that must not mix: partial runs, and models or walk-forward results used with
an env spec or prices they were not made from. Each case runs real Kedro sessions on a project copy
and checks the message names what the user must fix, and that nothing a later run loads changed."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from helpers.manifest_faults_setup import (
    TINY_SAC_ICM,
    assert_unchanged,
    commit,
    completed_runs,
    copy_project,
    good_prices,
    good_project_copy,
    load,
    run_session,
    snapshot,
    write_prices,
)
from stable_baselines3 import PPO

from trading_rl.data.bad_bars import BadBarError
from trading_rl.features.garch import GarchFitError
from trading_rl.phases.sac_icm import train_sac_icm
from trading_rl.training.params import SacIcmParams

pytestmark = pytest.mark.slow


@pytest.fixture
def project(good_project, tmp_path) -> Path:
    return copy_project(good_project, tmp_path / "project")


# ---------- partial runs ----------


def _constant_prices() -> pd.DataFrame:
    frame = good_prices()
    frame[["Open", "High", "Low", "Close"]] = 100.0
    return frame


def _bad_tick() -> pd.DataFrame:
    frame = good_prices()
    frame.iloc[200, :4] = frame.iloc[200, :4] * 1000.0
    return frame


@pytest.mark.parametrize("bad_prices", [_constant_prices, _bad_tick], ids=["constant_prices", "bad_tick"])
def test_failed_run_never_becomes_latest(project, bad_prices):
    """Issue 18 case 2: feature_extraction fails after writing prices and splits; a later
    env_construction must not pair those with the previous run's features."""
    complete_spec = load(project, "env_spec")
    write_prices(project, bad_prices())
    with pytest.raises((GarchFitError, BadBarError)):  # test_faults_data checks the message
        run_session(project, ["feature_extraction"])
    runs_before = completed_runs(project)
    run_session(project, ["env_construction"])
    rebuilt = load(project, "env_spec")
    for split, frame in complete_spec.prices.items():
        pd.testing.assert_frame_equal(rebuilt.prices[split], frame)
    assert len(completed_runs(project)) == len(runs_before) + 1


def test_inputs_no_completed_run_wrote_are_refused(tmp_path):
    """A project whose only feature_extraction run failed: env_construction refuses and says how
    to accept the versions anyway."""
    project = good_project_copy(tmp_path / "fresh")
    write_prices(project, _constant_prices())
    with pytest.raises(GarchFitError):  # test_faults_data checks the message
        run_session(project, ["feature_extraction"])
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, ["env_construction"])
    message = str(raised.value)
    # scalers.json never got a version: the run stops before any node, naming what writes it.
    for expected in ("'scaled_features'", "has no version yet", "kedro run --pipelines feature_extraction", "Nothing"):
        assert expected in message, (expected, message)
    assert_unchanged(project, before)


# ---------- models used with a spec they were not trained on ----------


def _reordered_columns(spec):
    columns = list(reversed(spec.feature_columns))
    return replace(spec, feature_columns=columns, features={k: v[columns] for k, v in spec.features.items()})


SPEC_VARIANTS = {
    "other_symbol": lambda spec: replace(spec, symbol="sp500"),
    "other_window": lambda spec: replace(spec, config=replace(spec.config, window_size=5)),
    "reordered_columns": _reordered_columns,
    "other_costs": lambda spec: replace(spec, config=replace(spec.config, commission_rate=0.001)),
}


@pytest.fixture(scope="module")
def foreign_models(good_project, tmp_path_factory):
    """A tiny sac_icm model per spec variant, trained by the project's own node."""
    spec = load(good_project, "env_spec")
    work = tmp_path_factory.mktemp("resume")
    models = {}
    for name, variant in SPEC_VARIANTS.items():
        params = {**TINY_SAC_ICM, "resume_dir": str(work / name)}
        params = SacIcmParams.from_mapping(params, "sac_icm")
        model, _, _ = train_sac_icm(variant(spec), params, 0, {"seed": 0, "save_version": "earlier-run"})
        models[name] = model
    return models


# {small}/{large}: input sizes with window 5 / the spec's window {window} (filled in from the spec).
COMPATIBILITY_CASES = [
    ("export", "other_symbol", ["symbol: model 'sp500' vs spec 'GOOD'"]),
    (
        "export",
        "other_window",
        ["observation: model {small} inputs (window 5", "vs spec {large} inputs (window {window}"],
    ),
    ("export", "reordered_columns", ["same feature columns in another order"]),
    ("export", "other_costs", ["env config hash"]),
    ("export", "legacy_other_window", ["model network takes {small} inputs vs spec {large} inputs"]),
    ("options_her", "other_window", ["observation: model {small} inputs"]),
    ("options_her", "reordered_columns", ["same feature columns in another order"]),
    ("reward_shaper", "other_symbol", ["symbol: model 'sp500' vs spec 'GOOD'"]),
    ("reward_shaper", "other_window", ["observation: model {small} inputs"]),
    ("final_evaluation", "other_window", ["observation: model {small} inputs"]),
]


def _input_sizes(project: Path) -> dict[str, int]:
    spec = load(project, "env_spec")
    small = SPEC_VARIANTS["other_window"](spec).layout.dim
    return {"small": small, "large": spec.layout.dim, "window": spec.config.window_size}


@pytest.mark.parametrize(
    ("pipeline", "variant", "expected_parts"), COMPATIBILITY_CASES, ids=[f"{p}-{v}" for p, v, _ in COMPATIBILITY_CASES]
)
def test_model_from_another_spec_is_refused_before_writing(project, foreign_models, pipeline, variant, expected_parts):
    model = foreign_models[variant.removeprefix("legacy_")]
    metadata = model.trading_rl_metadata
    if variant.startswith("legacy_"):  # saved before models carried their spec's signature
        model.trading_rl_metadata = {}
    try:
        commit(project, "sac_icm_model", model)
    finally:
        model.trading_rl_metadata = metadata
    sizes = _input_sizes(project)
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, [pipeline])
    message = str(raised.value)
    expected_parts = [part.format(**sizes) for part in expected_parts]
    for expected in (
        "dataset 'sac_icm_model'",
        "dataset 'env_spec'",
        f"--pipelines {pipeline} --load-versions",
        *expected_parts,
    ):
        assert expected in message, (expected, message)
    assert_unchanged(project, before)


def test_legacy_checkpoint_of_another_observation_is_refused(project):
    sizes = _input_sizes(project)
    other = SPEC_VARIANTS["other_window"](load(project, "env_spec"))
    legacy = PPO(
        "MlpPolicy",
        other.make_env("train", kind="discrete"),
        seed=0,
        policy_kwargs={"net_arch": {"pi": [256, 128], "vf": [256, 128]}},
    )
    buffer = io.BytesIO()
    legacy.save(buffer)
    folder = project / "data/01_raw/legacy"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "old_agent.zip").write_bytes(buffer.getvalue())
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, ["checkpoint_migration"])
    message = str(raised.value)
    dims = "observation dimension {small}, but the environment has {large}".format(**sizes)
    for expected in ("old_agent.zip", dims, "--load-versions env_spec:"):
        assert expected in message, (expected, message)
    assert_unchanged(project, before)


# ---------- walk-forward results used with other prices ----------


def _returns(symbol: str, timestamps: pd.DatetimeIndex) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "symbol": symbol,
            "fold": 0,
            "kind": "agent",
            "agent": "sac_icm",
            "seed": 0,
            "timestamp": timestamps,
            "return": 0.001,
            "action_raw": 0.5,
            "trade_value": 0.0,
        }
    )


RETURNS_CASES = {
    # refused by the phase's symbol check first (env_construction.symbol 'GOOD' is not among them)
    "symbol_not_in_prices": (lambda index: _returns("sp500", index[-60:]), ["holds symbols ['sp500'], not 'GOOD'"]),
    "bars_not_in_prices": (
        lambda index: _returns("GOOD", pd.bdate_range("2015-01-02", periods=60, name="timestamp")),
        ["tested 60 bar(s) of 'GOOD'", "prices cover 1999-01-04"],
    ),
}


@pytest.mark.parametrize("case", sorted(RETURNS_CASES))
def test_walk_forward_returns_of_other_prices_are_refused_before_labels(project, case):
    make_returns, expected_parts = RETURNS_CASES[case]
    prices = load(project, "prices")
    commit(project, "walk_forward_returns", make_returns(prices.index))
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, ["regime_validation"])
    message = str(raised.value)
    for expected in ("dataset 'walk_forward_returns'", "--load-versions walk_forward_returns:", *expected_parts):
        assert expected in message, (expected, message)
    assert_unchanged(project, before)


# ---------- one symbol check per phase (env_construction.symbol names the run and its MLflow tags) ----------


def _foreign(spec):
    return replace(spec, symbol="FWD")


def _refused_before_writing(project: Path, pipeline: str, *expected_parts: str) -> None:
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, [pipeline])
    message = str(raised.value)
    for expected in expected_parts:
        assert expected in message, (expected, message)
    assert_unchanged(project, before)


@pytest.mark.parametrize("pipeline", ["sac_icm", "walk_forward"])
def test_a_phase_refuses_an_input_of_another_symbol_before_training(project, pipeline):
    """The newest env_spec is FWD's (sac_icm), or the newest prices hold only FWD (walk_forward),
    while env_construction.symbol is GOOD: the run would train on FWD under GOOD's name."""
    if pipeline == "sac_icm":
        commit(project, "env_spec", _foreign(load(project, "env_spec")))
        named = ["dataset 'env_spec' is for symbol 'FWD'", "'env_construction.symbol' is 'GOOD'"]
    else:
        commit(project, "prices", load(project, "prices").assign(symbol="FWD"))
        named = ["dataset 'prices' holds symbols ['FWD'], not 'GOOD'"]
    _refused_before_writing(project, pipeline, *named, "Nothing was written", f"--pipelines {pipeline} --load-versions")


def test_export_refuses_feature_params_of_other_symbols(project):
    """feature_extraction ran for another symbol after the model was trained: export named a
    KeyError 'GOOD' before; now the dataset, the symbols it holds and the fix."""
    spec = load(project, "env_spec")
    params = {**TINY_SAC_ICM, "resume_dir": str(project / "resume")}
    model, _, _ = train_sac_icm(
        spec, SacIcmParams.from_mapping(params, "sac_icm"), 0, {"seed": 0, "save_version": "earlier-run"}
    )
    commit(project, "sac_icm_model", model)
    commit(project, "feature_params", {"FWD": load(project, "feature_params")["GOOD"]})
    _refused_before_writing(
        project,
        "export",
        "dataset 'feature_params' holds symbols ['FWD'], not 'GOOD'",
        "--load-versions feature_params:",
    )


def test_env_construction_refuses_splits_of_other_symbols(project):
    """``splits`` of other symbols (newest, or pinned by ``--load-versions``) was a KeyError in envs/spec.py."""
    commit(project, "splits", {"FWD": load(project, "splits")["GOOD"]})
    _refused_before_writing(
        project,
        "env_construction",
        "dataset 'splits' holds symbols ['FWD'], not 'GOOD'",
        "--pipelines env_construction",
    )
