"""Mechanism A/Bs on the walk-forward protocol: agents from ``walk_forward.AGENT_TRAINERS`` trained on
the same rolling windows (``data_end: validation``, so the test split is never read), several seeds,
with paired differences and bootstrap confidence intervals.

    python benchmarks/ab_walk_forward.py --seeds 5 --jobs 16 \\
        --agents sac_icm sac options options_her --pairs sac_icm:sac options:sac options_her:options

Each agent is a walk-forward agent exactly as ``kedro run --pipelines validation`` trains one
(``run_walk_forward``: fold 0 from scratch for ``walk_forward.timesteps``, later folds fine-tuned).
``sac``/``sac_icm`` take ``sac_icm.agent`` with ``walk_forward.agent_overrides``; ``options`` and
``options_her`` take the ``options_her`` phase parameters, their low-level SAC with the same SAC
settings and networks as the ``sac`` arm (HER needs ``learning_starts`` beyond one 500-bar episode:
600). Reported per agent over symbol × fold × seed windows: median Sharpe, total return, max
drawdown, fill rate and action entropy with 90% bootstrap intervals, the share of windows that
trade, and the baselines on the same windows; per ``--pairs A:B``, the median paired difference A − B
over matched (symbol, fold, seed) windows with its interval, paired on windows and seeds: every agent
trains on the same random stream per (fold, seed) (``walk_forward.agent_seed``, common random numbers).
A window without a fill counts as Sharpe 0 (``metrics.window_sharpes``, docs/protocol.md). Every
agent is one trial per symbol in the ledger (``walk_forward.trial_rows``), so a Deflated Sharpe
Ratio computed later counts it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning_curve import load_parameters  # noqa: E402

from trading_rl.runtime import Executor  # noqa: E402

MEASURED = ("sharpe", "total_return", "max_drawdown", "fill_rate", "action_entropy")
BASELINES = ("buy_and_hold", "random", "sma_crossover")
# The low-level SAC keys the options_her phase accepts (its networks come from the source model).
LOW_LEVEL_SAC_KEYS = (
    "learning_rate",
    "buffer_size",
    "learning_starts",
    "batch_size",
    "tau",
    "gamma",
    "train_freq",
    "gradient_steps",
    "ent_coef",
)
HER_LEARNING_STARTS = 600  # > one 500-bar training episode: HER samples finished episodes only


def _single_threaded_call(fn, kwargs):
    import torch

    torch.set_num_threads(1)
    return fn(**kwargs)


class ProcessExecutor(Executor):
    """``run_walk_forward``'s executor over local processes (one torch thread each), for machines
    without Ray."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def share(self, value):
        return value

    def map(self, fn, kwargs_list, on_result=None, *, others_may_compute=False):
        """Outside Kedro's runners: no node waits here for another to compute (``others_may_compute``)."""
        with ProcessPoolExecutor(max_workers=self.jobs) as pool:
            results = list(pool.map(_single_threaded_call, [fn] * len(kwargs_list), kwargs_list))
        for index, result in enumerate(results if on_result is not None else []):
            on_result(index, result)
        return results


def agent_parameters(params: dict) -> dict:
    """``agent_params`` for ``run_walk_forward``: the sac_icm agent section, and the hierarchical and
    shaped agents' ``{"source", "phase"}`` sections built from it and the options_her and
    reward_shaper phases."""
    from trading_rl.algorithms.options_her.from_spec import OptionsHerParams
    from trading_rl.phases.walk_forward import agent_section
    from trading_rl.rewards.shaped_training import RewardShaperParams
    from trading_rl.training.params import AgentParams

    agent = AgentParams.from_mapping(params["sac_icm"]["agent"], "sac_icm.agent")
    source = agent_section("sac_icm", {"sac_icm": agent}, params["walk_forward"].get("agent_overrides") or {})
    phase = {key: value for key, value in params["options_her"].items() if key not in ("device",)}
    phase["sac"] = {key: value for key, value in source.sac.to_dict().items() if key in LOW_LEVEL_SAC_KEYS}
    phase["sac"]["learning_starts"] = max(int(phase["sac"].get("learning_starts", 0)), HER_LEARNING_STARTS)
    shaper = {key: value for key, value in params["reward_shaper"].items() if key not in ("device", "resume_dir")}
    return {
        "sac_icm": agent,
        "options": {"source": source, "phase": OptionsHerParams.from_mapping(phase, "options_her")},
        "shaped": {"source": source, "phase": RewardShaperParams.from_mapping(shaper, "reward_shaper")},
    }


def summarise(folds: pd.DataFrame, pairs: list[tuple[str, str]]) -> dict:
    """Per-agent medians with intervals, baselines on the same windows, and paired differences."""
    from trading_rl.evaluation.metrics.bootstrap import bootstrap_ci, difference_ci
    from trading_rl.evaluation.metrics.metrics import window_sharpes
    from trading_rl.monitoring.collapse import trading_flags

    agents = folds[folds["kind"] == "agent"].copy()
    agents["fill_rate"] = agents["fill_rate"].astype(float)
    # One Sharpe convention (docs/protocol.md): a window without a fill counts as Sharpe 0.
    agents["sharpe"] = window_sharpes(agents["sharpe"])
    rows = []
    for agent, group in agents.groupby("agent", sort=False):
        row = {"agent": agent, "windows": len(group), "trading_share": float(np.mean(trading_flags(group["trades"])))}
        for metric in MEASURED:
            point, low, high = bootstrap_ci(group[metric].astype(float))
            row[metric] = point
            row[f"{metric}_ci"] = [low, high]
        rows.append(row)
    baselines = folds[folds["agent"].isin(BASELINES)]
    baseline_rows = [
        {
            "baseline": name,
            **{
                metric: float(group[metric].astype(float).median())
                for metric in ("sharpe", "total_return", "max_drawdown")
            },
        }
        for name, group in baselines.groupby("agent", sort=False)
    ]
    keys = ["symbol", "fold", "seed"]
    differences = []
    for treatment, control in pairs:
        a = agents[agents["agent"] == treatment].set_index(keys)
        b = agents[agents["agent"] == control].set_index(keys)
        common = a.index.intersection(b.index)
        entry = {"pair": f"{treatment} - {control}", "windows": len(common), "paired_on": "windows and seeds"}
        for metric in MEASURED:
            point, low, high = difference_ci(a.loc[common, metric].astype(float), b.loc[common, metric].astype(float))
            entry[metric] = point
            entry[f"{metric}_ci"] = [low, high]
            entry[f"{metric}_beyond_noise"] = bool(low > 0 or high < 0)
        differences.append(entry)
    # Each agent against capped buy-and-hold on the same (symbol, fold) windows.
    market = baselines[baselines["agent"] == "buy_and_hold"].set_index(["symbol", "fold"])["sharpe"].astype(float)
    versus_market = []
    for agent, group in agents.groupby("agent", sort=False):
        edge = (
            group["sharpe"].astype(float).to_numpy() - market.loc[list(zip(group["symbol"], group["fold"]))].to_numpy()
        )
        point, low, high = bootstrap_ci(edge)
        versus_market.append({"agent": agent, "sharpe_minus_buy_and_hold": point, "ci": [low, high]})
    return {"agents": rows, "baselines": baseline_rows, "pairs": differences, "versus_buy_and_hold": versus_market}


def print_summary(summary: dict) -> None:
    def fmt(row: dict, metric: str) -> str:
        low, high = row[f"{metric}_ci"]
        return f"{row[metric]:+.3f} [{low:+.3f}, {high:+.3f}]"

    print("\nagent        windows trading  Sharpe (median, 90% CI)     fill rate               max drawdown")
    for row in summary["agents"]:
        print(
            f"{row['agent']:<12} {row['windows']:>7} {row['trading_share']:>7.0%}  {fmt(row, 'sharpe'):<27} "
            f"{fmt(row, 'fill_rate'):<23} {fmt(row, 'max_drawdown')}"
        )
    for row in summary["baselines"]:
        print(f"{row['baseline']:<12} Sharpe {row['sharpe']:+.3f}  max drawdown {row['max_drawdown']:+.3f}")
    print("\npaired difference (median over windows, paired on windows and seeds, 90% CI)")
    for row in summary["pairs"]:
        print(
            f"{row['pair']:<24} n={row['windows']:<3} "
            + "  ".join(
                f"{metric} {fmt(row, metric)}{' *' if row[f'{metric}_beyond_noise'] else ''}" for metric in MEASURED
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="base")
    parser.add_argument("--symbols", nargs="+", default=["sp500", "nasdaq"])
    parser.add_argument("--agents", nargs="+", default=["sac_icm", "sac", "options", "options_her"])
    parser.add_argument("--pairs", nargs="*", default=["sac_icm:sac", "options:sac", "options_her:options"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--timesteps", type=int, help="override walk_forward.timesteps")
    parser.add_argument("--finetune-timesteps", type=int, help="override walk_forward.finetune_timesteps")
    parser.add_argument("--max-folds", type=int, help="override walk_forward.max_folds")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--prices", help="folder of <symbol>.parquet (benchmarks/learning_curve.py --dump-prices)")
    parser.add_argument("--ledger", default="data/08_reporting/trial_ledger")
    parser.add_argument("--no-ledger", action="store_true", help="record no trials (dry runs only)")
    parser.add_argument("--commit", help="git commit recorded in the ledger (default: this checkout's)")
    parser.add_argument(
        "--from-json",
        nargs="+",
        help="summarise the folds saved in these --out files together (e.g. one per symbol; no training)",
    )
    parser.add_argument("--out", default="docs/results/ab_walk_forward.json")
    args = parser.parse_args()
    pairs = [tuple(pair.split(":")) for pair in args.pairs]

    if args.from_json:
        folds = pd.concat([pd.DataFrame(json.loads(Path(path).read_text())["folds"]) for path in args.from_json])
        summary = summarise(folds, pairs)
        print_summary(summary)
        Path(args.out).write_text(json.dumps({"sources": args.from_json, "summary": summary}, indent=1, default=str))
        return

    from trading_rl.envs import EnvConfig
    from trading_rl.features.params import FeatureExtractionParams
    from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, run_walk_forward, trial_rows

    params = load_parameters(args.env)
    wf = {**params["walk_forward"], "agents": args.agents, "seeds": args.seeds}
    for key, value in (
        ("timesteps", args.timesteps),
        ("finetune_timesteps", args.finetune_timesteps),
        ("max_folds", args.max_folds),
    ):
        if value is not None:
            wf[key] = value
    prices = {}
    for symbol in args.symbols:
        if args.prices:
            prices[symbol] = pd.read_parquet(Path(args.prices) / f"{symbol}.parquet")
        else:
            from trading_rl.data import load_prices

            prices[symbol] = load_prices(symbol)
    agent_params = agent_parameters(params)
    env_config = params["env_construction"]["env"]
    periods_per_year = {symbol: 252.0 for symbol in args.symbols}
    job = WalkForwardJob(
        FeatureExtractionParams.from_mapping(params["feature_extraction"], "feature_extraction"),
        EnvConfig.from_mapping(env_config),
        periods_per_year,
        agent_params,
        params["seed"],
    )
    section = WalkForwardParams.from_mapping(wf, "walk_forward")
    started = time.perf_counter()
    result = run_walk_forward(prices, section, job, executor=ProcessExecutor(args.jobs))
    seconds = time.perf_counter() - started
    summary = summarise(result.folds, pairs)
    print_summary(summary)
    print(f"\n{seconds:.0f} s on {args.jobs} processes")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "seconds": seconds,
                "jobs": args.jobs,
                "walk_forward": wf,
                "summary": summary,
                "folds": json.loads(result.folds.to_json(orient="records", date_format="iso")),
            },
            indent=1,
            default=str,
        )
    )
    if not args.no_ledger:
        from trading_rl.evaluation.ledger.ledger import append_rows
        from trading_rl.provenance import git_commit

        rows = trial_rows(result.returns, section, job, run={"git_commit": args.commit or git_commit()})
        print(f"trial ledger: {len(rows)} row(s) appended as {append_rows(args.ledger, rows.to_dict('records'))}")


if __name__ == "__main__":
    main()
