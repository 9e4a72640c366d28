"""Does a saved model fit the env spec a phase runs it with?

A model is only meaningful on the observation it was trained on: the same symbol, the same feature
columns in the same order, the same window, the same env rules. Every model this project saves
carries :func:`model_signature` of its spec in ``trading_rl_metadata``; every phase that loads one
calls :func:`check_model_fits_spec` before it writes anything, so an sp500 model is never exported
as another symbol and a warm start never copies weights onto columns they were not trained on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trading_rl.provenance import config_hash


class ModelCompatibilityError(ValueError):
    """A model and the env spec (or data) it is about to be used with do not belong together."""


METADATA_ATTRIBUTE = "trading_rl_metadata"


def model_metadata(model: Any) -> dict[str, Any]:
    """The ``trading_rl_metadata`` an SB3 model carries (SB3 saves it in the zip); ``{}`` without one."""
    return dict(getattr(model, METADATA_ATTRIBUTE, None) or {})


def set_model_metadata(model: Any, metadata: dict[str, Any]) -> None:
    """Attach ``metadata`` as the model's ``trading_rl_metadata``, an attribute SB3 saves with it."""
    setattr(model, METADATA_ATTRIBUTE, metadata)


def model_signature(env_spec: Any) -> dict[str, Any]:
    """What a model must match to be used with ``env_spec``: symbol, observation layout and its hash,
    and the hash of the env configuration (costs, thresholds, fill rule ...)."""
    layout = env_spec.layout
    observation = {
        "feature_columns": list(layout.feature_columns),
        "window_size": layout.window_size,
        "dim": layout.dim,
    }
    return {
        "symbol": env_spec.symbol,
        "observation": {**observation, "hash": config_hash(observation)},
        "env_config_hash": config_hash(env_spec.config_data()),
    }


def _describe_observation(observation: Mapping[str, Any]) -> str:
    columns = observation.get("feature_columns") or []
    return (
        f"{observation.get('dim')} inputs (window {observation.get('window_size')} x {len(columns)} features, "
        f"layout hash {observation.get('hash')})"
    )


def _layout_difference(model_observation: Mapping[str, Any], spec_observation: Mapping[str, Any]) -> str:
    """What differs between two observation layouts: window size, feature columns, their order."""
    model_columns: Sequence[str] = model_observation.get("feature_columns") or []
    spec_columns: Sequence[str] = spec_observation["feature_columns"]
    differences = []
    if model_observation.get("window_size") != spec_observation["window_size"]:
        differences.append(f"window {model_observation.get('window_size')} vs {spec_observation['window_size']}")
    only_model = [c for c in model_columns if c not in spec_columns]
    only_spec = [c for c in spec_columns if c not in model_columns]
    if only_model or only_spec:
        differences.append(f"features only in the model: {only_model}; only in the spec: {only_spec}")
    elif list(model_columns) != list(spec_columns):
        differences.append("same feature columns in another order")
    else:
        differences.append("same feature columns in the same order")
    return "; ".join(differences)


def signature_mismatches(
    metadata: Mapping[str, Any], expected: Mapping[str, Any], observation_dim: int | None = None
) -> list[str]:
    """Human-readable differences between a model's metadata and the signature it must match.

    A model saved before signatures existed has none: then only its symbol (when recorded) and its
    network input size (``observation_dim``) can be compared.
    """
    problems = []
    model_symbol = metadata.get("symbol")
    if model_symbol is not None and model_symbol != expected["symbol"]:
        problems.append(f"symbol: model {model_symbol!r} vs spec {expected['symbol']!r}")
    spec_observation = expected["observation"]
    model_observation = metadata.get("observation")
    if model_observation is not None and model_observation.get("hash") != spec_observation["hash"]:
        problems.append(
            f"observation: model {_describe_observation(model_observation)} vs spec "
            f"{_describe_observation(spec_observation)}; " + _layout_difference(model_observation, spec_observation)
        )
    elif observation_dim is not None and observation_dim != spec_observation["dim"]:
        problems.append(
            f"observation: model network takes {observation_dim} inputs vs spec "
            f"{_describe_observation(spec_observation)}"
        )
    model_env_hash = metadata.get("env_config_hash")
    if model_env_hash is not None and model_env_hash != expected["env_config_hash"]:
        problems.append(f"env config hash: model {model_env_hash} vs spec {expected['env_config_hash']}")
    return problems


def check_spec_symbol(env_spec: Any, symbol: str, *, pipeline: str, spec_dataset: str = "env_spec") -> None:
    """Raise :class:`ModelCompatibilityError` when ``env_spec`` is not for ``symbol`` (parameter
    ``env_construction.symbol``, which names the run and its MLflow tags), naming both and the fixes."""
    if env_spec.symbol == symbol:
        return
    raise ModelCompatibilityError(
        f"dataset '{spec_dataset}' is for symbol {env_spec.symbol!r} but parameter 'env_construction.symbol' is "
        f"{symbol!r}: `kedro run --pipelines {pipeline}` would run on {env_spec.symbol!r} under the name "
        f"{symbol!r}. Nothing was written. Fix: rebuild the spec for {symbol!r} with `kedro run --pipelines "
        f"env_construction`, pin a spec of {symbol!r} with `kedro run --pipelines {pipeline} --load-versions "
        f"{spec_dataset}:<version>` (a run's manifest under data/09_runs/ names the versions it wrote), or set "
        f"env_construction.symbol: {env_spec.symbol}."
    )


def check_symbol_entry(by_symbol: Mapping[str, Any], symbol: str, *, dataset: str, pipeline: str) -> None:
    """Raise :class:`ModelCompatibilityError` when the per-symbol dataset ``dataset`` (feature params,
    scalers, splits) has no entry for ``symbol``, naming what it holds and the fixes."""
    if symbol in by_symbol:
        return
    raise ModelCompatibilityError(
        f"dataset '{dataset}' holds symbols {sorted(by_symbol)}, not {symbol!r} (parameter "
        f"'env_construction.symbol'): it was written by a run of other symbols. Nothing was written. Fix: rerun "
        f"`kedro run --pipelines feature_extraction` with {symbol!r} among feature_extraction.symbols, or pin a "
        f"version that holds it with `kedro run --pipelines {pipeline} --load-versions {dataset}:<version>` "
        "(a run's manifest under data/09_runs/ names the versions it wrote)."
    )


def check_deployed_model_symbol(
    model: Any, symbol: str, *, pipeline: str, model_dataset: str = "deployed_model"
) -> None:
    """Raise :class:`ModelCompatibilityError` when the deployed ``model`` was trained on another symbol
    than ``symbol`` (parameter ``env_construction.symbol``, which names the run and its MLflow tags):
    ``forward`` rebuilds its env from the model's own metadata, so it would score that symbol under
    this one's name. A model without a recorded symbol is left to ``forward``'s own metadata check."""
    metadata = model_metadata(model)
    trained_on = metadata.get("symbol")
    if trained_on is None or trained_on == symbol:
        return
    version = metadata.get("save_version")
    raise ModelCompatibilityError(
        f"dataset '{model_dataset}'" + (f" (version {version})" if version else "") + f" trades symbol "
        f"{trained_on!r} but parameter 'env_construction.symbol' is {symbol!r}: `kedro run --pipelines {pipeline}` "
        f"would score {trained_on!r} under the name {symbol!r}. Nothing was written. Fix: run it for the deployed "
        f"symbol with `kedro run --pipelines {pipeline} --params env_construction.symbol={trained_on}`, or deploy a "
        f"model of {symbol!r} with `kedro run --pipelines promote --params promote.version=<N>`."
    )


def check_model_fits_spec(
    model: Any,
    env_spec: Any,
    *,
    model_dataset: str,
    spec_dataset: str = "env_spec",
    pipeline: str,
) -> None:
    """Raise :class:`ModelCompatibilityError` naming both sides and the ``--load-versions`` fix when
    ``model`` (an SB3 model with ``trading_rl_metadata``) was not trained on ``env_spec``."""
    metadata = model_metadata(model)
    shape = getattr(getattr(model, "observation_space", None), "shape", None)
    observation_dim = int(shape[0]) if shape else None
    problems = signature_mismatches(metadata, model_signature(env_spec), observation_dim)
    if not problems:
        return
    made_by = metadata.get("save_version")
    version_note = f" (the loaded model is version {made_by})" if made_by else ""
    raise ModelCompatibilityError(
        f"dataset '{model_dataset}'{version_note} was not trained on dataset '{spec_dataset}' "
        f"(symbol {env_spec.symbol!r}): " + "; ".join(problems) + ". Nothing was written. Fix: load a "
        f"model and spec that belong together, e.g. `kedro run --pipelines {pipeline} --load-versions "
        f"{model_dataset}:<version>,{spec_dataset}:<version>` (a run's manifest under data/09_runs/ names "
        f"the versions it loaded and wrote), or retrain the model on this spec."
    )
