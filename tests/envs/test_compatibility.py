"""Model/spec signatures: what a saved model must match to be used with an env spec."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import gymnasium as gym
import pytest
from helpers.synthetic_prices import tiny_env_spec

from trading_rl.envs.compatibility import ModelCompatibilityError, check_model_fits_spec, model_signature


@pytest.fixture(scope="module")
def spec():
    return tiny_env_spec()


def _model(signature_of, dim=None, **extra):
    metadata = {**(model_signature(signature_of) if signature_of is not None else {}), **extra}
    space = gym.spaces.Box(-1, 1, (dim or signature_of.layout.dim,))
    return SimpleNamespace(trading_rl_metadata=metadata, observation_space=space)


def _message(model, spec) -> str:
    with pytest.raises(ModelCompatibilityError) as raised:
        check_model_fits_spec(model, spec, model_dataset="sac_icm_model", pipeline="export")
    return str(raised.value)


def test_a_model_fits_the_spec_it_was_trained_on(spec):
    check_model_fits_spec(_model(spec), spec, model_dataset="sac_icm_model", pipeline="export")


def test_signature_hashes_are_stable_and_layout_sensitive(spec):
    assert model_signature(spec) == model_signature(replace(spec))
    swapped = replace(spec, feature_columns=["b", "a"])
    assert model_signature(swapped)["observation"]["hash"] != model_signature(spec)["observation"]["hash"]
    assert model_signature(swapped)["env_config_hash"] == model_signature(spec)["env_config_hash"]


@pytest.mark.parametrize(
    ("trained_on", "expected"),
    [
        (lambda s: replace(s, symbol="BBB"), "symbol: model 'BBB' vs spec 'AAA'"),
        (lambda s: replace(s, feature_columns=["b", "a"]), "same feature columns in another order"),
        (
            lambda s: replace(s, feature_columns=["a", "c"]),
            "features only in the model: ['c']; only in the spec: ['b']",
        ),
        (lambda s: replace(s, config=replace(s.config, window_size=4)), "model 13 inputs (window 4 x 2 features"),
        (lambda s: replace(s, config=replace(s.config, hold_threshold=0.2)), "env config hash: model"),
    ],
    ids=["symbol", "order", "columns", "window", "env_config"],
)
def test_a_mismatch_names_both_sides_and_the_fix(spec, trained_on, expected):
    message = _message(_model(trained_on(spec), save_version="2026-01-01T00.00.00.000Z"), spec)
    assert expected in message
    assert "dataset 'sac_icm_model' (the loaded model is version 2026-01-01T00.00.00.000Z)" in message
    assert "dataset 'env_spec' (symbol 'AAA')" in message
    assert "--pipelines export --load-versions sac_icm_model:<version>,env_spec:<version>" in message


def test_a_model_without_signature_is_checked_by_its_input_size(spec):
    check_model_fits_spec(_model(None, dim=spec.layout.dim), spec, model_dataset="m", pipeline="export")
    message = _message(_model(None, dim=99), spec)
    assert f"model network takes 99 inputs vs spec {spec.layout.dim} inputs" in message
