"""A/B of the sac_icm phase over seeds: plain SAC vs SAC+ICM at the chosen Kedro env's budget.

Both variants use the ``sac_icm`` parameters of ``--env`` (only ``icm.enabled`` differs), train on
the latest ``env_spec`` from the catalog and are evaluated on the validation split next to the
baselines (same env, same costs). Prints one row per variant × seed, the medians per variant, and
writes everything as JSON to ``--out``.

    python benchmarks/ab_sac_icm.py [--env base] [--seeds 0 1 2] [--jobs 1] [--out ab_sac_icm.json]

Needs a finished ``kedro run --pipelines feature_extraction,env_construction``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import pandas as pd


def run_one(spec, params: dict, icm: bool, seed: int, device: str) -> dict:
    import torch

    from trading_rl.agents import build_agent, train_agent
    from trading_rl.evaluation.report import evaluate_policy
    from trading_rl.evaluation.rollout import policy_from_sb3

    torch.set_num_threads(1)
    agent_params = copy.deepcopy(params["agent"])
    agent_params.setdefault("icm", {})["enabled"] = icm
    started = time.perf_counter()
    model = build_agent(spec.make_env("train", seed=seed), agent_params, seed=seed, device=device)
    with tempfile.TemporaryDirectory() as work_dir:
        outcome = train_agent(
            model, partial(spec.make_env, "validation"), agent_params, work_dir, spec.periods_per_year
        )
    evaluation, collapse = evaluate_policy(
        "sac_icm" if icm else "sac",
        policy_from_sb3(outcome.model, deterministic=True),
        policy_from_sb3(outcome.model, deterministic=False),
        partial(spec.make_env, "validation"),
        spec.periods_per_year,
        seed=seed,
    )
    metrics = evaluation["metrics"]
    return {
        "variant": "SAC+ICM" if icm else "SAC",
        "seed": seed,
        "val_sharpe": metrics["sharpe"],
        "val_total_return": metrics["total_return"],
        "val_max_drawdown": metrics["max_drawdown"],
        "action_entropy": metrics["action_entropy"],
        "trade_rate": metrics["n_trades"] / metrics["n_steps"],
        "hold_share": metrics["hold_share"],
        "stochastic_entropy": evaluation["stochastic_metrics"]["action_entropy"],
        "collapsed_deterministic": collapse["deterministic"]["collapsed"],
        "train_seconds": time.perf_counter() - started,
        "baselines": evaluation["baselines"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="base")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="ab_sac_icm.json")
    args = parser.parse_args()
    os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(os.getcwd())
    with KedroSession.create(env=args.env) as session:
        context = session.load_context()
        spec = context.catalog.load("env_spec")
        params = context.params["sac_icm"]

    jobs = [(icm, seed) for icm in (False, True) for seed in args.seeds]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, spec, params, icm, seed, args.device) for icm, seed in jobs]
        rows = [future.result() for future in futures]

    table = pd.DataFrame([{k: v for k, v in row.items() if k != "baselines"} for row in rows])
    pd.set_option("display.width", 200)
    print(table.to_string(index=False))
    numeric = table.drop(columns=["seed", "collapsed_deterministic"])
    print("\nmedian per variant:")
    print(numeric.groupby("variant").median().to_string())
    baselines = rows[0]["baselines"]
    print("\nbaselines (validation split):")
    for name, metrics in baselines.items():
        print(f"  {name:18s} sharpe={metrics.get('sharpe')} total_return={metrics.get('total_return')}")
    with open(args.out, "w") as handle:
        json.dump({"env": args.env, "rows": rows}, handle, indent=2, default=str)


if __name__ == "__main__":
    main()
