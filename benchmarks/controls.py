"""Positive and negative controls: can the learner take an edge that is known to be there?

    python benchmarks/controls.py --seeds 5 --markets fast:0.3 slow:0.3 vol:0.1 null:0 \\
        --variant "smooth1 env.smoothing_window=1"

Each market is a planted-edge synthetic symbol (``data.synthetic``: family and strength) run through
the walk-forward's own code path (``run_walk_forward``: rolling windows, fold-wise features and
scalers, retrain + fine-tune chains, baselines and the market's **oracle** on the same test env and
costs). Per market and seed, the agent's stitched out-of-sample series is attributed against the
market line (``evaluation.metrics.attribution``); reported:

- ``capture``: the agent's information ratio over the oracle's on the same windows (the oracle
  that respects the env's shorting rule; a long-only agent is compared with the long-only oracle);
- the agent's Sharpe and the oracle's, alpha's t-statistic, and the ``skill`` gate (alpha's 90%
  lower bound > 0) per seed;
- per market: median and smallest capture over seeds, skill pass count; on ``null`` markets the
  skill gate's pass rate is the **false-positive rate**.

The issue's bar (docs/controls.md): on each family's strongest market, median capture >= 0.5, no seed
below 0.25, skill passes in >= 4 of 5 seeds; on null the skill gate passes in <= 10% of runs.

``--variant "NAME key=value ..."`` runs a lever as a second arm with the same windows and the same
seeds (common random numbers per fold x seed): keys ``env.*`` override ``env_construction.env``,
``agent.*`` override ``walk_forward.agent_overrides`` (``agent.sac.gamma=0.9``), ``wf.*`` the
walk-forward section. Paired per-seed differences of capture come with a bootstrap 90% interval.
Every arm x market is one trial-ledger row (``source: controls``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_walk_forward import ProcessExecutor  # noqa: E402
from learning_curve import load_parameters  # noqa: E402

# Each family's strengths, weakest to strongest; the strongest one's oracle Sharpe after costs is
# >= 2 on the default env (docs/controls.md has the calibration).
DEFAULT_MARKETS = ("null:0", "fast:0.1", "fast:0.2", "fast:0.3", "slow:0.1", "slow:0.2", "slow:0.3")
ORACLE_FOR_LONG_ONLY, ORACLE_FOR_SHORTING = "oracle", "oracle_short"
CAPTURE_BAR, SEED_FLOOR, SKILL_SEEDS, NULL_FALSE_POSITIVE = 0.5, 0.25, 0.8, 0.10


def market_entry(text: str, n_bars: int, market_seed: int, drift: dict[str, float]) -> dict:
    """``"family:strength"`` -> a ``feature_extraction.symbols`` entry of a synthetic symbol."""
    family, _, strength = text.partition(":")
    market = {"family": family, "strength": float(strength or 0), "n_bars": n_bars, "seed": market_seed}
    if family in drift:
        market["drift"] = drift[family]
    return {"name": f"{family}_{float(strength or 0):g}", "source": "synthetic", "market": market}


def parse_variant(text: str) -> tuple[str, dict[str, dict]]:
    """``"NAME env.k=v agent.sac.k=v wf.k=v"`` -> ``(NAME, {"env": {...}, "agent": {...}, "wf": {...}})``."""
    name, *pairs = text.split()
    overrides: dict[str, dict] = {"env": {}, "agent": {}, "wf": {}}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        scope, _, rest = key.partition(".")
        if not sep or scope not in overrides or not rest:
            raise SystemExit(f"--variant {name!r}: expected env.KEY=V, agent.SECTION.KEY=V or wf.KEY=V, got {pair!r}")
        target = overrides[scope]
        *parents, leaf = rest.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = yaml.safe_load(raw)
    return name, overrides


def merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def market_rows(result, arm: str, env_config: dict, periods_per_year: float) -> list[dict]:
    """One row per symbol x seed: the agent's stitched attribution next to the oracle's."""
    from trading_rl.envs import EnvConfig
    from trading_rl.evaluation.metrics.attribution import env_cost_rate
    from trading_rl.evaluation.validation.folds import stitch_out_of_sample, stitched_attribution

    config = EnvConfig.from_mapping(env_config)
    cost_rate = env_cost_rate(config)
    oracle_name = ORACLE_FOR_SHORTING if config.allow_short else ORACLE_FOR_LONG_ONLY
    stitched = stitch_out_of_sample(result.returns)
    rows = []
    for symbol, curves in stitched.groupby("symbol", sort=False):
        edge = not str(symbol).startswith("null")  # a null market has no edge to capture
        [oracle] = stitched_attribution(curves[curves["agent"] == oracle_name], periods_per_year, cost_rate)
        [passive] = stitched_attribution(curves[curves["agent"] == "buy_and_hold"], periods_per_year, cost_rate)
        agents = curves[curves["kind"] == "agent"]
        for seed, attribution in zip(
            sorted(agents["seed"].unique()), stitched_attribution(agents, periods_per_year, cost_rate)
        ):
            rows.append(
                {
                    "arm": arm,
                    "symbol": symbol,
                    "family": symbol.split("_")[0],
                    "seed": int(seed),
                    "n_steps": attribution.n,
                    "agent_sharpe": attribution.sharpe,
                    "agent_ir": attribution.information_ratio,
                    "agent_alpha_t": attribution.alpha_t,
                    "agent_beta": attribution.beta,
                    "agent_mean_exposure": attribution.mean_exposure,
                    "agent_timing_corr": attribution.timing_corr,
                    "skill": bool(attribution.alpha_ci90_low > 0),
                    "agent_alpha": attribution.alpha_annual,
                    "oracle_sharpe": oracle.sharpe,
                    "oracle_ir": oracle.information_ratio,
                    "oracle_alpha": oracle.alpha_annual,
                    "buy_and_hold_sharpe": passive.sharpe,
                    "buy_and_hold_ir": passive.information_ratio,
                    "capture": ratio(attribution.information_ratio, oracle.information_ratio, edge),
                    "capture_alpha": ratio(attribution.alpha_annual, oracle.alpha_annual, edge),
                    # What holding the capped index earns on this yardstick: near-passive series have
                    # tiny residuals, so on trending markets their IR alone can look like skill.
                    "buy_and_hold_capture": ratio(passive.information_ratio, oracle.information_ratio, edge),
                }
            )
    return rows


def ratio(value: float, oracle: float, edge: bool = True) -> float:
    """``value / oracle`` on a market with an edge the oracle takes (positive), else NaN."""
    return value / oracle if edge and oracle > 0 else float("nan")


def bootstrap_median_ci(values: np.ndarray, rng: np.random.Generator, draws: int = 4000) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if values.size < 2:
        return float("nan"), float("nan")
    medians = np.median(rng.choice(values, size=(draws, values.size), replace=True), axis=1)
    low, high = np.quantile(medians, [0.05, 0.95])
    return float(low), float(high)


def summarise(rows: pd.DataFrame, arms: list[str]) -> dict:
    """Per arm x market: capture (median [90% CI], min), skill passes, Sharpe vs oracle; verdicts;
    per variant arm, the paired (same market, same seed) capture difference against the first arm."""
    rng = np.random.default_rng(0)
    markets = []
    for (arm, symbol), group in rows.groupby(["arm", "symbol"], sort=False):
        capture = group["capture"].to_numpy(dtype=float)
        low, high = bootstrap_median_ci(capture, rng)
        markets.append(
            {
                "arm": arm,
                "symbol": symbol,
                "family": group["family"].iloc[0],
                "seeds": len(group),
                "oracle_sharpe": float(group["oracle_sharpe"].iloc[0]),
                "oracle_ir": float(group["oracle_ir"].iloc[0]),
                "buy_and_hold_sharpe": float(group["buy_and_hold_sharpe"].iloc[0]),
                "agent_sharpe_median": float(group["agent_sharpe"].median()),
                "agent_ir_median": float(group["agent_ir"].median()),
                "agent_alpha_t_median": float(group["agent_alpha_t"].median()),
                "agent_exposure_median": float(group["agent_mean_exposure"].median()),
                "capture_median": float(np.nanmedian(capture)) if np.isfinite(capture).any() else None,
                "capture_ci90": [low, high],
                "capture_min": float(np.nanmin(capture)) if np.isfinite(capture).any() else None,
                "capture_alpha_median": float(group["capture_alpha"].median()),
                "buy_and_hold_capture": float(group["buy_and_hold_capture"].iloc[0]),
                "skill_passes": int(group["skill"].sum()),
            }
        )
    table = pd.DataFrame(markets)
    verdicts = {}
    for arm in arms:
        mine = table[table["arm"] == arm]
        edge = mine[mine["family"] != "null"]
        strongest = edge.loc[edge.groupby("family")["oracle_sharpe"].idxmax()] if len(edge) else edge
        null = rows[(rows["arm"] == arm) & (rows["family"] == "null")]
        verdicts[arm] = {
            "strongest": {
                row["symbol"]: bool(
                    (row["capture_median"] or -np.inf) >= CAPTURE_BAR
                    and (row["capture_min"] or -np.inf) >= SEED_FLOOR
                    and row["skill_passes"] >= SKILL_SEEDS * row["seeds"]
                )
                for _, row in strongest.iterrows()
            },
            "null_false_positive_rate": float(null["skill"].mean()) if len(null) else None,
        }
    paired = []
    for arm in arms[1:]:
        joined = rows[rows["arm"] == arms[0]].merge(
            rows[rows["arm"] == arm], on=["symbol", "seed"], suffixes=("_a", "_b")
        )
        for symbol, group in joined.groupby("symbol", sort=False):
            difference = (group["capture_b"] - group["capture_a"]).to_numpy(dtype=float)
            low, high = bootstrap_median_ci(difference, rng)
            finite = difference[np.isfinite(difference)]
            paired.append(
                {
                    "arm": arm,
                    "against": arms[0],
                    "symbol": symbol,
                    "capture_difference_median": float(np.median(finite)) if finite.size else None,
                    "ci90": [low, high],
                    "pairs": int(finite.size),
                }
            )
    return {"markets": markets, "verdicts": verdicts, "paired_capture_differences": paired}


def null_false_positives(markets: int, n_bars: int, wf: dict, feature_params: dict, env_config: dict) -> dict:
    """The skill gate on ``markets`` null markets (market seeds 1..markets) for the policies that
    need no training (random, SMA crossover, capped buy-and-hold, the oracle: the buy-and-hold of a
    drift), through the walk-forward's fold tasks (``prepare_fold``) on every window: the share of
    markets whose stitched alpha's 90% lower bound is > 0 is the gate's false-positive rate."""
    from trading_rl.data.frames import by_symbol
    from trading_rl.data.selection import load_validated_prices
    from trading_rl.envs import EnvConfig
    from trading_rl.evaluation.metrics.attribution import env_cost_rate, return_attribution, rollout_exposure
    from trading_rl.evaluation.metrics.baselines import MARKET
    from trading_rl.evaluation.validation.folds import development_prices
    from trading_rl.features.params import FeatureExtractionParams
    from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, folds_of, prepare_fold

    policies = ("random", "sma_crossover", "buy_and_hold", ORACLE_FOR_LONG_ONLY)
    cost_rate = env_cost_rate(EnvConfig.from_mapping(env_config))
    passes: dict[str, list[bool]] = {name: [] for name in policies}
    for market_seed in range(1, markets + 1):
        entry = market_entry("null:0", n_bars, market_seed, {})
        params = {**feature_params, "symbols": [entry]}
        section = FeatureExtractionParams.from_mapping(params, "feature_extraction")
        prices = development_prices(
            by_symbol(load_validated_prices(section.symbols, {}, 250))[entry["name"]], "all", section
        )
        config = WalkForwardParams.from_mapping({**wf, "data_end": "all"}, "walk_forward").with_gap(section.features)
        folds = folds_of(prices, config, section.features)
        job = WalkForwardJob(section, EnvConfig.from_mapping(env_config), {entry["name"]: 252.0}, {}, market_seed)
        series: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {name: [] for name in policies}
        for fold in folds:
            _, rollouts = prepare_fold(entry["name"], prices, fold, job)
            market = rollouts[MARKET]["return"].to_numpy()
            for name in policies:
                rollout = rollouts[name]
                series[name].append((rollout["return"].to_numpy(), rollout_exposure(rollout), market))
        for name in policies:
            returns, exposure, market = (np.concatenate(part) for part in zip(*series[name]))
            attribution = return_attribution(returns, exposure, market, periods_per_year=252.0, cost_rate=cost_rate)
            passes[name].append(bool(attribution.alpha_ci90_low > 0))
    return {
        name: {"markets": markets, "passes": int(sum(flags)), "rate": float(np.mean(flags))}
        for name, flags in passes.items()
    }


def print_summary(summary: dict) -> None:
    print(
        f"{'arm':10} {'market':10} {'oracle SR':>9} {'B&H SR':>7} {'agent SR':>8} {'capture':>22} {'min':>6} "
        f"{'skill':>6} {'alpha capt':>10} {'B&H capt':>8}"
    )
    for row in summary["markets"]:
        low, high = row["capture_ci90"]
        capture = row["capture_median"]
        shown = "n/a" if capture is None else f"{capture:.2f} [{low:.2f}, {high:.2f}]"
        minimum = "n/a" if row["capture_min"] is None else f"{row['capture_min']:.2f}"
        print(
            f"{row['arm']:10} {row['symbol']:10} {row['oracle_sharpe']:9.2f} {row['buy_and_hold_sharpe']:7.2f} "
            f"{row['agent_sharpe_median']:8.2f} {shown:>22} {minimum:>6} {row['skill_passes']:>3}/{row['seeds']} "
            f"{row['capture_alpha_median']:10.2f} {row['buy_and_hold_capture']:8.2f}"
        )
    for arm, verdict in summary["verdicts"].items():
        print(
            f"{arm}: strongest markets pass {verdict['strongest']}; "
            f"null false-positive rate {verdict['null_false_positive_rate']}"
        )
    for row in summary["paired_capture_differences"]:
        print(
            f"{row['arm']} - {row['against']} on {row['symbol']}: capture {row['capture_difference_median']} "
            f"[{row['ci90'][0]:.2f}, {row['ci90'][1]:.2f}] (paired on windows and seeds, {row['pairs']} pairs)"
        )


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.DataFrame(summary["markets"])
    figure, axis = plt.subplots(figsize=(8, 5), dpi=110)
    for (arm, family), group in table[table["family"] != "null"].groupby(["arm", "family"]):
        axis.errorbar(
            group["oracle_sharpe"],
            group["capture_median"],
            yerr=[
                group["capture_median"] - group["capture_ci90"].str[0],
                group["capture_ci90"].str[1] - group["capture_median"],
            ],
            marker="o",
            capsize=3,
            label=f"{arm}: {family}",
        )
    axis.axhline(CAPTURE_BAR, color="grey", linestyle="--", linewidth=1, label="bar: 50% of the oracle")
    axis.axhline(0.0, color="black", linewidth=0.8)
    axis.set_xlabel("oracle Sharpe after costs (stitched test windows)")
    axis.set_ylabel("capture: agent IR / oracle IR (median seed, 90% CI)")
    axis.set_title("Planted-edge controls")
    axis.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.tight_layout()
    figure.savefig(path)


def make_executor(engine: str, jobs: int, runtime: dict):
    """The walk-forward executor of ``--engine``: ``process`` spreads chains over ``jobs`` local
    processes; ``population`` trains them as populations, split over ``jobs`` Ray workers (a
    population each, as ``runtime.population.workers``; one in this process when ``jobs`` is 1)
    with ``runtime``'s Ray settings otherwise; ``sequential`` runs them one after another here."""
    from trading_rl.phases.walk_forward import population
    from trading_rl.runtime.engine import RuntimeParams, SequentialExecutor

    if engine == "process":
        return ProcessExecutor(jobs)
    if engine == "sequential":
        return SequentialExecutor()
    ray = {**(runtime.get("ray") or {}), "num_cpus": jobs}
    section = {**runtime, "engine": "population", "ray": ray, "population": {"workers": jobs}}
    return population.make_executor(RuntimeParams.from_mapping(section, "runtime"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="research", help="conf/<env> merged over conf/base (default research)")
    parser.add_argument("--markets", nargs="+", default=list(DEFAULT_MARKETS), help="family:strength ...")
    parser.add_argument("--n-bars", type=int, default=4600, help="bars per market (~13 test windows of 250)")
    parser.add_argument("--market-seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, help="override walk_forward.seeds")
    parser.add_argument("--max-folds", help="override walk_forward.max_folds (an integer or 'all')")
    parser.add_argument("--timesteps", type=int, help="override walk_forward.timesteps")
    parser.add_argument("--finetune-timesteps", type=int, help="override walk_forward.finetune_timesteps")
    parser.add_argument("--variant", action="append", default=[], help='"NAME env.k=v agent.sac.k=v wf.k=v"')
    parser.add_argument("--baseline-name", default="default", help="name of the first arm (the config as it is)")
    parser.add_argument(
        "--skip-default", action="store_true", help="run the variants only (the first is the reference)"
    )
    parser.add_argument("--engine", choices=("process", "population", "sequential"), default="process")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--ledger", default="data/08_reporting/trial_ledger")
    parser.add_argument("--no-ledger", action="store_true", help="record no trials (dry runs only)")
    parser.add_argument("--out", default="docs/results/controls.json")
    parser.add_argument(
        "--null-false-positives",
        type=int,
        metavar="N",
        help="the skill gate's false-positive rate on N null markets for the policies that need no training",
    )
    parser.add_argument(
        "--from-json",
        nargs="+",
        help="summarise the rows of these --out files together (arms in file order; same markets and "
        "seeds pair up across files); no training",
    )
    args = parser.parse_args()

    if args.null_false_positives:
        params = load_parameters(args.env)
        wf = dict(params["walk_forward"])
        if args.max_folds:
            wf["max_folds"] = None if args.max_folds == "all" else int(args.max_folds)
        rates = null_false_positives(
            args.null_false_positives, args.n_bars, wf, params["feature_extraction"], params["env_construction"]["env"]
        )
        print(json.dumps(rates, indent=1))
        record = {"command": shlex.join(sys.argv), "null_false_positives": rates}
        Path(args.out).write_text(json.dumps(record, indent=1))
        return

    if args.from_json:
        table = pd.concat([pd.DataFrame(json.loads(Path(path).read_text())["rows"]) for path in args.from_json])
        summary = summarise(table, list(dict.fromkeys(table["arm"])))
        print_summary(summary)
        out = Path(args.out)
        out.write_text(json.dumps({"sources": args.from_json, "summary": summary}, indent=1, default=str))
        plot(summary, out.with_suffix(".png"))
        return

    from trading_rl.envs import EnvConfig
    from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, run_walk_forward, trial_rows
    from trading_rl.provenance import git_commit
    from trading_rl.training.params import AgentParams

    code = git_commit()  # recorded in the JSON and each ledger row: which code gave these numbers

    params = load_parameters(args.env)
    drift = {"vol": 0.25, "regime_vol": 0.25}  # risk timing needs a drift to time (docs/controls.md)
    entries = [market_entry(text, args.n_bars, args.market_seed, drift) for text in args.markets]
    feature_params = {**params["feature_extraction"], "symbols": entries}
    wf = dict(params["walk_forward"])
    for key, value in (
        ("seeds", args.seeds),
        ("timesteps", args.timesteps),
        ("finetune_timesteps", args.finetune_timesteps),
    ):
        if value is not None:
            wf[key] = value
    if args.max_folds:
        wf["max_folds"] = None if args.max_folds == "all" else int(args.max_folds)
    wf["data_end"] = "all"  # synthetic markets have no test split to protect
    wf["symbols"] = None

    from trading_rl.data.frames import by_symbol
    from trading_rl.data.selection import load_validated_prices
    from trading_rl.features.params import FeatureExtractionParams

    feature_section = FeatureExtractionParams.from_mapping(feature_params, "feature_extraction")
    prices = by_symbol(load_validated_prices(feature_section.symbols, {}, feature_section.min_rows))
    periods_per_year = {name: 252.0 for name in prices}
    arms = [] if args.skip_default else [(args.baseline_name, {"env": {}, "agent": {}, "wf": {}})]
    arms += [parse_variant(text) for text in args.variant]
    if not arms:
        raise SystemExit("--skip-default needs at least one --variant")
    rows: list[dict] = []
    ledger_rows = []
    returns_parts: list[pd.DataFrame] = []
    timings = {}
    for arm, overrides in arms:
        env_config = merged(params["env_construction"]["env"], overrides["env"])
        arm_wf = merged(
            merged(wf, overrides["wf"]), {"agent_overrides": merged(wf["agent_overrides"], overrides["agent"])}
        )
        executor = make_executor(args.engine, args.jobs, params.get("runtime") or {})
        started = time.perf_counter()
        section = WalkForwardParams.from_mapping(arm_wf, "walk_forward")
        job = WalkForwardJob(
            feature_section,
            EnvConfig.from_mapping(env_config),
            periods_per_year,
            {"sac_icm": AgentParams.from_mapping(params["sac_icm"]["agent"], "sac_icm.agent")},
            params["seed"],
        )
        result = run_walk_forward(prices, section, job, executor)
        timings[arm] = time.perf_counter() - started
        print(f"arm {arm}: {timings[arm]:.0f} s", flush=True)
        rows += market_rows(result, arm, env_config, 252.0)
        returns_parts.append(result.returns.assign(arm=arm))
        if not args.no_ledger:
            ledger_rows += trial_rows(result.returns, section, job, {"git_commit": code}, source="controls").to_dict(
                "records"
            )
    table = pd.DataFrame(rows)
    summary = summarise(table, [arm for arm, _ in arms])
    print_summary(summary)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "command": shlex.join(sys.argv),  # quoted: rerunnable as printed
                "git_commit": code,
                "seconds": timings,
                "engine": args.engine,
                "jobs": args.jobs,
                "walk_forward": wf,
                "markets": entries,
                "arms": dict(arms),
                "summary": summary,
                "rows": json.loads(table.to_json(orient="records")),
            },
            indent=1,
            default=str,
        )
    )
    plot(summary, out.with_suffix(".png"))
    # Every test step of every arm (agents, baselines, oracles): re-summarise without training.
    pd.concat(returns_parts, ignore_index=True).to_parquet(out.with_suffix(".returns.parquet"))
    if ledger_rows:
        from trading_rl.evaluation.ledger.ledger import append_rows

        print(f"trial ledger: {len(ledger_rows)} row(s) appended as {append_rows(args.ledger, ledger_rows)}")


if __name__ == "__main__":
    main()
