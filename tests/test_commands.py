"""``trading-rl dashboard``: its sources default to where the project's configuration puts them for
the env (the catalog, the alerting section, mlflow.yml, the env's data root), an option given wins,
and a bad one is refused by name before anything starts."""

import shlex
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from trading_rl.commands import APP, commands, configured_sources, streamlit_command
from trading_rl.monitoring.dashboard.sources import DashboardSources

ROOT = Path(__file__).resolve().parents[1]


def test_the_sources_are_where_the_base_configuration_puts_them():
    found = configured_sources(ROOT, None)
    catalog = yaml.safe_load((ROOT / "conf/base/catalog_forward.yml").read_text())
    assert found["record"] == catalog["forward_record"]["filepath"] == "data/07_model_output/forward_record.parquet"
    assert found["report"] == catalog["forward_report"]["filepath"]
    assert found["drift"] == catalog["forward_drift"]["filepath"]
    assert found["registered_models"] == (catalog["deployment"]["registered_model"],)
    assert found["alias"] == catalog["deployment"]["alias"] == "champion"
    assert found["alerts"] == "data/08_reporting/alerts/alerts.jsonl"
    assert found["decisions"] == "data/08_reporting/serving/decisions.jsonl"
    assert found["prices"] == "data/01_raw/prices"
    assert found["tracking_uri"] == "sqlite:///mlflow.db"
    assert found["hold_threshold"] == 0.1


def test_the_ci_env_reads_its_own_data_root_and_store_and_shares_the_raw_prices():
    found = configured_sources(ROOT, "ci")
    assert found["record"] == "data/ci/07_model_output/forward_record.parquet"
    assert found["alerts"] == "data/ci/08_reporting/alerts/alerts.jsonl"
    assert found["decisions"] == "data/ci/08_reporting/serving/decisions.jsonl"
    assert found["tracking_uri"] == "sqlite:///data/ci/mlflow.db"
    assert found["prices"] == "data/01_raw/prices"


def test_the_streamlit_command_runs_the_app_headless_on_the_host_with_the_sources_as_its_arguments():
    sources = DashboardSources(refresh_s=0.25)
    command = streamlit_command(sources, "127.0.0.1", 8600)
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(APP)]
    options = dict(zip(command[5 : command.index("--") : 2], command[6 : command.index("--") : 2]))
    assert options == {
        "--server.address": "127.0.0.1",
        "--server.port": "8600",
        "--server.headless": "true",
        "--server.fileWatcherType": "none",
        "--browser.gatherUsageStats": "false",
        "--client.toolbarMode": "minimal",
    }
    assert DashboardSources.from_argv(command[command.index("--") + 1 :]) == sources


def test_the_dashboard_command_takes_the_configuration_and_the_options_given():
    result = CliRunner().invoke(
        commands,
        ["dashboard", "--project-path", str(ROOT), "--env", "ci", "--decisions", "/var/log/decisions.jsonl"]
        + ["--refresh-s", "0.25", "--registered-model", "a", "--registered-model", "b", "--port", "8700", "--dry-run"],
    )
    assert result.exit_code == 0, result.output
    command = shlex.split(result.output)
    sources = DashboardSources.from_argv(command[command.index("--") + 1 :])
    assert sources.record == Path("data/ci/07_model_output/forward_record.parquet")
    assert sources.decisions == Path("/var/log/decisions.jsonl")
    assert (sources.refresh_s, sources.registered_models) == (0.25, ("a", "b"))
    assert command[command.index("--server.port") + 1] == "8700"


def test_a_bad_option_is_refused_by_name():
    result = CliRunner().invoke(commands, ["dashboard", "--project-path", str(ROOT), "--refresh-s", "0", "--dry-run"])
    assert result.exit_code == 1
    assert "Error: dashboard option 'refresh_s' must be > 0 seconds, got 0.0" in result.output


def test_params_prints_the_sections_as_a_run_in_the_env_resolves_them():
    """Every key, the code's default where conf/ leaves it out, the env's value over conf/base."""
    arguments = ["params", "runtime", "tearsheet", "--project-path", str(ROOT), "--env", "ci"]
    result = CliRunner().invoke(commands, arguments)
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert list(printed) == ["runtime", "tearsheet"]
    assert printed["runtime"]["engine"] == "sequential"  # conf/ci over conf/base's ray
    assert printed["runtime"]["ray"] == {"address": None, "num_cpus": None, "num_gpus_per_task": 0.0}  # code defaults
    assert printed["tearsheet"] == {"rolling_window": 63, "dpi": 100}


def test_params_refuses_an_unknown_section_by_name():
    result = CliRunner().invoke(commands, ["params", "sac_icn", "--project-path", str(ROOT)])
    assert result.exit_code == 1
    assert "unknown parameter section 'sac_icn'" in result.output and "sac_icm" in result.output
