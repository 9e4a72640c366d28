"""Latency of one inference (one observation) of the exported SAC actor on CPU.

The actor has the ``base`` sac_icm policy size (net_arch [256, 256, 128]) on the default env
(window 10 × 26 features + 5 state values = 265 inputs) on S&P 500 daily bars. Weights are
untrained: latency depends on the graph, not on the values. Timed, each over ``--repeats`` calls
after a warm-up:

- ``onnxruntime``: ``session.run`` on a (1, 265) float32 array, 1 intra-op thread (the target);
- ``torch predict``: ``model.predict(obs, deterministic=True)``, the in-process PyTorch baseline
  (with its numpy <-> tensor conversions), 1 torch thread;
- ``torch actor``: the bare ``DeterministicActor`` forward under ``torch.inference_mode``;
- ``SignalEngine.signal``: the whole live path (features on ``--history`` bars, scaler, ONNX,
  smoothing, trade rule) — dominated by the feature computation, listed for context.

    python benchmarks/inference_latency.py [--repeats 5000] [--history 1000]
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
import torch

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.data import load_prices
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.export import (
    DeterministicActor,
    PortfolioState,
    SignalEngine,
    export_actor,
    inference_session,
    latency_percentiles,
)
from trading_rl.export.onnx_export import INPUT_NAME, OUTPUT_NAME
from trading_rl.features import apply_scaler, compute_features, fit_garch, fit_scaler, make_splits
from trading_rl.features.indicators import FeatureParams, GarchParams
from trading_rl.training.params import AgentParams


def _setup():
    prices = load_prices("sp500")
    splits = make_splits(prices.index, {"train_fraction": 0.7, "validation_fraction": 0.15})
    train = prices.loc[: splits["train"]["end"]]
    feature_params = FeatureParams(garch=GarchParams(params=fit_garch(np.log(train["close"]).diff().dropna())))
    features = compute_features(prices, feature_params).dropna(how="any")
    scaler = fit_scaler(features.loc[: splits["train"]["end"]])
    spec = build_env_spec("sp500", prices, apply_scaler(features, scaler), splits, EnvConfig(), 252.0)
    model = build_agent(
        spec.make_env("train", seed=0),
        AgentParams.from_mapping({"policy": {"net_arch": [256, 256, 128]}}, "sac_icm.agent"),
        seed=0,
        device="cpu",
    )
    return prices, feature_params, scaler, spec, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--history", type=int, default=1000, help="bars passed to SignalEngine.signal")
    args = parser.parse_args()
    torch.set_num_threads(1)

    prices, feature_params, scaler, spec, model = _setup()
    onnx_bytes = export_actor(model)
    session = inference_session(onnx_bytes, intra_op_threads=1)
    env = spec.make_env("validation")
    observation, _ = env.reset()
    single = observation[None, :]
    actor = DeterministicActor(model)
    tensor = torch.as_tensor(single)

    def torch_actor():
        with torch.inference_mode():
            actor(tensor)

    engine = SignalEngine(onnx_bytes, feature_params, scaler, spec.config, spec.feature_columns)
    bars = prices.iloc[-args.history :]
    state = PortfolioState(cash=1e5)
    rows = {
        "onnxruntime (1 thread)": latency_percentiles(
            lambda: session.run([OUTPUT_NAME], {INPUT_NAME: single}), args.repeats, args.warmup
        ),
        "torch predict (1 thread)": latency_percentiles(
            lambda: model.predict(observation, deterministic=True), args.repeats, args.warmup
        ),
        "torch actor forward (1 thread)": latency_percentiles(torch_actor, args.repeats, args.warmup),
        f"SignalEngine.signal ({args.history} bars)": latency_percentiles(
            lambda: engine.signal(bars, state), max(args.repeats // 50, 20), 5
        ),
    }
    print(
        f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()} "
        f"torch {torch.__version__}; observation {observation.shape[0]} values, net_arch [256, 256, 128]"
    )
    print(f"{'path':<34} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'repeats':>8}")
    for name, stats in rows.items():
        print(
            f"{name:<34} {stats['p50_ms']:>9.4f} {stats['p95_ms']:>9.4f} {stats['p99_ms']:>9.4f} {stats['repeats']:>8}"
        )
    p95 = rows["onnxruntime (1 thread)"]["p95_ms"]
    print(f"target p95 <= 1 ms for one ONNX inference: {'met' if p95 <= 1.0 else 'missed'} ({p95:.4f} ms)")


if __name__ == "__main__":
    main()
