"""Catalog paths move under the env's data root; raw inputs and paths outside data/ stay."""

from __future__ import annotations

import pytest

from trading_rl.integration.config_loader import ProjectConfigLoader, rebase_entry, rebase_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("data/08_reporting/report.json", "data/ci/08_reporting/report.json"),
        ("data/01_raw/prices", "data/01_raw/prices"),
        ("data/01_raw/legacy/x.zip", "data/01_raw/legacy/x.zip"),
        ("elsewhere/data/x.json", "elsewhere/data/x.json"),
        ("database/x.json", "database/x.json"),
    ],
)
def test_paths_under_data_move_to_the_root_except_raw_inputs(path, expected):
    assert rebase_path(path, "data/ci") == expected
    assert rebase_path(path, "data") == path


def test_nested_datasets_move_too():
    entry = {"type": "X", "dataset": {"type": "Y", "filepath": "data/06_models/m.zip"}, "path": "data/04_feature"}
    assert rebase_entry(entry, "data/ci") == {
        "type": "X",
        "dataset": {"type": "Y", "filepath": "data/ci/06_models/m.zip"},
        "path": "data/ci/04_feature",
    }


def test_the_env_globals_choose_the_root_and_a_bad_root_is_named(tmp_path):
    for env, root in (("base", "data"), ("ci", "/abs")):
        (tmp_path / env).mkdir()
        (tmp_path / env / "globals.yml").write_text(f"data_root: {root}\n")
        (tmp_path / env / "catalog.yml").write_text("prices: {type: X, filepath: data/02_intermediate/p.parquet}\n")
    base = ProjectConfigLoader(str(tmp_path), env="base", base_env="base", default_run_env="base")
    assert base["catalog"]["prices"]["filepath"] == "data/02_intermediate/p.parquet"
    ci = ProjectConfigLoader(str(tmp_path), env="ci", base_env="base", default_run_env="base")
    with pytest.raises(ValueError, match="globals.yml of env 'ci': data_root must be a relative folder"):
        ci["catalog"]
