"""ONNX export of the deterministic SAC actor: parity with model.predict, dynamic batch, dataset."""

import numpy as np
import onnx
import pytest

from trading_rl.export import check_parity, export_actor, inference_session, latency_percentiles, rollout_observations
from trading_rl.export.onnx_export import ExportParams, export_and_verify
from trading_rl.integration.datasets.export import OnnxModelDataset


def test_parity_on_real_and_random_observations(export_setup, onnx_bytes):
    model = export_setup.model
    real = rollout_observations(model, export_setup.spec.make_env("validation"), 500)
    assert len(real) == len(export_setup.spec.prices["validation"]) - 3  # one per tradable bar
    report = check_parity(model, inference_session(onnx_bytes), real, 1000, 1e-5)
    assert report["n_observations"] == 1000 and report["n_real"] == len(real)
    assert report["passed"] and report["max_abs_diff"] <= 1e-5


def test_graph_has_a_dynamic_batch_axis_and_matches_any_batch_size(export_setup, onnx_bytes):
    graph = onnx.load_model_from_string(onnx_bytes).graph
    batch_dim = graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.dim_value
    session = inference_session(onnx_bytes)
    rng = np.random.default_rng(1)
    for batch in (1, 7, 300):
        observations = rng.normal(size=(batch, export_setup.spec.layout.dim)).astype(np.float32)
        (actions,) = session.run(["action"], {"observation": observations})
        expected, _ = export_setup.model.predict(observations, deterministic=True)
        assert actions.shape == (batch, 1)
        np.testing.assert_allclose(actions, expected, atol=1e-5, rtol=0)


def test_parity_check_fails_for_a_different_policy(export_setup, onnx_bytes):
    model = export_setup.model
    other = export_setup.model.__class__(
        "MlpPolicy", export_setup.spec.make_env("train"), seed=123, policy_kwargs={"net_arch": [32, 32]}, buffer_size=10
    )
    with pytest.raises(ValueError, match="differs from the PyTorch policy"):
        check_parity(model, inference_session(export_actor(other)), np.zeros((0, 109)), 100, 1e-5)


def test_export_and_verify_report(export_setup):
    params = ExportParams.from_mapping({"latency": {"repeats": 50, "warmup": 5}, "parity": {"max_real": 20}}, "export")
    onnx_bytes, report = export_and_verify(export_setup.model, export_setup.spec.make_env("validation"), params)
    onnx.checker.check_model(onnx.load_model_from_string(onnx_bytes))
    assert report["parity"]["n_real"] == 20 and report["parity"]["n_random"] == 980
    for backend in ("onnxruntime", "torch_predict"):
        stats = report["latency"][backend]
        assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"] and stats["repeats"] == 50
    assert report["input"]["shape"] == ["batch", export_setup.spec.layout.dim]


def test_export_params_reject_unknown_keys():
    with pytest.raises(ValueError, match="parity.n_obs"):
        ExportParams.from_mapping({"parity": {"n_obs": 3}}, "export")


def test_latency_percentiles_of_a_known_sequence(monkeypatch):
    durations = iter(range(1, 101))
    clock = {"now": 0}

    def fake_clock():
        return clock["now"]

    def call():
        clock["now"] += next(durations) * 1_000_000  # the i-th call takes i ms

    monkeypatch.setattr("trading_rl.export.onnx_export.time.perf_counter_ns", fake_clock)
    stats = latency_percentiles(call, repeats=100, warmup=0)
    assert stats["p50_ms"] == pytest.approx(np.percentile(np.arange(1, 101), 50))
    assert stats["p99_ms"] == pytest.approx(99.01)
    assert stats["mean_ms"] == pytest.approx(50.5)


def test_onnx_dataset_round_trip_and_rejects_garbage(tmp_path, onnx_bytes):
    dataset = OnnxModelDataset(str(tmp_path / "actor.onnx"))
    dataset.save(onnx_bytes)
    assert dataset.load() == onnx_bytes
    broken = OnnxModelDataset(str(tmp_path / "broken.onnx"))
    with pytest.raises(Exception, match="could not be serialised"):
        broken.save(b"not an onnx model")
    assert not (tmp_path / "broken.onnx").exists()
