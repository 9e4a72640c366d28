"""Monthly scheduled reruns of the forward pipeline on the packaged sp500, simulated by truncating and
extending the price file: a SAC+ICM agent is trained on the file as it stood at 2015-12-31 (splits of
``conf/base``: train to 2012, validation to 2015), the walk-forward of the same configuration runs on
those bars, then the file grows month by month through 2018 and the forward pipeline reruns after each
month (its save version dated at the month's end, as a cron job would stamp it).

Checked and written to ``--output`` (JSON): each rerun's record holds exactly the bars of the file
after the deployment's last bar, each scored once and earlier versions unchanged; the final record
equals an independent evaluation of the same agent over the same bars: the env built as the training
run builds it (the feature_extraction nodes and ``symbol_env_spec`` on the full file, the tracked
bars as one split) and stepped once over the whole span (returns compared bar by bar, must agree to
1e-12); the alerts and drifted features of the last rerun; the time per rerun.

The tracked 2016-2018 bars are the packaged test split: the run is a look at it, so it is recorded
as a test-split spend in the trial ledger (``--ledger``, default the project's; source
``forward_monthly_reruns``; the configuration with the deployed model's weights digest), and a
configuration already spent is refused before anything is trained unless ``--allow-repeat``
(docs/protocol.md).

    python benchmarks/forward_monthly_reruns.py --work-dir /tmp/forward_bench \\
        --output docs/results/forward_monthly_reruns.json --ledger docs/results/trial_ledger
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from kedro.io import DataCatalog
from kedro.io.core import Version
from kedro.runner import SequentialRunner

from trading_rl.data import load_prices
from trading_rl.envs import EnvConstructionParams, symbol_env_spec
from trading_rl.envs.continuous import EnvConfig
from trading_rl.evaluation.ledger.final import ARTIFACT, check_test_split, model_digest
from trading_rl.evaluation.ledger.ledger import STREAMS, append_rows, identified, read_ledgers, trial_row
from trading_rl.evaluation.metrics.metrics import return_moments, sharpe_ratio
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.features import make_splits, max_lookback
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.integration.datasets import SB3ModelDataset
from trading_rl.phases import feature_extraction as fe
from trading_rl.phases.sac_icm import train_sac_icm
from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, identity_params, run_walk_forward
from trading_rl.pipelines.forward import create_pipeline
from trading_rl.provenance import git_commit
from trading_rl.training.params import AgentParams, SacIcmParams

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmarks, run as a script
from learning_curve import load_parameters  # noqa: E402

PROJECT = Path(__file__).resolve().parents[1]
SYMBOL = "sp500"
PERIODS_PER_YEAR = 252.0  # daily bars: the record's Sharpe ratios are annualised alike
DEPLOYED_END = pd.Timestamp("2015-12-31")
MODEL_FILE = "data/06_models/sac_icm_model.zip"
RECORD = "data/07_model_output/forward_record.parquet"
SOURCE = "forward_monthly_reruns"
LEDGER = PROJECT / "data/08_reporting/trial_ledger"
COMMITTED_LEDGER = PROJECT / "docs/results/trial_ledger"


def _base(name: str) -> dict:
    """conf/base's section ``name`` as a run resolves it (every key, code defaults included)."""
    return load_parameters("base")[name]


def _write_prices(root: Path, prices: pd.DataFrame) -> None:
    folder = root / "data/01_raw/prices"
    folder.mkdir(parents=True, exist_ok=True)
    prices.rename_axis("timestamp").to_csv(folder / f"{SYMBOL}.csv")


def _versions(root: Path, relative: str) -> list[Path]:
    return sorted(path / Path(relative).name for path in (root / relative).iterdir())


def deployed_agent(timesteps: int) -> dict:
    """conf/base's sac_icm agent with the walk-forward's budget settings and ``timesteps``."""
    agent = _base("sac_icm")["agent"]
    for section, values in _base("walk_forward")["agent_overrides"].items():
        agent = {**agent, section: {**agent.get(section, {}), **values}}
    agent["training"] = {
        **agent["training"],
        "total_timesteps": timesteps,
        "eval_freq": timesteps,
        "resume_every": timesteps,
    }
    return agent


def spend_configuration(timesteps: int, seed: int) -> dict:
    """What this run spends the test split on (before the weights' digest is known): the deployed
    agent's parameters as they act, the env, the deployment cut-off and the seed."""
    return identified(
        {
            "agent": "sac_icm",
            "agent_params": identity_params("sac_icm", AgentParams.from_mapping(deployed_agent(timesteps))),
            "symbol": SYMBOL,
            "env": EnvConfig.from_mapping(_base("env_construction")["env"], "env_construction.env").identity(),
            "deployed_through": str(DEPLOYED_END.date()),
            STREAMS: {"seed": seed},
        }
    )


def store_uri(root: Path) -> str:
    """The MLflow store of a work folder (its registry holds the deployed version)."""
    return f"sqlite:///{root.resolve() / 'mlflow.db'}"


def promote_saved_model(uri: str, save_version: str, registered_model: str = "trading_rl_sac_icm") -> int:
    """Register the model saved as ``sac_icm_model`` version ``save_version`` with passing gate
    verdicts (as a run whose gates passed would) and promote it to ``@champion`` through the
    project's promotion; returns the registry version."""
    import mlflow

    from trading_rl.integration.model_registry import CHAMPION, apply_promotion, promotion, registry_versions

    client = mlflow.MlflowClient(uri, uri)
    if not client.search_registered_models(f"name='{registered_model}'"):
        client.create_registered_model(registered_model)
    tags = {"save_version": save_version, "dataset": "sac_icm_model", "gate.validation_report": "passed"}
    client.create_model_version(registered_model, f"{MODEL_FILE}/{save_version}", tags=tags)
    registry = registry_versions(client, registered_model)
    decision = promotion(registered_model, registry["versions"], None, CHAMPION, by="benchmark", at=save_version)
    apply_promotion(client, decision, None)
    return int(decision["version"])


def deploy(root: Path, prices: pd.DataFrame, timesteps: int, seed: int) -> tuple[dict, dict, dict, dict, dict]:
    """Train as the default run's phases do on the file cut at 2015-12-31; the splits are conf/base's
    train and validation dates (the file has no test split yet: it ends with the validation split)."""
    feature_params = {**_base("feature_extraction"), "symbols": [{"name": SYMBOL, "source": "file"}]}
    raw = {SYMBOL: lambda: load_prices(SYMBOL, source="file", path=root / f"data/01_raw/prices/{SYMBOL}.csv")}
    section = FeatureExtractionParams.from_mapping(feature_params, "feature_extraction")
    frame = fe.load_and_validate_prices(raw, section)
    full_index = load_prices(SYMBOL, source="packaged").index
    splits = make_splits(full_index, {**feature_params["splits"], "gap_bars": max_lookback(section.features)})
    splits = {SYMBOL: {name: bounds for name, bounds in splits.items() if name != "test"}}
    fitted = fe.fit_feature_params(frame, splits, section)
    features = fe.build_features(frame, fitted)
    scalers = fe.fit_scalers(features, frame, splits, section)
    env_params = {**_base("env_construction"), "symbol": SYMBOL}
    spec = symbol_env_spec(
        frame,
        fe.scale_features(features, scalers),
        splits,
        EnvConstructionParams.from_mapping(env_params, "env_construction"),
        scalers,
    )
    agent = deployed_agent(timesteps)
    params = {
        "agent": agent,
        "evaluation_split": "validation",
        "device": "cpu",
        "progress_bar": False,
        "resume_dir": str(root / "resume"),
    }
    version = "2015-12-31T23.00.00.000Z"
    model, _, _ = train_sac_icm(
        spec, SacIcmParams.from_mapping(params), seed, {"save_version": version, "seed": seed}, fitted
    )
    SB3ModelDataset(
        str(root / MODEL_FILE),
        "trading_rl.algorithms.sac_icm.sac_icm.SACWithICM",
        device="cpu",
        version=Version(None, version),
    ).save(model)
    promote_saved_model(store_uri(root), version)
    return feature_params, env_params, {"sac_icm": agent}, fitted, scalers


def walk_forward_folds(
    prices: pd.DataFrame, feature_params: dict, env_params: dict, agent: dict, seed: int, budget: dict
) -> pd.DataFrame:
    """The walk-forward of the same configuration on the bars the deployment had (its reference):
    conf/base's folds and retraining, with ``budget`` (timesteps, finetune_timesteps, seeds)."""
    params = {**_base("walk_forward"), "data_end": "all", "device": "cpu", "agents": ["sac_icm"], **budget}
    env_config = env_params["env"]
    job = WalkForwardJob(
        FeatureExtractionParams.from_mapping(feature_params, "feature_extraction"),
        EnvConfig.from_mapping(env_config),
        {SYMBOL: 252.0},
        {"sac_icm": AgentParams.from_mapping(agent["sac_icm"], "sac_icm.agent")},
        seed,
    )
    result = run_walk_forward({SYMBOL: prices}, WalkForwardParams.from_mapping(params), job)
    return result.folds


def run_forward(
    root: Path,
    save_version: str,
    parameters: dict,
    folds: pd.DataFrame,
    seed: int,
    load_versions: dict[str, str] | None = None,
) -> DataCatalog:
    """One scheduled ``kedro run --pipelines forward``: the project's catalog entries for it
    (conf/base) with every file under ``root``, ``parameters`` as its ``params:`` inputs and
    ``folds`` as the walk-forward reference (also used by tests/pipelines/forward);
    ``load_versions`` as ``--load-versions`` gives them."""
    config = yaml.safe_load((PROJECT / "conf/base/catalog_forward.yml").read_text())
    config["prior_trial_ledger"] = yaml.safe_load((PROJECT / "conf/base/catalog_ledger.yml").read_text())[
        "prior_trial_ledger"
    ]
    config["raw_price_files"] = {
        "type": "trading_rl.integration.datasets.RawPriceFilesDataset",
        "path": "data/01_raw/prices",
    }
    for entry in config.values():
        for key in ("filepath", "path"):
            if key in entry:
                entry[key] = str(root / entry[key])
    config["deployed_model"]["device"] = "cpu"
    config["forward_metrics"] = {"type": "MemoryDataset"}  # no MLflow run outside a Kedro session
    import mlflow

    mlflow.set_tracking_uri(store_uri(root))  # the registry that names the deployed version
    catalog = DataCatalog.from_config(config, load_versions=load_versions, save_version=save_version)
    # the alerts file under root too, unless the caller configures alerting itself
    alerting = {"channels": {"jsonl": str(root / "data/08_reporting/alerts/alerts.jsonl")}}
    for key, value in {"alerting": alerting, **parameters, "seed": seed}.items():
        catalog[f"params:{key}"] = value
    catalog["run_metadata"] = {"seed": seed, "save_version": save_version}
    catalog["walk_forward_folds"] = folds
    SequentialRunner().run(create_pipeline(), catalog)
    return catalog


def rerun(root: Path, save_version: str, feature_params: dict, folds: pd.DataFrame, seed: int) -> None:
    """One monthly rerun with conf/base's forward, regime and tearsheet parameters."""
    parameters = {
        "feature_extraction": feature_params,
        "forward": _base("forward"),
        "regime_validation": _base("regime_validation"),
        "tearsheet": _base("tearsheet"),
    }
    run_forward(root, save_version, parameters, folds, seed)


def independent_evaluation(
    model, prices: pd.DataFrame, feature_params: dict, fitted: dict, scalers: dict, env_params: dict
) -> pd.DataFrame:
    """The agent stepped once over every tracked bar by an env built as the training run builds one
    (feature_extraction's nodes and ``symbol_env_spec``, the deployment's fitted features and scaler),
    the tracked bars as a split of their own: not the forward pipeline's ``forward_data``/``replay``."""
    raw = {SYMBOL: lambda: prices.rename_axis("timestamp")}
    frame = fe.load_and_validate_prices(raw, FeatureExtractionParams.from_mapping(feature_params, "feature_extraction"))
    scaled = fe.scale_features(fe.build_features(frame, fitted), scalers)
    tracked = {"start": DEPLOYED_END.isoformat(), "end": prices.index[-1].isoformat()}
    spec = symbol_env_spec(
        frame,
        scaled,
        {SYMBOL: {"tracked": tracked}},
        EnvConstructionParams.from_mapping(env_params, "env_construction"),
        scalers,
    )
    rollout = run_episode(spec.make_env("tracked", evaluation=True), policy_from_sb3(model, deterministic=True))
    rollout["timestamp"] = pd.to_datetime(rollout["timestamp"])
    return rollout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--timesteps", type=int, default=20000, help="deployed agent and walk-forward fold 0")
    parser.add_argument("--finetune-timesteps", type=int, default=2000, help="walk-forward folds 1, 2")
    parser.add_argument("--walk-forward-seeds", type=int, default=1)
    parser.add_argument("--months", type=int, default=None, help="only the first N monthly reruns (a dry run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="where the test-split spend is recorded")
    parser.add_argument("--allow-repeat", action="store_true", help="look at a spent test split again (recorded)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spend = spend_configuration(args.timesteps, args.seed)
    earlier = check_test_split(read_ledgers(dict.fromkeys([args.ledger, LEDGER, COMMITTED_LEDGER])), spend, True)
    if earlier["repeat"] and not args.allow_repeat:
        raise SystemExit(
            "the test split was already spent on this configuration (trial ledger); rerun with --allow-repeat "
            "to look again deliberately (the row records repeat: true)"
        )
    root = args.work_dir
    prices = load_prices(SYMBOL, source="packaged")
    deployed = prices.loc[:DEPLOYED_END]
    _write_prices(root, deployed)
    started = time.perf_counter()
    feature_params, env_params, agent, fitted, scalers = deploy(root, deployed, args.timesteps, args.seed)
    trained = time.perf_counter()
    budget = {
        "timesteps": args.timesteps,
        "finetune_timesteps": args.finetune_timesteps,
        "seeds": args.walk_forward_seeds,
    }
    folds = walk_forward_folds(deployed, feature_params, env_params, agent, args.seed, budget)
    validated = time.perf_counter()

    month_ends = [day for day in prices.loc[DEPLOYED_END:].index[1:].to_series().groupby(pd.Grouper(freq="ME")).max()]
    reruns, digests = [], {}
    for month_end in month_ends[: args.months]:
        _write_prices(root, prices.loc[:month_end])
        version = f"{month_end:%Y-%m-%d}T23.00.00.000Z"
        tick = time.perf_counter()
        rerun(root, version, feature_params, folds, args.seed)
        record_path = _versions(root, RECORD)[-1]
        record = pd.read_parquet(record_path)
        expected = prices.loc[DEPLOYED_END:month_end].index[1:]
        assert list(record["timestamp"]) == list(expected), f"{version}: the record is not the file's forward bars"
        for path, digest in digests.items():
            assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, f"{path} changed"
        digests[str(record_path)] = hashlib.sha256(record_path.read_bytes()).hexdigest()
        reruns.append(
            {
                "version": version,
                "bars": len(record),
                "new_bars": int((record["scored_in"] == version).sum()),
                "seconds": round(time.perf_counter() - tick, 2),
            }
        )
        print(reruns[-1], flush=True)

    record = pd.read_parquet(_versions(root, RECORD)[-1])
    model = SB3ModelDataset(
        str(_versions(root, MODEL_FILE)[0]), "trading_rl.algorithms.sac_icm.sac_icm.SACWithICM", device="cpu"
    ).load()
    tracked = prices.loc[: month_ends[: args.months][-1]]
    single = independent_evaluation(model, tracked, feature_params, fitted, scalers, env_params)
    assert list(single["timestamp"]) == list(record["timestamp"]), "the independent evaluation's bars differ"
    alerts = json.loads(_versions(root, "data/08_reporting/forward/forward_alerts.json")[-1].read_text())
    drift = json.loads(_versions(root, "data/08_reporting/forward/forward_drift.json")[-1].read_text())
    report = json.loads(_versions(root, "data/08_reporting/forward/forward_report.json")[-1].read_text())
    agents = folds[(folds["kind"] == "agent")]
    result = {
        "deployed_through": str(DEPLOYED_END.date()),
        "budget": {"deployed_timesteps": args.timesteps, "walk_forward": budget},
        "reruns": len(reruns),
        "record_bars": len(record),
        "first_bar": str(record["timestamp"].iloc[0].date()),
        "last_bar": str(record["timestamp"].iloc[-1].date()),
        "new_bars_per_rerun_sum": sum(r["new_bars"] for r in reruns),
        "record_sharpe": sharpe_ratio(record["return"], PERIODS_PER_YEAR),
        "independent_evaluation": "env built by feature_extraction + symbol_env_spec, stepped once over the span",
        "single_evaluation_sharpe": sharpe_ratio(single["return"], PERIODS_PER_YEAR),
        "max_return_difference": float((record["return"] - single["return"]).abs().max()),
        "sharpe_difference": abs(
            sharpe_ratio(record["return"], PERIODS_PER_YEAR) - sharpe_ratio(single["return"], PERIODS_PER_YEAR)
        ),
        "returns_bit_identical": bool((record["return"].to_numpy() == single["return"].to_numpy()).all()),
        "forward_metrics": {k: report["metrics"][k] for k in ("sharpe", "total_return", "max_drawdown", "n_trades")},
        "buy_and_hold_capped": {
            k: report["baselines"]["buy_and_hold"][k] for k in ("sharpe", "total_return", "max_drawdown")
        },
        "walk_forward_windows": {
            "sharpe": agents["sharpe"].tolist(),
            "max_drawdown": agents["max_drawdown"].tolist(),
            "fill_rate": agents["fill_rate"].tolist(),
        },
        "last_alerts": alerts["alerts"],
        "last_checks": {
            c["check"]: {"value": c["value"], "expected": c["expected"], "status": c["status"]}
            for c in alerts["checks"]
        },
        "last_drifted_features": drift["drifted_features"],
        "seconds": {
            "train": round(trained - started, 1),
            "walk_forward": round(validated - trained, 1),
            "rerun_median": sorted(r["seconds"] for r in reruns)[len(reruns) // 2],
            "rerun_max": max(r["seconds"] for r in reruns),
        },
        "per_rerun": reruns,
    }
    row = trial_row(
        source=SOURCE,
        symbol=SYMBOL,
        split="test",
        period_start=record["timestamp"].iloc[0],
        period_end=record["timestamp"].iloc[-1],
        agent="sac_icm",
        configuration={**spend, ARTIFACT: {"model_sha256": model_digest(model)}},
        moments=return_moments(record["return"].to_numpy()),
        n_runs=1,
        periods_per_year=252.0,
        run={"git_commit": git_commit()},
        repeat=earlier["repeat"],
    )
    result["ledger_file"] = str(append_rows(args.ledger, [row]))
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    assert result["max_return_difference"] < 1e-12 and result["new_bars_per_rerun_sum"] == len(record)
    print(json.dumps({k: v for k, v in result.items() if k != "per_rerun"}, indent=2))


if __name__ == "__main__":
    main()
