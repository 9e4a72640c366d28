"""The ``trading-rl`` console script: the project's commands besides ``kedro run``.

``trading-rl dashboard`` starts the monitoring dashboard (``monitoring.dashboard.app``) with
``streamlit run``. Every source it reads defaults to where this project's configuration puts it
for the chosen env (``--env``, as ``kedro run --env``): the catalog's ``forward_record``,
``forward_report``, ``forward_drift``, ``raw_price_files`` and ``deployment`` (registered model and
alias) entries, the ``alerting.channels.jsonl`` file, ``mlflow.yml``'s tracking URI and the env's
hold threshold. The decision log is the catalog's ``decision_log`` entry when there is one, else
``<data_root>/08_reporting/serving/decisions.jsonl``. An option given on the command line wins.

``trading-rl params [SECTION ...] [--env ENV]`` prints parameter sections as a run in that env
resolves them: the defaults live in the section dataclasses, and ``conf/`` states only what differs,
so this is where a user sees every value a run will use.

An entry module (like ``settings`` and ``__main__``): it may import the integration layer; it is not
named ``cli.py``, which Kedro would take for the project's replacement of ``kedro run``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from trading_rl.monitoring.dashboard.sources import CHAMPION_ALIAS, DashboardSources

APP = Path(__file__).resolve().parent / "monitoring" / "dashboard" / "app.py"
DECISION_LOG = "08_reporting/serving/decisions.jsonl"


def _section(config: Any, key: str) -> dict[str, Any]:
    from kedro.config import MissingConfigException

    try:
        return dict(config[key] or {})
    except MissingConfigException:  # no file of this kind in the env: no defaults from it
        return {}


def _loader(project: Path, env: str | None) -> Any:
    """The project's config loader for ``env`` (as ``kedro run --env``), mlflow.yml included."""
    from trading_rl.integration.config_loader import ProjectConfigLoader
    from trading_rl.settings import CONFIG_LOADER_ARGS

    arguments: dict[str, Any] = {**CONFIG_LOADER_ARGS, "config_patterns": {"mlflow": ["mlflow*", "mlflow*/**"]}}
    return ProjectConfigLoader(conf_source=str(project / "conf"), env=env, **arguments)


def resolved_parameters(loader: Any, sections: Sequence[str] | None = None) -> dict[str, Any]:
    """``sections`` (default: all) as a run in ``loader``'s env resolves them, as plain data: the
    code's defaults (their one home) with conf/base and the env laid over them, checked."""
    from trading_rl.config import plain
    from trading_rl.integration.parameter_sections import resolve_parameters

    resolved = resolve_parameters(_section(loader, "parameters"), sections)
    return {name: plain(section) for name, section in resolved.items()}


def configured_sources(project: Path, env: str | None) -> dict[str, Any]:
    """The dashboard's sources as the project's configuration names them for ``env`` (paths
    relative to ``project``)."""
    loader = _loader(project, env)
    catalog = _section(loader, "catalog")
    sections = resolved_parameters(loader, ("env_construction", "alerting"))
    deployment = catalog.get("deployment", {})
    found = {
        "record": catalog.get("forward_record", {}).get("filepath"),
        "report": catalog.get("forward_report", {}).get("filepath"),
        "drift": catalog.get("forward_drift", {}).get("filepath"),
        "decisions": catalog.get("decision_log", {}).get("filepath") or f"{loader.data_root()}/{DECISION_LOG}",
        "alerts": sections["alerting"]["channels"]["jsonl"],
        "prices": catalog.get("raw_price_files", {}).get("path"),
        "tracking_uri": _section(loader, "mlflow").get("server", {}).get("mlflow_tracking_uri"),
        "registered_models": (deployment["registered_model"],) if "registered_model" in deployment else None,
        "alias": deployment.get("alias", CHAMPION_ALIAS),
        "hold_threshold": sections["env_construction"]["env"]["hold_threshold"],
    }
    return {key: value for key, value in found.items() if value is not None}


def streamlit_command(sources: DashboardSources, host: str, port: int) -> list[str]:
    """``python -m streamlit run app.py`` on ``host:port``, headless, no usage statistics, no file
    watcher (the app polls its sources itself), no developer toolbar, with ``sources`` as the
    script's arguments."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
        "--",
        *sources.to_argv(),
    ]


@click.group(name="trading-rl")
def commands() -> None:
    """trading_rl's commands besides `kedro run`."""


@commands.command()
@click.option("--project-path", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True)
@click.option("--env", default=None, help="the Kedro env whose configuration names the sources (default: local)")
@click.option("--record", type=click.Path(path_type=Path), help="forward record (a versioned parquet folder or file)")
@click.option("--report", type=click.Path(path_type=Path), help="forward report JSON (symbol, bars a year)")
@click.option("--drift", type=click.Path(path_type=Path), help="forward drift report JSON")
@click.option("--decisions", type=click.Path(path_type=Path), help="the served model's decision log (JSON lines)")
@click.option("--alerts", type=click.Path(path_type=Path), help="the alerts file (JSON lines)")
@click.option("--prices", type=click.Path(path_type=Path), help="the raw price folder or one price file")
@click.option("--tracking-uri", help="MLflow tracking and registry URI")
@click.option("--registered-model", "registered_models", multiple=True, help="registered model(s) to show")
@click.option("--alias", help="the deployed alias (default: champion)")
@click.option("--refresh-s", type=float, help="seconds between redraws of the decisions and alerts")
@click.option("--registry-refresh-s", type=float, help="seconds between reads of the MLflow registry")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8501, show_default=True)
@click.option("--dry-run", is_flag=True, help="print the streamlit command and exit")
def dashboard(project_path: Path, env: str | None, host: str, port: int, dry_run: bool, **given: Any) -> None:
    """Start the live monitoring dashboard (docs/monitoring.md)."""
    given = {key: value for key, value in given.items() if value not in (None, ())}
    if "registered_models" in given:
        given["registered_models"] = tuple(given["registered_models"])
    try:
        sources = DashboardSources(**{**configured_sources(project_path, env), **given})
    except (TypeError, ValueError) as error:
        raise click.ClickException(str(error)) from None
    command = streamlit_command(sources, host, port)
    if dry_run:
        click.echo(subprocess.list2cmdline(command))
        return
    click.echo(f"dashboard on http://{host}:{port} (Ctrl+C stops it)")
    sys.exit(subprocess.call(command, cwd=project_path))


@commands.command()
@click.argument("sections", nargs=-1)
@click.option("--project-path", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True)
@click.option("--env", default=None, help="the Kedro env laid over conf/base (default: local), as `kedro run --env`")
def params(sections: tuple[str, ...], project_path: Path, env: str | None) -> None:
    """Print parameter sections (default: all) as a run resolves them, as YAML: every key, the code's
    default where conf/ leaves it out (docs/configuration.md)."""
    from trading_rl.config import ConfigError
    from trading_rl.integration.parameter_sections import SECTIONS

    unknown = [name for name in sections if name not in SECTIONS]
    if unknown:
        raise click.ClickException(f"unknown parameter section {unknown[0]!r}; sections: {', '.join(sorted(SECTIONS))}")
    try:
        resolved = resolved_parameters(_loader(project_path, env), sections or None)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    click.echo(yaml.safe_dump(resolved, sort_keys=False), nl=False)


if __name__ == "__main__":
    commands()
