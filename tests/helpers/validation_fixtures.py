"""Shared by the validation pipeline and notebook tests: a tiny synthetic market and the project's
validation catalog with its files redirected under a root folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml
from kedro.io import DataCatalog

from helpers.synthetic_prices import random_walk_prices
from helpers.tiny import TINY_FEATURES, TINY_WALK_FORWARD, tiny_sac_icm

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = {
    "seed": 7,
    "feature_extraction": TINY_FEATURES,
    "env_construction": {"symbol": "X", "periods_per_year": 252, "env": {"window_size": 5, "episode_length": 100}},
    "sac_icm": tiny_sac_icm(),
    "walk_forward": TINY_WALK_FORWARD,
    "regime_validation": {"regimes": {"trend_window": 20, "vol_window": 10, "vol_lookback": 60}},
    "runtime": {"engine": "sequential"},
    "tearsheet": {"rolling_window": 20, "dpi": 40},
    "forward": {},
}


def market(n_bars: int) -> pd.DataFrame:
    # One walk: a longer market extends the shorter one.
    return random_walk_prices(n_bars, seed=11, walk_length=2000).assign(symbol="X")


def catalog_for(root: Path, prices: pd.DataFrame, save_version: str) -> DataCatalog:
    config = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_validation.yml").read_text())
    ledger = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_ledger.yml").read_text())
    config["trial_ledger"], config["prior_trial_ledger"] = ledger["trial_ledger"], ledger["prior_trial_ledger"]
    config.update(yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_forward.yml").read_text()))  # part of validation
    for entry in config.values():
        if "filepath" in entry:
            entry["filepath"] = str(root / entry["filepath"])
        if "also_read" in entry:  # the committed ledger: the copy's own (absent), not this checkout's
            entry["also_read"] = [str(root / path) for path in entry["also_read"]]
    catalog = DataCatalog.from_config(config, save_version=save_version)

    catalog["prices"] = prices
    catalog["raw_price_files"] = {}  # read by the forward nodes only when a model is deployed
    catalog["run_metadata"] = {"seed": 7, "save_version": save_version}
    parameters = {
        **PARAMS,
        "validation": yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_validation.yml").read_text())["validation"],
        # the forward run's alerts go to the copy's own file, never the checkout's
        "alerting": {"channels": {"jsonl": str(root / "data/08_reporting/alerts/alerts.jsonl")}},
    }
    for key, value in parameters.items():
        catalog[f"params:{key}"] = value
    return catalog
