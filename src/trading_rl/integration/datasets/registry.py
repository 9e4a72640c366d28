"""The MLflow model registry as catalog datasets (the store is the run's, set by kedro-mlflow).

- ``RegisteredSB3ModelDataset``: the agent an alias (or a pinned version number) of a registered
  model deploys, read from the Kedro version of its saved model; ``None`` when nothing is promoted.
- ``DeploymentDataset``: what that alias deploys and why (``model_registry.deployment_of``).
- ``ModelRegistryDataset``: load the versions of a registered model; save a promotion decision
  (the alias moves, the version is tagged with who/when/which run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError
from kedro.io.core import Version

from trading_rl.integration.datasets.sb3_model import SB3ModelDataset
from trading_rl.integration.model_registry import CHAMPION, apply_promotion, deployment_of, registry_versions


def _client() -> Any:
    """A client of the run's store. A relative ``sqlite:///mlflow.db`` is made absolute: MLflow keeps
    one store per URI string in a process, so the relative one may still name an earlier project's file."""
    import mlflow

    uri = mlflow.get_tracking_uri()
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        uri = prefix + str(Path(uri.removeprefix(prefix)).resolve())
    return mlflow.MlflowClient(uri, uri)


class DeploymentDataset(AbstractDataset[dict, dict]):
    def __init__(self, registered_model: str, alias: str = CHAMPION, metadata: dict[str, Any] | None = None) -> None:
        self._registered_model, self._alias, self.metadata = registered_model, alias, metadata

    def load(self) -> dict[str, Any]:
        return deployment_of(_client(), self._registered_model, self._alias)

    def save(self, data: dict) -> None:
        raise DatasetError(f"{self._registered_model}@{self._alias} moves only through the promote pipeline")

    def _describe(self) -> dict[str, Any]:
        return {"registered_model": self._registered_model, "alias": self._alias}


class RegisteredSB3ModelDataset(DeploymentDataset):
    """The deployed agent: ``registered_model@alias``'s saved model file (``filepath`` at the version's
    ``save_version``, checked against its sha256 manifest like every model load)."""

    def __init__(
        self,
        filepath: str,
        registered_model: str,
        alias: str = CHAMPION,
        model_class: str = "stable_baselines3.SAC",
        device: str = "auto",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(registered_model, alias, metadata)
        self._filepath, self._model_class, self._device = filepath, model_class, device

    def load(self) -> Any:
        deployment = super().load()
        if deployment["status"] != "deployed":
            return None
        save_version = deployment["save_version"]
        if not save_version:
            raise DatasetError(
                f"{self._registered_model} version {deployment['version']} has no 'save_version' tag, so its "
                f"file under {self._filepath} is unknown: re-register it from a run of this project version"
            )
        try:
            saved = SB3ModelDataset(self._filepath, self._model_class, self._device, Version(save_version, None))
            return saved.load()
        except DatasetError as error:
            raise DatasetError(
                f"{self._registered_model}@{self._alias} (version {deployment['version']}) is the saved model "
                f"{self._filepath} version {save_version}, which cannot be loaded here: {error}"
            ) from error

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "filepath": self._filepath, "model_class": self._model_class}


class ModelRegistryDataset(AbstractDataset[dict, dict]):
    def __init__(self, registered_model: str, metadata: dict[str, Any] | None = None) -> None:
        self._registered_model, self.metadata = registered_model, metadata

    def load(self) -> dict[str, Any]:
        return registry_versions(_client(), self._registered_model)

    def save(self, data: dict) -> None:
        import mlflow

        if data["registered_model"] != self._registered_model:
            raise DatasetError(
                f"promotion of {data['registered_model']!r} saved to the registry entry of {self._registered_model!r}"
            )
        run = mlflow.active_run()
        apply_promotion(_client(), data, run.info.run_id if run else None)

    def _describe(self) -> dict[str, Any]:
        return {"registered_model": self._registered_model}
