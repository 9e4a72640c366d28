import math

import numpy as np
import pandas as pd
import pytest

from trading_rl.config import ConfigError
from trading_rl.envs.deployment import Deployment, NoDeploymentMetadata
from trading_rl.features import FeatureParams
from trading_rl.phases.forward import (
    SCORED_COLUMNS,
    DecayParams,
    ForwardParams,
    ForwardRecordError,
    decay_alerts,
    extend_record,
    psr_against,
)


def _replayed(n: int, seed: int = 0) -> pd.DataFrame:
    """The first ``n`` bars of one fixed replay."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({column: rng.normal(0, 0.01, 50) for column in SCORED_COLUMNS})
    return frame.assign(timestamp=pd.bdate_range("2020-01-01", periods=50)).iloc[:n]


def test_extend_record_appends_only_the_new_bars_and_keeps_who_scored_them():
    first, n_first = extend_record(None, _replayed(5), "m1", "run1")
    second, n_second = extend_record(first, _replayed(8), "m1", "run2")
    assert (n_first, n_second) == (5, 3)
    assert list(second["scored_in"]) == ["run1"] * 5 + ["run2"] * 3
    pd.testing.assert_frame_equal(second.iloc[:5], first)


def test_extend_record_refuses_a_replay_that_differs_in_one_bit_or_lost_bars():
    record, _ = extend_record(None, _replayed(5), "m1", "run1")
    changed = _replayed(6)
    changed.loc[2, "return"] = np.nextafter(changed.loc[2, "return"], 1.0)
    with pytest.raises(ForwardRecordError, match="2020-01-03.*column 'return'"):
        extend_record(record, changed, "m1", "run2")
    with pytest.raises(ForwardRecordError, match="gives only 4"):
        extend_record(record, _replayed(4), "m1", "run2")


def test_a_new_deployment_starts_a_new_record():
    record, _ = extend_record(None, _replayed(5), "m1", "run1")
    new, n_new = extend_record(record, _replayed(2, seed=3), "m2", "run2")
    assert n_new == 2 and set(new["model_version"]) == {"m2"}


def test_a_model_without_deployment_metadata_is_named():
    class Model:
        trading_rl_metadata = {"save_version": "v1"}

    with pytest.raises(NoDeploymentMetadata, match="'deployed_model' \\(version v1\\) carries no deployment metadata"):
        Deployment.from_model(Model())


def _model_with_deployment(feature_params: dict):
    block = {
        "symbol": "X",
        "env_config": {},
        "periods_per_year": 252.0,
        "feature_params": feature_params,
        "feature_scaler": {},
        "splits": {},
        "data_end": "2020-01-01",
    }

    class Model:
        trading_rl_metadata = {"save_version": "v1", "deployment": block}

    return Model()


def test_the_deployment_block_is_read_into_typed_sections_once():
    deployment = Deployment.from_model(_model_with_deployment(FeatureParams(garch=None).to_dict()))
    assert deployment.feature_params == FeatureParams(garch=None)
    with pytest.raises(
        ConfigError, match=r"'deployed_model\.trading_rl_metadata\.deployment\.feature_params\.rsi_windw'"
    ):
        Deployment.from_model(_model_with_deployment({"rsi_windw": 14}))


def _report(n_bars: int, sharpe: float, drawdown: float, fill_rate: float, collapsed: bool = False) -> dict:
    return {
        "status": "tracked",
        "model_version": "m1",
        "symbol": "X",
        "n_bars": n_bars,
        "periods_per_year": 252.0,
        "metrics": {"sharpe": sharpe, "max_drawdown": drawdown},
        "fill_rate": fill_rate,
        "collapse": {"collapsed": collapsed},
    }


FOLDS = pd.DataFrame(
    {
        "symbol": "X",
        "kind": "agent",
        "agent": "sac_icm",
        "sharpe": [0.2, 0.8, 1.5],
        "max_drawdown": [-0.05, -0.08, -0.12],
        "fill_rate": [0.1, 0.2, 0.3],
    }
)
CALM_DRIFT = {"drifted_features": [], "actions": {"psi": 0.01, "drifted": False}}


def test_decay_alerts_against_the_walk_forward_range():
    record = pd.DataFrame({"return": np.random.default_rng(0).normal(0.001, 0.01, 60)})
    calm = decay_alerts(_report(60, 0.9, -0.06, 0.2), record, CALM_DRIFT, FOLDS, ForwardParams())
    assert calm["passed"] and {c["status"] for c in calm["checks"]} <= {"ok", "alert"}
    broken = decay_alerts(
        _report(60, -2.0, -0.3, 0.9, collapsed=True),
        record,
        {"drifted_features": ["realized_vol_20"], "actions": {"psi": 0.9, "drifted": True}},
        FOLDS,
        ForwardParams(),
    )
    assert set(broken["alerts"]) >= {
        "sharpe_range",
        "drawdown",
        "trade_rate",
        "collapse",
        "feature_drift",
        "action_drift",
    }
    pending = decay_alerts(_report(5, -2.0, -0.3, 0.9), record.iloc[:5], CALM_DRIFT, FOLDS, ForwardParams())
    assert pending["passed"] and {c["status"] for c in pending["checks"]} == {"pending"}


def test_the_psr_check_uses_the_walk_forward_median_sharpe():
    returns = np.random.default_rng(1).normal(-0.002, 0.01, 250)
    alerts = decay_alerts(
        _report(250, -3.0, -0.06, 0.2), pd.DataFrame({"return": returns}), CALM_DRIFT, FOLDS, ForwardParams()
    )
    check = next(c for c in alerts["checks"] if c["check"] == "psr")
    assert check["value"] == pytest.approx(psr_against(returns, 0.8, 252.0)) and check["status"] == "alert"
    assert alerts["walk_forward"]["median_sharpe"] == 0.8


def test_decay_alerts_need_walk_forward_windows_of_the_agent():
    record = pd.DataFrame({"return": np.zeros(30)})
    with pytest.raises(ValueError, match="no window of agent 'es' on 'X'"):
        decay_alerts(
            _report(30, 0.5, -0.01, 0.1),
            record,
            CALM_DRIFT,
            FOLDS,
            ForwardParams(decay=DecayParams(walk_forward_agent="es")),
        )


def test_forward_params_name_a_bad_key():
    with pytest.raises(ValueError, match="forward.drift.ks_alpha"):
        ForwardParams.from_mapping({"drift": {"ks_alpha": 2}}, "forward")
    assert math.isclose(ForwardParams().decay.psr_min, 0.05)
