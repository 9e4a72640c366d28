"""Deployment through the MLflow model registry: the deployed agent is the version an alias
(``@champion``) points to, never "the newest file".

A version is registered only when its run's gates passed (``mlflow_tracking.register_if_gates_pass``,
which tags it ``gate.<report>`` with each verdict and ``save_version`` / ``dataset`` with the Kedro
version of the saved model). ``promotion`` decides (pure); the ``promote`` pipeline's
``ModelRegistryDataset`` applies it: the alias moves and the version is tagged with who promoted it,
when and in which MLflow run. ``deployment_of`` reads back what an alias deploys and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trading_rl.config import Section, setting

CHAMPION = "champion"
# The tag a served model's version carries (``mlflow_hooks``): what `mlflow models serve` answers on it.
SERVED_TAG = "serving"
PASSING_VERDICTS = frozenset({"passed", "not collapsed"})
PROMOTION_TAGS = ("promoted_by", "promoted_at", "promoted_in_run", "promoted_as")


@dataclass(frozen=True, kw_only=True)
class PromoteParams(Section):
    """The ``promote`` parameter section: which registered version becomes the deployed alias."""

    version: int | None = setting(None, interval="[1, inf)")  # None: the newest registered version
    alias: str = setting(CHAMPION)


class PromotionError(ValueError):
    """A version that cannot be deployed (unknown, or a gate that did not pass)."""


def version_record(model_version: Any) -> dict[str, Any]:
    """What deployment needs of an MLflow ``ModelVersion``, as plain data."""
    return {
        "version": int(model_version.version),
        "run_id": model_version.run_id,
        "tags": dict(model_version.tags or {}),
        "aliases": sorted(getattr(model_version, "aliases", None) or []),
        "created": int(model_version.creation_timestamp or 0),
    }


def registry_versions(client: Any, name: str) -> dict[str, Any]:
    """``{"registered_model": name, "versions": [...]}``, every version of ``name`` oldest first
    (none when the model was never registered)."""
    versions = client.search_model_versions(f"name='{name}'")
    return {
        "registered_model": name,
        "versions": sorted((version_record(v) for v in versions), key=lambda v: v["version"]),
    }


def gate_verdicts(tags: Mapping[str, str]) -> dict[str, str]:
    return {key.removeprefix("gate."): value for key, value in tags.items() if key.startswith("gate.")}


def promotion(
    name: str, versions: Sequence[Mapping[str, Any]], version: int | None, alias: str, by: str, at: str
) -> dict[str, Any]:
    """The alias move to make: ``version`` (the newest registered when ``None``) of ``name``, checked
    to exist and to carry only passing gate verdicts; raises ``PromotionError`` naming what is wrong."""
    if not versions:
        raise PromotionError(
            f"registered model '{name}' has no version: a model is registered only when its run's gates "
            "passed (docs/tracking.md#mlflow-conventions), so there is nothing to promote"
        )
    by_number = {int(v["version"]): v for v in versions}
    chosen = max(by_number) if version is None else int(version)
    if chosen not in by_number:
        raise PromotionError(f"'{name}' has no version {chosen} (registered: {sorted(by_number)})")
    record = by_number[chosen]
    verdicts = gate_verdicts(record["tags"])
    failing = {gate: why for gate, why in verdicts.items() if why not in PASSING_VERDICTS}
    if not verdicts or failing:
        raise PromotionError(
            f"'{name}' version {chosen} cannot be promoted: "
            + ("it carries no gate verdict" if not verdicts else "; ".join(f"{g} {w}" for g, w in failing.items()))
        )
    previous = next((int(v["version"]) for v in versions if alias in v["aliases"]), None)
    return {
        "registered_model": name,
        "alias": alias,
        "version": chosen,
        "previous_version": previous,
        "source_run_id": record["run_id"],
        "save_version": record["tags"].get("save_version"),
        "serving": record["tags"].get(SERVED_TAG),
        "gates": verdicts,
        "promoted_by": by,
        "promoted_at": at,
    }


def apply_promotion(client: Any, decision: Mapping[str, Any], run_id: str | None) -> None:
    """Point the alias at the decided version and tag that version with who, when and which run."""
    name, version = decision["registered_model"], str(decision["version"])
    client.set_registered_model_alias(name, decision["alias"], version)
    tags = {
        "promoted_by": decision["promoted_by"],
        "promoted_at": decision["promoted_at"],
        "promoted_in_run": run_id or "",
        "promoted_as": decision["alias"],
    }
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, str(value))


def deployment_of(client: Any, name: str, alias: str) -> dict[str, Any]:
    """What ``name@alias`` deploys and why (its gates, who promoted it when), or a ``status`` saying
    that nothing is promoted."""
    from mlflow.exceptions import MlflowException

    try:
        model_version = client.get_model_version_by_alias(name, alias)
    except MlflowException:
        return {
            "status": "none promoted",
            "registered_model": name,
            "alias": alias,
            "reason": f"no version of '{name}' carries alias @{alias}: promote one with "
            f"`kedro run --pipelines promote` (a version exists only when its run's gates passed)",
        }
    record = version_record(model_version)
    tags = record["tags"]
    return {
        "status": "deployed",
        "registered_model": name,
        "alias": alias,
        "version": record["version"],
        "source_run_id": record["run_id"],
        "save_version": tags.get("save_version"),
        "dataset": tags.get("dataset"),
        "gates": gate_verdicts(tags),
        **{key: tags.get(key) for key in PROMOTION_TAGS},
        "reason": f"{name}@{alias} is version {record['version']}, promoted by {tags.get('promoted_by', '?')} "
        f"at {tags.get('promoted_at', '?')}; its gates: "
        + (", ".join(f"{g} {w}" for g, w in gate_verdicts(tags).items()) or "none recorded"),
    }
