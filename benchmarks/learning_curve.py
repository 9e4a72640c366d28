"""Out-of-sample learning curve of SAC+ICM on walk-forward folds: how many env steps before the agent
trades, and whether what it learns holds on bars it never saw.

Each run (variant × symbol × fold × seed) trains one agent from scratch on the fold's training
window and, at every budget in ``--budgets``, scores its deterministic policy on the fold's test
window (the same env, costs and baselines as ``walk_forward``). Folds are those of the walk-forward
pipeline with ``data_end: validation``: they end at the validation split's last bar, so choosing a
budget from this curve never looks at the test split.

Reported per variant × budget, over fold × seed runs: median and bootstrap 90% CI of Sharpe, total
return, max drawdown, fill rate (fills / steps) and action entropy; the share of runs that trade
(``monitoring.collapse.trading_verdict``: fill rate >= 2%
and no deterministic collapse gate failed); and capped buy-and-hold,
random and SMA crossover on the same windows.

    python benchmarks/learning_curve.py --jobs 2 \\
        --variant "base" --variant "small policy.net_arch=[64,64] sac.batch_size=64"

Parameters come from ``conf/<--env>/`` YAML (``sac_icm.agent`` with ``walk_forward.agent_overrides``
on top, as the walk-forward trains); ``--prices DIR`` reads ``<symbol>.parquet`` files written with
``--dump-prices DIR`` (a machine without the ``arch`` data or pandera).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from trading_rl.monitoring.collapse import CollapseThresholds
from trading_rl.training.params import AgentParams

PROJECT = Path(__file__).resolve().parents[1]
MEASURED = ("sharpe", "total_return", "max_drawdown", "fill_rate", "action_entropy")
BASELINES = ("buy_and_hold", "random", "sma_crossover")


def load_parameters(env: str) -> dict:
    """The parameters a run in ``env`` uses (``resolved``): ``conf/base`` with ``conf/<env>`` merged
    over it section by section, Kedro's soft merge done by hand so the script also runs where Kedro
    is not installed (a lent GPU box)."""

    def merge(base: dict, over: dict) -> dict:
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        return out

    params: dict = {}
    for folder in ["base"] + ([env] if env != "base" else []):
        for path in sorted((PROJECT / "conf" / folder).glob("parameters*.yml")):
            params = merge(params, yaml.safe_load(path.read_text()) or {})
    return resolved(params)


def resolved(parameters: dict) -> dict:
    """``parameters`` (as conf/ merges them) with every section as a run resolves it, as plain data:
    every key, the code's default where conf/ leaves one out (conf/base states only what differs)."""
    from trading_rl.config import plain
    from trading_rl.integration.parameter_sections import SECTIONS, resolve_parameters

    sections = {name: plain(section) for name, section in resolve_parameters(parameters).items()}
    return {**{key: value for key, value in parameters.items() if key not in SECTIONS}, **sections}


def parse_variant(text: str) -> tuple[str, dict]:
    """``"name key=value ..."`` -> ``(name, {dotted key: YAML value})``."""
    name, *pairs = text.split()
    overrides = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--variant {name!r}: expected key=value, got {pair!r}")
        overrides[key] = yaml.safe_load(raw)
    return name, overrides


def agent_params(params: dict, overrides: dict) -> dict:
    """The walk-forward's agent parameters (sac_icm.agent + agent_overrides) with ``overrides``."""
    from trading_rl.phases.walk_forward import agent_section

    agent = AgentParams.from_mapping(params["sac_icm"]["agent"], "sac_icm.agent")
    merged = agent_section("sac_icm", {"sac_icm": agent}, params["walk_forward"].get("agent_overrides") or {}).to_dict()
    for dotted, value in overrides.items():
        section, key = dotted.split(".", 1)
        merged.setdefault(section, {})[key] = value
    merged.pop("training", None)  # budgets come from --budgets; no periodic evaluation
    return merged


def run_one(
    variant: str,
    params: dict,
    symbol: str,
    prices: pd.DataFrame,
    fold,
    seed_index: int,
    budgets: list[int],
    settings: dict,
) -> list[dict]:
    """Train one agent, scoring it on the fold's test window at every budget."""
    import torch

    torch.set_num_threads(1)
    from stable_baselines3.common.utils import set_random_seed

    from trading_rl.algorithms.sac_icm.sac_icm import build_agent
    from trading_rl.evaluation.metrics.metrics import compute_metrics, return_moments
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
    from trading_rl.evaluation.validation.folds import fold_env_spec
    from trading_rl.monitoring.collapse import trading_verdict
    from trading_rl.seeding import SeedRole, trial_seed

    spec = fold_env_spec(symbol, prices, fold, settings["feature_section"], settings["env_config"], settings["ppy"])
    seed = trial_seed(settings["seed"], SeedRole.WALK_FORWARD_AGENT, 0, seed_index)
    set_random_seed(seed)
    model = build_agent(
        spec.make_env("train", seed=seed), AgentParams.from_mapping(params, "sac_icm.agent"), seed=seed, device="cpu"
    )
    rows, trained, started = [], 0, time.perf_counter()
    for budget in sorted(budgets):
        model.learn(total_timesteps=budget - trained, reset_num_timesteps=trained == 0)
        trained = budget
        rollout = run_episode(spec.make_env("test", evaluation=True), policy_from_sb3(model), seed=seed)
        metrics = compute_metrics(rollout, settings["ppy"], settings["hold_threshold"])
        verdict = trading_verdict(
            rollout["action_raw"], rollout["trade_value"], settings["hold_threshold"], settings["collapse"]
        )
        rows.append(
            {
                "variant": variant,
                "symbol": symbol,
                "fold": fold.index,
                "seed": seed_index,
                "budget": budget,
                "test_start": spec.splits["test"]["start"],
                "test_end": spec.splits["test"]["end"],
                # The evaluated returns' first and last bar: the period the ledger row records.
                "returns_start": str(rollout["timestamp"].iloc[0]),
                "returns_end": str(rollout["timestamp"].iloc[-1]),
                **{
                    key: metrics.get(key)
                    for key in ("sharpe", "total_return", "max_drawdown", "action_entropy", "hold_share", "n_trades")
                },
                **verdict,
                "return_moments": return_moments(rollout["return"].to_numpy()),
                "train_seconds": time.perf_counter() - started,
            }
        )
    return rows


def fold_baselines(symbol: str, prices: pd.DataFrame, fold, settings: dict) -> list[dict]:
    """Metrics of the baselines on the fold's test window (same env and costs as the agents)."""
    from trading_rl.envs import EnvConfig
    from trading_rl.evaluation.metrics.metrics import compute_metrics
    from trading_rl.phases.walk_forward import WalkForwardJob, prepare_fold

    env_config = settings["env_config"]
    job = WalkForwardJob(
        settings["feature_section"],
        EnvConfig.from_mapping(env_config),
        {symbol: settings["ppy"]},
        {},
        settings["seed"],
    )
    _, rollouts = prepare_fold(symbol, prices, fold, job)
    rows = []
    for name in BASELINES:
        metrics = compute_metrics(rollouts[name], settings["ppy"], settings["hold_threshold"])
        rows.append(
            {
                "symbol": symbol,
                "fold": fold.index,
                "baseline": name,
                "fill_rate": metrics["n_trades"] / len(rollouts[name]),
                **{key: metrics.get(key) for key in ("sharpe", "total_return", "max_drawdown", "action_entropy")},
            }
        )
    return rows


def summarise(runs: pd.DataFrame, baselines: pd.DataFrame) -> pd.DataFrame:
    """Median [90% bootstrap CI] of each measure per variant × budget, next to the baselines."""
    from trading_rl.evaluation.metrics.bootstrap import bootstrap_ci, difference_ci
    from trading_rl.evaluation.metrics.metrics import window_sharpes

    rows = []
    for (variant, budget), group in runs.groupby(["variant", "budget"], sort=True):
        row = {
            "variant": variant,
            "budget": int(budget),
            "runs": len(group),
            "trading_share": float(group["trades"].mean()),
            "collapsed_share": float(group["collapsed"].mean()),
        }
        for measure in MEASURED:
            # A never-trading run has no Sharpe: it counts as 0 (no edge), not as missing.
            values = (
                window_sharpes(group[measure])
                if measure == "sharpe"
                else pd.to_numeric(group[measure], errors="coerce").to_numpy()
            )
            point, low, high = bootstrap_ci(values)
            row.update({measure: point, f"{measure}_lo": low, f"{measure}_hi": high})
        # Paired with the baselines of the same window: does the agent beat them, beyond noise?
        for name in ("buy_and_hold", "random"):
            reference = baselines[baselines["baseline"] == name].set_index(["symbol", "fold"])["sharpe"]
            paired = pd.to_numeric(
                reference.reindex(pd.MultiIndex.from_frame(group[["symbol", "fold"]])), errors="coerce"
            )
            point, low, high = difference_ci(window_sharpes(group["sharpe"]), window_sharpes(paired))
            row.update({f"sharpe_minus_{name}": point, f"sharpe_minus_{name}_lo": low, f"sharpe_minus_{name}_hi": high})
        rows.append(row)
    for name, group in baselines.groupby("baseline"):
        row = {
            "variant": f"[{name}]",
            "budget": 0,
            "runs": len(group),
            "trading_share": np.nan,
            "collapsed_share": np.nan,
        }
        for measure in MEASURED:
            point, low, high = bootstrap_ci(pd.to_numeric(group[measure], errors="coerce").fillna(0.0).to_numpy())
            row.update({measure: point, f"{measure}_lo": low, f"{measure}_hi": high})
        rows.append(row)
    return pd.DataFrame(rows)


PAIRED = ("sharpe", "max_drawdown", "fill_rate")
PAIR_KEYS = ["symbol", "fold", "seed"]


def first_stable_budget(runs: pd.DataFrame) -> pd.Series:
    """Per run (variant x symbol x fold x seed), the smallest budget from which it trades at every
    later budget (``inf``: it does not trade at the largest one): the sample-efficiency measure."""

    def stable(group: pd.DataFrame) -> float:
        ordered = group.sort_values("budget")
        trading = ordered["trades"].astype(bool).to_numpy()
        if not trading[-1]:
            return float("inf")
        last_off = np.flatnonzero(~trading)
        return float(ordered["budget"].iloc[last_off[-1] + 1 if len(last_off) else 0])

    return runs.groupby(["variant", *PAIR_KEYS]).apply(stable, include_groups=False)


def compare_variants(runs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Each variant minus ``reference`` on the same (symbol, fold, seed) runs at the same budget:
    median paired difference [90% bootstrap CI] of Sharpe (a never-trading run counts 0), max
    drawdown and fill rate; only complete pairs count."""
    from trading_rl.evaluation.metrics.bootstrap import difference_ci
    from trading_rl.evaluation.metrics.metrics import window_sharpes

    base = runs[runs["variant"] == reference].set_index([*PAIR_KEYS, "budget"])
    rows = []
    for (variant, budget), group in runs[runs["variant"] != reference].groupby(["variant", "budget"], sort=True):
        paired = group.set_index([*PAIR_KEYS, "budget"]).join(base[list(PAIRED)], rsuffix="_ref", how="inner")
        row = {"variant": variant, "reference": reference, "budget": int(budget), "pairs": len(paired)}
        for measure in PAIRED:
            treatment = pd.to_numeric(paired[measure], errors="coerce")
            control = pd.to_numeric(paired[f"{measure}_ref"], errors="coerce")
            if measure == "sharpe":
                treatment, control = pd.Series(window_sharpes(treatment)), pd.Series(window_sharpes(control))
            point, low, high = difference_ci(treatment.to_numpy(), control.to_numpy())
            row.update({measure: point, f"{measure}_lo": low, f"{measure}_hi": high})
        rows.append(row)
    return pd.DataFrame(rows)


def report_comparison(runs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Print the paired differences against ``reference`` and each variant's sample efficiency."""
    comparison = compare_variants(runs, reference)
    print("\npaired on windows and seeds (every variant trains on the same stream per fold and seed)")
    print(f"| variant - {reference} | steps | pairs | " + " | ".join(f"{m} diff" for m in PAIRED) + " |")
    print("|---|---:|---:|" + "---|" * len(PAIRED))
    for row in comparison.to_dict("records"):
        cells = [f"{row[m]:+.3f} [{row[m + '_lo']:+.3f}, {row[m + '_hi']:+.3f}]" for m in PAIRED]
        print(f"| {row['variant']} | {row['budget']} | {row['pairs']} | " + " | ".join(cells) + " |")
    stable = first_stable_budget(runs)
    print("\n| variant | runs | trading from (median budget) | runs trading from each budget |")
    print("|---|---:|---|---|")
    budgets = sorted(runs["budget"].unique())
    for variant, values in stable.groupby(level="variant"):
        median = float(np.median(values))
        shares = ", ".join(f"{int(b)}: {int((values <= b).sum())}" for b in budgets)
        print(f"| {variant} | {len(values)} | {'never' if np.isinf(median) else int(median)} | {shares} |")
    return comparison


def report(runs: pd.DataFrame, baselines: pd.DataFrame, plot_path: str | None) -> pd.DataFrame:
    """Print the summary as a markdown table (median [90% CI]) and draw the plot."""
    summary = summarise(runs, baselines)
    measures = [*MEASURED, "sharpe_minus_buy_and_hold", "sharpe_minus_random"]
    print("| variant | steps | runs | trading | " + " | ".join(measures) + " |")
    print("|---|---:|---:|---:|" + "---|" * len(measures))
    for row in summary.to_dict("records"):
        cells = [
            f"{row[m]:.3f} [{row[m + '_lo']:.3f}, {row[m + '_hi']:.3f}]" if pd.notna(row.get(m)) else ""
            for m in measures
        ]
        trading = "" if pd.isna(row["trading_share"]) else f"{row['trading_share']:.2f}"
        print(f"| {row['variant']} | {row['budget'] or ''} | {row['runs']} | {trading} | " + " | ".join(cells) + " |")
    if plot_path:
        plot(summary, plot_path)
    return summary


def record_trials(runs: pd.DataFrame, variants: dict, params: dict, folder: str) -> None:
    """Every variant x budget is a configuration tried on walk-forward windows: one ledger row per
    symbol, its fold x seed test returns pooled (the deflated Sharpe of anything chosen from this
    curve counts them)."""
    from trading_rl.envs.continuous import EnvConfig
    from trading_rl.evaluation.ledger.ledger import STREAMS, append_rows, trial_row
    from trading_rl.evaluation.metrics.metrics import pool_moments
    from trading_rl.phases.walk_forward import identity_params
    from trading_rl.provenance import git_commit

    rows = []
    for (variant, budget, symbol), group in runs.groupby(["variant", "budget", "symbol"]):
        configuration = {
            "agent": identity_params(
                "sac_icm", AgentParams.from_mapping(agent_params(params, variants[variant]), "sac_icm.agent")
            ),
            "timesteps": int(budget),
            "symbol": symbol,
            "env": EnvConfig.from_mapping(params["env_construction"]["env"], "env_construction.env").identity(),
            "walk_forward": {
                key: params["walk_forward"].get(key)
                for key in ("data_end", "train_length", "test_length", "step", "max_folds")
            },
            "folds": sorted(group["fold"].unique().tolist()),
            STREAMS: {"seeds": sorted(group["seed"].unique().tolist())},
        }
        # Rows of runs from before the returns' bars were kept fall back to the window's bars.
        starts = group["returns_start"] if "returns_start" in group else group["test_start"]
        ends = group["returns_end"] if "returns_end" in group else group["test_end"]
        rows.append(
            trial_row(
                source="learning_curve",
                symbol=symbol,
                split="walk_forward",
                period_start=starts.min(),
                period_end=ends.max(),
                agent=f"sac_icm:{variant}@{budget}",
                configuration=configuration,
                moments=pool_moments(group["return_moments"].tolist()),
                n_runs=len(group),
                periods_per_year=252.0,
                run={"git_commit": git_commit()},
            )
        )
    print(f"trial ledger: {len(rows)} row(s) appended as {append_rows(folder, rows)}")


def plot(summary: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agents = summary[summary["budget"] > 0]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for axis, measure, title in zip(
        axes,
        ("sharpe", "fill_rate", "trading_share"),
        ("out-of-sample Sharpe (median, 90% CI)", "fill rate (median, 90% CI)", "share of runs that trade"),
    ):
        for variant, group in agents.groupby("variant"):
            group = group.sort_values("budget")
            (line,) = axis.plot(group["budget"], group[measure], marker="o", linewidth=2.2, label=variant, zorder=3)
            if f"{measure}_lo" in group:
                axis.fill_between(
                    group["budget"],
                    group[f"{measure}_lo"],
                    group[f"{measure}_hi"],
                    color=line.get_color(),
                    alpha=0.18,
                    zorder=2,
                )
        if measure == "sharpe":
            for name, row in summary[summary["budget"] == 0].set_index("variant").iterrows():
                axis.axhline(
                    row["sharpe"],
                    linestyle="--",
                    linewidth=1.2,
                    label=f"{name} (capped)" if "buy" in name else name,
                    zorder=1,
                    color={"[buy_and_hold]": "black", "[random]": "grey"}.get(name, "tab:brown"),
                )
        axis.axhline(0.0, color="lightgrey", linewidth=0.8, zorder=0)
        axis.set_xscale("log")
        axis.set_xlabel("env steps from scratch")
        axis.set_title(title)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="base")
    parser.add_argument("--symbols", nargs="+", default=["sp500", "nasdaq"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--folds", type=int, default=None, help="most recent folds (default: walk_forward.max_folds)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[2500, 5000, 10000, 20000, 40000])
    parser.add_argument(
        "--variant",
        action="append",
        default=None,
        help='"name dotted.key=value ..." over the walk-forward agent params (repeatable)',
    )
    parser.add_argument(
        "--variant-budgets",
        action="append",
        default=[],
        metavar="NAME=MAX",
        help="cap one variant's budgets (slow variants)",
    )
    parser.add_argument(
        "--variant-folds",
        action="append",
        default=[],
        metavar="NAME=K",
        help="run one variant on the K most recent folds only (slow variants)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument(
        "--paired-first",
        action="store_true",
        help="order runs fold by fold, seed by seed, every variant of a (fold, seed) together",
    )
    parser.add_argument("--reference", help="variant the others are compared with, paired by symbol x fold x seed")
    parser.add_argument("--prices", help="folder of <symbol>.parquet (instead of the packaged data)")
    parser.add_argument("--dump-prices", help="write <symbol>.parquet for --symbols to this folder and exit")
    parser.add_argument(
        "--resume",
        action="append",
        default=[],
        metavar="JSONL",
        help="rows of finished runs (a .partial.jsonl): those runs are not trained again",
    )
    parser.add_argument(
        "--ledger",
        default="data/08_reporting/trial_ledger",
        help="trial ledger folder: one row per variant x budget x symbol is appended",
    )
    parser.add_argument("--no-ledger", action="store_true", help="record no trials (dry runs only)")
    parser.add_argument("--from-json", help="summarise and plot the runs saved in this --out file (no training)")
    parser.add_argument("--out", default="docs/results/learning_curve.json")
    parser.add_argument("--plot", default="docs/results/learning_curve.png")
    args = parser.parse_args()

    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        report(pd.DataFrame(saved["runs"]), pd.DataFrame(saved["baselines"]), args.plot)
        if args.reference:
            report_comparison(pd.DataFrame(saved["runs"]), args.reference)
        return
    if args.dump_prices:
        from trading_rl.data import load_prices, validate_prices

        Path(args.dump_prices).mkdir(parents=True, exist_ok=True)
        for symbol in args.symbols:
            validate_prices(load_prices(symbol), symbol).to_parquet(Path(args.dump_prices) / f"{symbol}.parquet")
        raise SystemExit(f"prices written to {args.dump_prices}")

    from trading_rl.envs import EnvConfig
    from trading_rl.evaluation.validation.folds import development_prices, make_folds, tradable_index
    from trading_rl.features.params import FeatureExtractionParams
    from trading_rl.phases.walk_forward import WalkForwardParams

    params = load_parameters(args.env)
    feature_params = params["feature_extraction"]
    feature_section = FeatureExtractionParams.from_mapping(feature_params, "feature_extraction")
    wf = WalkForwardParams.from_mapping(params["walk_forward"], "walk_forward").with_gap(feature_section.features)
    wf = wf.to_dict()
    env_config = params["env_construction"]["env"]
    variants = [parse_variant(text) for text in (args.variant or ["base"])]
    caps = {name: int(cap) for name, cap in (item.split("=") for item in args.variant_budgets)}
    fold_caps = {name: int(cap) for name, cap in (item.split("=") for item in args.variant_folds)}
    jobs, baseline_jobs = [], []
    for symbol in args.symbols:
        if args.prices:
            prices = pd.read_parquet(Path(args.prices) / f"{symbol}.parquet")
        else:
            from trading_rl.data import load_prices

            prices = load_prices(symbol)
        prices = development_prices(prices, wf["data_end"], feature_section)
        folds = make_folds(
            len(tradable_index(prices, feature_section.features)),
            wf["train_length"],
            wf["test_length"],
            wf["step"],
            wf["gap_bars"],
            1,
            args.folds or wf["max_folds"],
        )
        settings = {
            "feature_params": feature_params,
            "feature_section": feature_section,
            "env_config": env_config,
            "ppy": 252.0,
            "seed": params["seed"],
            "hold_threshold": EnvConfig.from_mapping(env_config).hold_threshold,
            "collapse": CollapseThresholds(
                **{
                    key: params["sac_icm"]["agent"]["collapse"][key]
                    for key in ("dominance_max", "entropy_min", "trade_rate_min")
                }
            ),
        }
        for fold in folds:
            baseline_jobs.append((symbol, prices, fold, settings))
            for name, overrides in variants:
                if fold.index < len(folds) - fold_caps.get(name, len(folds)):
                    continue
                budgets = [b for b in args.budgets if b <= caps.get(name, max(args.budgets))]
                for seed_index in range(args.seeds):
                    jobs.append(
                        (name, agent_params(params, overrides), symbol, prices, fold, seed_index, budgets, settings)
                    )
    run_rows: list[dict] = [json.loads(line) for path in args.resume for line in Path(path).read_text().splitlines()]
    done = {(row["variant"], row["symbol"], row["fold"], row["seed"]) for row in run_rows}
    jobs = [job for job in jobs if (job[0], job[2], job[4].index, job[5]) not in done]
    order = [name for name, _ in variants]
    if args.paired_first:
        # Fold by fold, then seed by seed, every variant of a (fold, seed) together: a run cut short
        # still holds complete paired sets (every seed of the first folds), so variant differences stay
        # matched.
        jobs.sort(key=lambda job: (job[4].index, job[5], order.index(job[0])))
    else:
        # Variants in the order given (put the slowest first), longest budgets first within each.
        jobs.sort(key=lambda job: (order.index(job[0]), -max(job[6])))
    print(f"{len(jobs)} training runs, {len(baseline_jobs)} fold baselines, {args.jobs} processes", flush=True)

    partial = Path(f"{args.out}.partial.jsonl")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        baseline_futures = [pool.submit(fold_baselines, *job) for job in baseline_jobs]
        futures = [pool.submit(run_one, *job) for job in jobs]
        baseline_rows = [row for future in baseline_futures for row in future.result()]
        Path(f"{args.out}.baselines.json").write_text(json.dumps(baseline_rows))
        for future in as_completed(futures):
            rows = future.result()
            run_rows += rows
            with partial.open("a") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
            last = rows[-1]
            print(
                f"[{time.perf_counter() - started:6.0f}s] {last['variant']} {last['symbol']} fold {last['fold']} "
                f"seed {last['seed']}: "
                + ", ".join(
                    f"{r['budget']}: sharpe={r['sharpe']} fills={r['fill_rate']:.3f}{'' if r['trades'] else ' (no)'}"
                    for r in rows
                ),
                flush=True,
            )
    runs, baselines = pd.DataFrame(run_rows), pd.DataFrame(baseline_rows)
    summary = report(runs, baselines, args.plot)
    if args.reference:
        report_comparison(runs, args.reference)
    Path(args.out).write_text(
        json.dumps(
            {
                "env": args.env,
                "symbols": args.symbols,
                "seeds": args.seeds,
                "budgets": args.budgets,
                "variants": dict(variants),
                "wall_seconds": time.perf_counter() - started,
                "jobs": args.jobs,
                "summary": summary.replace({np.nan: None}).to_dict("records"),
                "runs": run_rows,
                "baselines": baseline_rows,
            },
            indent=1,
            default=str,
        )
    )
    if not args.no_ledger:
        record_trials(runs, dict(variants), params, args.ledger)
    partial.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
