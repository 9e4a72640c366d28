"""Every logged MLflow model carries its own evaluation: the catalog names a metrics source for each
model, and ``own_metrics`` reads the model's numbers from every kind of source."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from trading_rl.evaluation.reporting.model_metrics import own_metrics

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _model_entries() -> dict[str, dict]:
    entries = {}
    for path in sorted((PROJECT_ROOT / "conf" / "base").glob("catalog*.yml")):
        for name, entry in (yaml.safe_load(path.read_text()) or {}).items():
            spec = ((entry or {}).get("metadata") or {}).get("mlflow") or {}
            if "model" in spec:
                entries[f"{path.name}:{name}"] = spec
    return entries


def test_every_logged_model_names_the_dataset_its_own_metrics_come_from():
    entries = _model_entries()
    assert len(entries) >= 8  # sac_icm, options_her, reward_shaped, walk-forward chains, migrated, ...
    assert {name: spec for name, spec in entries.items() if not spec.get("metrics")} == {}


def test_a_migrated_and_a_fine_tuned_checkpoint_read_their_own_rows():
    comparison = {
        "checkpoints": {
            "sp500.zip": {
                "agents": {
                    "discrete": {"sharpe": 0.1},
                    "migrated": {"sharpe": 0.2, "total_return": 0.01},
                    "fine_tuned": {"sharpe": 0.3, "total_return": 0.02},
                },
                "gate": {"passed": True, "continuous_agent": "fine_tuned"},
            },
            "nasdaq.zip": {"agents": {"migrated": {"sharpe": -1.0}}, "gate": {}},
        },
        "baselines": {},
    }
    assert own_metrics("migration_comparison", comparison, "migrated", "migrated_sp500") == {
        "sharpe": 0.2,
        "total_return": 0.01,
    }
    assert own_metrics("migration_comparison", comparison, "fine_tuned", "fine_tuned_sp500")["sharpe"] == 0.3
    assert own_metrics("migration_comparison", comparison, "migrated", "migrated_nasdaq") == {"sharpe": -1.0}
    assert own_metrics("migration_comparison", comparison, "fine_tuned", "fine_tuned_nasdaq") == {}


def test_an_onnx_actor_carries_its_parity_and_latency():
    report = {
        "parity": {"max_abs_diff": 5e-7, "mean_abs_diff": 6e-8, "tolerance": 1e-5, "passed": True},
        "latency": {
            "onnxruntime": {"p50_ms": 0.018, "p95_ms": 0.022, "p99_ms": 0.07, "mean_ms": 0.02, "repeats": 1000},
            "torch_predict": {"p50_ms": 0.24, "p95_ms": 0.44, "p99_ms": 0.67, "mean_ms": 0.29, "repeats": 1000},
        },
    }
    metrics = own_metrics("sac_icm_model_export_report", report, "sac_icm_model_onnx", "sac_icm_model_onnx")
    assert metrics == {
        "parity_max_abs_diff": 5e-7,
        "parity_mean_abs_diff": 6e-8,
        "latency_p50_ms": 0.018,
        "latency_p95_ms": 0.022,
        "latency_p99_ms": 0.07,
    }


def test_a_symbols_agent_carries_its_last_evaluation():
    history = [
        {"timestep": 40, "eval/sharpe": 0.1, "eval/total_return": 0.01, "collapse_det/entropy": 1.0},
        {"timestep": 80, "eval/sharpe": 0.4, "eval/total_return": 0.03, "train/actor_loss": 2.0},
        {"timestep": 90, "train/actor_loss": 1.5},
    ]
    assert own_metrics("AAA.sac_icm_training_history", history, "AAA_sac_icm", "AAA_sac_icm") == {
        "sharpe": 0.4,
        "total_return": 0.03,
    }


def test_a_walk_forward_chain_reads_the_medians_of_its_own_windows():
    folds = pd.DataFrame(
        {
            "symbol": ["sp500"] * 4,
            "agent": ["sac_icm"] * 4,
            "kind": ["agent"] * 4,
            "seed": [0, 0, 1, 1],
            "fold": [0, 1, 0, 1],
            "sharpe": [1.0, 3.0, -1.0, -2.0],
            "total_return": [0.01, 0.03, -0.01, -0.02],
            "max_drawdown": [-0.01, -0.02, -0.03, -0.04],
        }
    )
    chain = own_metrics("walk_forward_folds", folds, "walk_forward", "walk_forward_sp500_sac_icm_seed0_folds0-1")
    assert chain["sharpe"] == pytest.approx(2.0) and chain["n_windows"] == 2
