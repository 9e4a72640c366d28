"""A/B of the options_her phase over seeds: with/without HER × with/without options.

Every variant warm-starts from the same SAC+ICM model and trains with the same budget (the
``options_her`` parameters of the chosen Kedro env), then is evaluated on the validation split next
to the baselines. Prints one row per variant × seed and the median per variant.

    python benchmarks/ab_options_her.py [--env base] [--seeds 0 1 2]

Needs a finished ``kedro run`` up to ``sac_icm`` (it reads the latest ``env_spec`` and
``sac_icm_model`` from the catalog).
"""

from __future__ import annotations

import argparse
import copy
import os

import pandas as pd
import torch
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from trading_rl.agents.hierarchical import evaluate_from_spec, option_gates, train_from_spec

VARIANTS = {
    "options+HER": {"options": True, "her": True},
    "options": {"options": True, "her": False},
    "HER": {"options": False, "her": True},
    "plain SAC fine-tune": {"options": False, "her": False},
}


def _variant_params(params: dict, options: bool, her: bool) -> dict:
    variant = copy.deepcopy(params)
    variant.setdefault("options", {})["enabled"] = options
    variant.setdefault("her", {})["enabled"] = her
    return variant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="base")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
    torch.set_num_threads(1)
    bootstrap_project(os.getcwd())
    with KedroSession.create(env=args.env) as session:
        context = session.load_context()
        spec = context.catalog.load("env_spec")
        source = context.catalog.load("sac_icm_model")
        params = context.params["options_her"]

    rows, baselines = [], None
    for name, flags in VARIANTS.items():
        variant = _variant_params(params, **flags)
        for seed in args.seeds:
            agent, _, stats = train_from_spec(spec, source, variant, seed, device="cpu")
            result = evaluate_from_spec(agent, spec, variant, seed)
            baselines = baselines or result["baselines"]
            share = result["option_share"] or {}
            gates = option_gates(stats) if stats else []
            rows.append(
                {
                    "variant": name,
                    "seed": seed,
                    "val_sharpe": result["metrics"]["sharpe"],
                    "val_total_return": result["metrics"]["total_return"],
                    "goal_achievement": result["goals"]["goal_achievement_rate"],
                    "target_reached": result["goals"]["target_reached_rate"],
                    "max_option_share_eval": max(share.values()) if share else None,
                    "options_used_eval": sum(v > 0 for v in share.values()) if share else None,
                    "option_gates_passed_train": f"{sum(g['passed'] for g in gates)}/{len(gates)}" if gates else None,
                }
            )
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(table.to_string(index=False))
    print(table.groupby("variant")[["val_sharpe", "val_total_return", "goal_achievement", "target_reached"]].median())
    print(pd.DataFrame({k: {"sharpe": v.get("sharpe"), "total_return": v.get("total_return")} for k, v in baselines.items()}).T)


if __name__ == "__main__":
    main()
