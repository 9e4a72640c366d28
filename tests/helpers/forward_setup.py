"""A tiny deployed agent on a synthetic symbol and the forward pipeline's catalog under a root
folder: what the scheduled-rerun tests share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from forward_monthly_reruns import promote_saved_model, run_forward, store_uri
from kedro.io import DataCatalog
from kedro.io.core import Version

from helpers.mlflow_store import empty_store
from helpers.synthetic_prices import ohlcv_frame
from helpers.tiny import tiny_agent
from trading_rl.data import load_prices
from trading_rl.envs import EnvConstructionParams, symbol_env_spec
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.integration.datasets import SB3ModelDataset
from trading_rl.phases import feature_extraction as fe
from trading_rl.phases.sac_icm import train_sac_icm
from trading_rl.training.params import SacIcmParams

PROJECT_ROOT = Path(__file__).resolve().parents[2]

SYMBOL = "SYN"
TRAINED_BARS = 480  # bars the deployed model's run had (date D is the last of them)
FEATURE_EXTRACTION = {
    "symbols": [{"name": SYMBOL, "source": "file"}],
    "min_rows": 250,
    "splits": {"train_end": "2013-01-31", "validation_end": "2013-06-28"},
    "features": {"garch": None, "vol_windows": [20], "sma_windows": [10, 20], "drawdown_window": 20},
    "scaler": {"method": "robust", "clip": 5.0},
}
SECTION = FeatureExtractionParams.from_mapping(FEATURE_EXTRACTION, "feature_extraction")
AGENT = tiny_agent(
    sac={"learning_starts": 50},
    icm={"warmup_steps": 50},
    training={"total_timesteps": 60, "eval_freq": 60, "resume_every": 60},
)
ENV = {"symbol": SYMBOL, "periods_per_year": 252, "env": {"window_size": 5, "episode_length": 100}}
MODEL_DATASET = {
    "filepath": "data/06_models/sac_icm_model.zip",
    "model_class": "trading_rl.algorithms.sac_icm.sac_icm.SACWithICM",
}


def market(n_bars: int, break_at: int | None = None, vol_factor: float = 4.0) -> pd.DataFrame:
    """Bars from one fixed random stream (a longer market extends a shorter one bar for bar); from
    bar ``break_at`` on, returns are ``vol_factor`` times as volatile (a regime break)."""
    rng = np.random.default_rng(19)
    shocks = rng.normal(0.0, 0.01, 1200)
    if break_at is not None:
        shocks[break_at:] *= vol_factor
    close = 100.0 * np.exp(np.cumsum(0.0003 + shocks))[:n_bars]
    open_ = np.r_[100.0, close[:-1]] * (1.0 + rng.normal(0.0, 0.002, 1200)[:n_bars])
    return ohlcv_frame(close, open_, wick=0.003, index_name="date")


def write_prices(root: Path, prices: pd.DataFrame) -> None:
    folder = root / "data/01_raw/prices"
    folder.mkdir(parents=True, exist_ok=True)
    prices.to_csv(folder / f"{SYMBOL}.csv")


def deploy(root: Path, save_version: str, store: str | None = None) -> None:
    """Train the tiny agent on the price file as it is, as the default run's phases do, save it
    as ``sac_icm_model`` version ``save_version`` and promote it to ``trading_rl_sac_icm@champion``
    in the MLflow store ``store`` (the root's own by default)."""
    raw = {SYMBOL: lambda: load_prices(SYMBOL, source="file", path=root / f"data/01_raw/prices/{SYMBOL}.csv")}
    prices = fe.load_and_validate_prices(raw, SECTION)
    splits = fe.define_splits(prices, SECTION)
    feature_params = fe.fit_feature_params(prices, splits, SECTION)
    features = fe.build_features(prices, feature_params)
    scalers = fe.fit_scalers(features, prices, splits, SECTION)
    spec = symbol_env_spec(
        prices,
        fe.scale_features(features, scalers),
        splits,
        EnvConstructionParams.from_mapping(ENV, "env_construction"),
        scalers,
    )
    params = {
        "agent": AGENT,
        "evaluation_split": "validation",
        "device": "cpu",
        "resume_dir": str(root / "resume"),
        "progress_bar": False,
    }
    model, _, _ = train_sac_icm(
        spec, SacIcmParams.from_mapping(params, "sac_icm"), 3, {"save_version": save_version, "seed": 3}, feature_params
    )
    SB3ModelDataset(
        str(root / MODEL_DATASET["filepath"]),
        MODEL_DATASET["model_class"],
        device="cpu",
        version=Version(None, save_version),
    ).save(model)
    uri = store or store_uri(root)
    database = Path(uri.removeprefix("sqlite:///"))
    if not database.exists():  # the first deploy of the root: an empty store, not a migration
        empty_store(database)
    promote_saved_model(uri, save_version)


def walk_forward_folds(sharpes=(-1.0, 0.5, 2.0), drawdowns=(-0.05, -0.1, -0.2), fills=(0.0, 0.3, 0.9)) -> pd.DataFrame:
    """The walk-forward windows the decay checks compare with (one row per fold x seed)."""
    return pd.DataFrame(
        {
            "symbol": SYMBOL,
            "kind": "agent",
            "agent": "sac_icm",
            "sharpe": sharpes,
            "max_drawdown": drawdowns,
            "fill_rate": fills,
        }
    )


def rerun(
    root: Path,
    save_version: str,
    folds: pd.DataFrame | None = None,
    forward: dict | None = None,
    load_versions: dict[str, str] | None = None,
) -> DataCatalog:
    """One scheduled ``kedro run --pipelines forward`` on the price file as it is now (``forward``:
    its ``--params forward.*``, ``load_versions``: its ``--load-versions``)."""
    parameters = {
        "feature_extraction": FEATURE_EXTRACTION,
        "forward": forward or {},
        "regime_validation": {"regimes": {"trend_window": 10, "vol_window": 5, "vol_lookback": 20}},
        "tearsheet": {"rolling_window": 10, "dpi": 30},
    }
    folds = walk_forward_folds() if folds is None else folds
    return run_forward(root, save_version, parameters, folds, seed=3, load_versions=load_versions)


def versions(root: Path, relative: str) -> list[Path]:
    folder = root / relative
    return sorted(path / Path(relative).name for path in folder.iterdir()) if folder.exists() else []
