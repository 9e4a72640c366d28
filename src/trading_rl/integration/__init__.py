"""The Kedro/MLflow integration, above the domain and the phases (docs/architecture.md): the project's
hooks (``hooks``, ``mlflow_hooks``, ``run_manifest``, ``run_states``, ``phase_inputs``), the MLflow
conventions (``mlflow_tracking``, ``mlflow_sb3_policy``, ``model_registry``), the catalog datasets
(``datasets``), the config loader, the parameter sections a run is validated against and the
third-party warning filters. ``settings.py`` wires them into Kedro."""
