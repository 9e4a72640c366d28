"""Shared plumbing of the A/B scripts: inputs from the catalog (or a dumped folder), parallel runs,
the printed table, the JSON file and the trial-ledger rows.

Inputs come from the latest catalog versions of ``env_spec`` and ``sac_icm_model`` and the resolved
parameters of ``--env``. ``--dump-inputs DIR`` writes them to a folder (``env_spec.zip``,
``sac_icm_model.zip``, ``parameters.json``) and ``--inputs DIR`` reads them back, so the same runs
can execute on a machine without the Kedro stack (e.g. a many-core box).

Every variant evaluated is a trial: ``record_trials`` appends one row per variant to the project's
trial ledger (``--ledger``, default ``data/08_reporting/trial_ledger``; ``--no-ledger`` for dry runs
only), so the Deflated Sharpe Ratio of whatever is selected later counts it (docs/protocol.md).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd

from trading_rl.envs import EnvSpec

LEDGER = "data/08_reporting/trial_ledger"  # the catalog's `trial_ledger` folder, from the project root
COMMITTED_LEDGER = "docs/results/trial_ledger"  # the project's committed ledger (docs/protocol.md)
# Per-row details kept in the JSON file but left out of the printed table.
DETAIL_KEYS = (
    "baselines",
    "return_moments",
    "split",
    "test_baselines",
    "test_return_moments",
    "start",
    "end",
    "test_start",
    "test_end",
    "model_sha256",
    "episode_hits",
    "control_episode_hits",
    "achievement_difference_ci",
)


def parse_args(description: str, default_out: str, variants: tuple[str, ...] = ()) -> argparse.Namespace:
    """The A/B scripts' shared options; with ``variants``, also ``--variants`` to run a subset."""
    parser = argparse.ArgumentParser(description=description)
    if variants:
        parser.add_argument(
            "--variants",
            nargs="+",
            choices=variants,
            default=list(variants),
            help="run only these variants (default: all)",
        )
    parser.add_argument("--env", default="base", help="Kedro config env whose parameters are used")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes (1 torch thread each)")
    parser.add_argument("--out", default=default_out)
    parser.add_argument("--inputs", help="read inputs from this folder instead of the Kedro catalog")
    parser.add_argument("--dump-inputs", help="write the catalog inputs to this folder and exit")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="DOTTED.KEY=VALUE",
        help="override one parameter (YAML value), e.g. sac_icm.agent.reward_scale=100",
    )
    parser.add_argument(
        "--ledger", default=LEDGER, help=f"trial ledger folder the variants are appended to (default {LEDGER})"
    )
    parser.add_argument("--no-ledger", action="store_true", help="dry run: record no trials")
    parser.add_argument(
        "--final",
        action="store_true",
        help="also score every trained agent on the test split, once per configuration "
        "(refused when the ledger already holds that test evaluation)",
    )
    parser.add_argument("--allow-repeat", action="store_true", help="with --final: evaluate a spent test split again")
    return parser.parse_args()


def apply_overrides(params: dict, overrides: list[str]) -> dict:
    """Set each ``dotted.key=value`` (value parsed as YAML) in a copy of ``params``."""
    import copy

    import yaml

    params = copy.deepcopy(params)
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep:
            raise SystemExit(f"--param needs KEY=VALUE, got {override!r}")
        *parents, leaf = key.split(".")
        node = params
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    return params


def load_inputs(args: argparse.Namespace) -> tuple[object, dict, bytes | None]:
    """``(env_spec, all parameters, sac_icm_model zip bytes or None)``."""
    if args.inputs:
        folder = Path(args.inputs)
        spec = EnvSpec.from_bytes((folder / "env_spec.zip").read_bytes(), source=str(folder / "env_spec.zip"))
        params = json.loads((folder / "parameters.json").read_text())
        model = folder / "sac_icm_model.zip"
        return spec, apply_overrides(params, args.param), model.read_bytes() if model.exists() else None

    os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
    import io

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(os.getcwd())
    with KedroSession.create(env=args.env) as session:
        context = session.load_context()
        spec = context.catalog.load("env_spec")
        from learning_curve import resolved  # a sibling benchmark, run as a script

        params = resolved(context.params)  # every value, the code's defaults included
        source = None
        if context.catalog.exists("sac_icm_model"):
            buffer = io.BytesIO()
            context.catalog.load("sac_icm_model").save(buffer)
            source = buffer.getvalue()
    if args.dump_inputs:
        folder = Path(args.dump_inputs)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "env_spec.zip").write_bytes(spec.to_bytes())
        (folder / "parameters.json").write_text(json.dumps(params, default=str))
        if source is not None:
            (folder / "sac_icm_model.zip").write_bytes(source)
        raise SystemExit(f"inputs written to {folder}")
    return spec, apply_overrides(params, args.param), source


def run_all(run_one: Callable[..., dict], jobs: list[tuple], n_jobs: int, out: str) -> list[dict]:
    """``run_one(*job)`` for every job, ``n_jobs`` processes at a time; each finished row is appended
    to ``<out>.partial.jsonl`` at once, so a run cut short still leaves its finished rows."""
    partial_path = Path(f"{out}.partial.jsonl")
    partial_path.unlink(missing_ok=True)
    with ProcessPoolExecutor(max_workers=n_jobs) as pool:
        futures = {pool.submit(run_one, *job): index for index, job in enumerate(jobs)}
        rows: list[dict | None] = [None] * len(jobs)
        for future in as_completed(futures):
            rows[futures[future]] = row = future.result()
            with partial_path.open("a") as handle:
                handle.write(json.dumps(row, default=str) + "\n")
            print({k: v for k, v in row.items() if k not in DETAIL_KEYS}, flush=True)
    return rows  # type: ignore[return-value]


def report(rows: list[dict], args: argparse.Namespace, non_numeric: tuple[str, ...] = ()) -> None:
    """Print rows, medians per variant and the baselines; write everything to ``args.out``."""
    table = pd.DataFrame([{k: v for k, v in row.items() if k not in DETAIL_KEYS} for row in rows])
    pd.set_option("display.width", 220)
    print(table.to_string(index=False))
    numeric = (
        table.drop(columns=["seed", *non_numeric])
        .apply(pd.to_numeric, errors="coerce")
        .assign(variant=table["variant"])
    )
    print("\nmedian per variant:")
    print(numeric.groupby("variant").median().to_string())
    print("\nbaselines (evaluation split):")
    for name, metrics in rows[0]["baselines"].items():
        print(
            f"  {name:18s} sharpe={metrics.get('sharpe')} max_drawdown={metrics.get('max_drawdown')} "
            f"total_return={metrics.get('total_return')}"
        )
    with open(args.out, "w") as handle:
        json.dump({"env": args.env, "rows": rows}, handle, indent=2, default=str)


def _trial_configuration(configuration: dict, spec, seeds) -> dict:
    """What a variant's ledger row hashes: its parameters, the symbol, the env config and, as its
    random streams, the seeds."""
    from trading_rl.evaluation.ledger.ledger import STREAMS, identified

    return identified(
        {**configuration, "symbol": spec.symbol, "env": spec.config_data(), STREAMS: {"seeds": sorted(seeds)}}
    )


def check_test_unspent(args: argparse.Namespace, source: str, spec, configurations: dict[str, dict]) -> bool:
    """With ``--final``: stop before any training when a test-split evaluation of one of these
    configurations is recorded (unless ``--allow-repeat``); returns whether this is a repeat. The
    check reads ``--ledger``, the project's ledger and the committed one, whichever ``--ledger``
    says, and ``--no-ledger`` is refused: a look at the test split that is not recorded is a trial no
    later DSR can count. Other ``--seeds`` are another configuration, evaluated and counted."""
    from trading_rl.evaluation.ledger.final import earlier_spends
    from trading_rl.evaluation.ledger.ledger import read_ledgers

    if args.no_ledger:
        raise SystemExit(
            "--final with --no-ledger is refused: every look at the test split is recorded in the trial ledger"
        )
    ledger = read_ledgers(dict.fromkeys([args.ledger, LEDGER, COMMITTED_LEDGER]))
    spent = {
        variant: earlier_spends(ledger, _trial_configuration(configuration, spec, args.seeds))
        for variant, configuration in configurations.items()
    }
    spent = {variant: rows for variant, rows in spent.items() if not rows.empty}
    if spent and not args.allow_repeat:
        raise SystemExit(
            f"the test split was already spent on {sorted(spent)} (first at "
            f"{min(rows['timestamp'].min() for rows in spent.values())}, trial ledger {args.ledger}); "
            "rerun with --allow-repeat to evaluate it again deliberately (the rows record repeat: true)"
        )
    return bool(spent)


def record_trials(
    rows: list[dict],
    args: argparse.Namespace,
    source: str,
    spec,
    configurations: dict[str, dict],
    split: str | None = None,
    repeat: bool = False,
) -> None:
    """Append one trial-ledger row per variant: ``configurations[variant]`` is what defines it
    (hashed), its runs are the seeds, and its return moments are those of the seeds' evaluation
    returns pooled (each row carries ``return_moments`` and ``split``; with ``split="test"`` the
    rows' ``test_return_moments``, and the digests of the evaluated models, ``model_sha256``, as the
    configuration's ``artifact``). The period is that of the evaluated returns (the rows' ``start`` and
    ``end``, or ``test_start``/``test_end``) where the rows carry it, else the split's dates."""
    if args.no_ledger:
        print("--no-ledger: no trials recorded (dry run)")
        return
    from trading_rl.evaluation.ledger.ledger import append_rows, trial_row
    from trading_rl.evaluation.metrics.metrics import pool_moments
    from trading_rl.provenance import git_commit

    run = {"git_commit": git_commit(), "save_version": None}
    prefix = "test_" if split == "test" else ""
    ledger_rows = []
    for variant, configuration in configurations.items():
        runs = [row for row in rows if row["variant"] == variant]
        split = split or runs[0]["split"]
        identity = _trial_configuration(configuration, spec, [row["seed"] for row in runs])
        if split == "test" and all("model_sha256" in row for row in runs):
            identity["artifact"] = {"model_sha256": sorted(row["model_sha256"] for row in runs)}
        starts = [row[f"{prefix}start"] for row in runs if row.get(f"{prefix}start")]
        ends = [row[f"{prefix}end"] for row in runs if row.get(f"{prefix}end")]
        ledger_rows.append(
            trial_row(
                source=source,
                symbol=spec.symbol,
                split=split,
                period_start=min(starts) if starts else spec.splits[split]["start"],
                period_end=max(ends) if ends else spec.splits[split]["end"],
                agent=variant,
                configuration=identity,
                moments=pool_moments([row[f"{prefix}return_moments"] for row in runs]),
                n_runs=len(runs),
                periods_per_year=spec.periods_per_year,
                run=run,
                repeat=repeat,
            )
        )
    print(f"trial ledger: {len(ledger_rows)} row(s) appended as {append_rows(args.ledger, ledger_rows)}")
