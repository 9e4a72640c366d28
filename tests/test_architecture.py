"""The import layering of docs/architecture.md, checked on the source: every ``import`` and
``from ... import`` of every module under ``src/trading_rl``, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trading_rl"

# Modules every layer may use: they import no other part of the project.
FOUNDATION = ("archives", "config", "provenance", "seeding")

# The domain packages, lowest first. A package imports only from the packages before it (and the
# foundation); packages on one rank import none of each other.
DOMAIN_ORDER: tuple[tuple[str, ...], ...] = (
    ("runtime",),  # the execution engine: imports nothing of the domain, every layer above may run tasks
    ("data",),
    ("features",),
    ("envs",),
    ("monitoring",),
    ("evaluation",),
    ("agents",),
    ("algorithms",),
    ("rewards",),
    ("migration", "export"),
)
PHASES = "phases"
# Above the domain and the phases: the Kedro/MLflow integration (hooks, MLflow conventions, catalog
# datasets, run manifest, parameter sections), then the pipelines, which may use it. Above them only
# Kedro's entry modules (settings, pipeline_registry, __main__), which may import anything.
ADAPTERS = ("integration", "pipelines")
RANK = {package: rank for rank, packages in enumerate(DOMAIN_ORDER) for package in packages}
RANK[PHASES] = len(DOMAIN_ORDER)
RANK.update({package: len(DOMAIN_ORDER) + 1 + rank for rank, package in enumerate(ADAPTERS)})


def module_name(path: Path) -> str:
    parts = ("trading_rl", *path.relative_to(SOURCE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` for every import in ``path``, relative imports resolved; for
    ``from package import name`` the name counts as a module when it is one."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            found += [
                (node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if (SOURCE.parent / f"{base}.{alias.name}".replace(".", "/")).with_suffix(".py").exists()
                or (SOURCE.parent / f"{base}.{alias.name}".replace(".", "/")).is_dir()
            ]
    return [(line, module) for line, module in found if module.startswith("trading_rl.")]


def top(module: str) -> str:
    """The package (or top-level module) under ``trading_rl``; ``""`` for ``trading_rl`` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layering_problem(importer: str, imported: str) -> str | None:
    """Why ``importer`` may not import ``imported`` (``None`` when it may)."""
    source, target = top(importer), top(imported)
    if source == "pipelines" == target:
        own = importer.split(".")[2]
        other = imported.split(".")[2] if imported.count(".") >= 2 else ""
        is_pipeline = (SOURCE / "pipelines" / other).is_dir()  # not a shared module (tearsheet.py)
        composes = importer.endswith(".pipeline") and imported == f"trading_rl.pipelines.{other}"  # create_pipeline
        if is_pipeline and other != own and not composes:
            return f"pipeline {own} imports pipeline {other}'s code (only a pipeline.py may compose pipelines)"
        return None
    if source == target or target in FOUNDATION:
        return None
    if source in FOUNDATION:
        return f"the foundation module {source} imports the project"
    if source in RANK:
        if target not in RANK:
            return f"{source} imports {target}, outside the domain packages, phases and adapters"
        if RANK[target] >= RANK[source]:
            return f"{source} (rank {RANK[source]}) imports {target} (rank {RANK[target]}), which is not below it"
    return None


def violations() -> list[str]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        importer = module_name(path)
        for line, imported in imported_modules(path):
            problem = layering_problem(importer, imported)
            if problem:
                found.append(f"{path.relative_to(SOURCE.parent)}:{line}: import of {imported}: {problem}")
    return found


def test_no_module_imports_against_the_layering():
    assert violations() == []


def test_the_domain_and_the_phases_import_no_kedro():
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        if top(module_name(path)) not in RANK or top(module_name(path)) in ADAPTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            )
            found += [
                f"{path.relative_to(SOURCE.parent)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in ("kedro", "kedro_mlflow", "kedro_datasets")
            ]
    assert found == []


# Public names several modules define on purpose: Kedro's per-pipeline entry point and the
# per-section parameter prefix. ``resolve_phase_params`` goes with the resolve_* wrappers (issue 28
# item 1).
SHARED_NAMES = {"create_pipeline", "PARAMS_PREFIX", "resolve_phase_params"}


def public_definitions() -> dict[str, list[str]]:
    """Every public module-level function, class and constant: ``name -> [module, ...]``."""
    found: dict[str, list[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                names = []
            for name in names:
                if not name.startswith("_") and name != "logger":
                    found.setdefault(name, []).append(module_name(path))
    return found


def test_a_public_name_is_defined_in_one_module():
    """Two ``Section``s or three ``PRICE_COLUMNS`` with different contents make an import a guess."""
    twice = {name: modules for name, modules in public_definitions().items() if len(modules) > 1}
    assert {name: modules for name, modules in twice.items() if name not in SHARED_NAMES} == {}


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("trading_rl.agents.sac_icm", "trading_rl.phases.walk_forward"),
        ("trading_rl.evaluation.gates", "trading_rl.algorithms.es"),
        ("trading_rl.envs.spec", "trading_rl.pipelines.env_construction.nodes"),
        ("trading_rl.runtime.engine", "trading_rl.export.onnx_export"),
        ("trading_rl.phases.walk_forward", "trading_rl.pipelines.walk_forward.nodes"),
        ("trading_rl.pipelines.multi_symbol.nodes", "trading_rl.pipelines.env_construction.nodes"),
        ("trading_rl.config", "trading_rl.envs"),
        ("trading_rl.runtime.engine", "trading_rl.algorithms.actor_learner"),
        ("trading_rl.integration.hooks", "trading_rl.pipelines.tearsheet"),
        ("trading_rl.phases.walk_forward", "trading_rl.integration.parameter_sections"),
        ("trading_rl.pipelines.sac_icm.nodes", "trading_rl.settings"),
        ("trading_rl.runtime.engine", "trading_rl.agents.shared_encoder"),
    ],
)
def test_an_upward_or_sideways_import_is_named(importer, imported):
    assert layering_problem(importer, imported)


def test_allowed_imports_pass():
    assert layering_problem("trading_rl.phases.walk_forward", "trading_rl.agents.sac_icm") is None
    assert layering_problem("trading_rl.agents.sac_icm", "trading_rl.evaluation.metrics") is None
    assert layering_problem("trading_rl.algorithms.actor_learner", "trading_rl.runtime.engine") is None
    assert layering_problem("trading_rl.pipelines.tracking", "trading_rl.integration.mlflow_tracking") is None
    assert layering_problem("trading_rl.integration.parameter_sections", "trading_rl.phases.walk_forward") is None
    assert layering_problem("trading_rl.settings", "trading_rl.integration.hooks") is None
    assert layering_problem("trading_rl.pipelines.walk_forward.nodes", "trading_rl.pipelines.tearsheet") is None
    assert layering_problem("trading_rl.pipelines.validation.pipeline", "trading_rl.pipelines.walk_forward") is None
    assert layering_problem("trading_rl.pipelines.validation.pipeline", "trading_rl.pipelines.walk_forward.nodes")


def test_imports_inside_functions_and_relative_imports_are_seen(tmp_path, monkeypatch):
    package = tmp_path / "trading_rl" / "envs"
    package.mkdir(parents=True)
    (tmp_path / "trading_rl" / "agents").mkdir()
    (tmp_path / "trading_rl" / "agents" / "training.py").write_text("")
    module = package / "spec.py"
    module.write_text("def f():\n    from ..agents import training\n    import trading_rl.phases.x\n")
    monkeypatch.setattr(__import__(__name__), "SOURCE", tmp_path / "trading_rl")
    assert imported_modules(module) == [
        (2, "trading_rl.agents"),
        (2, "trading_rl.agents.training"),
        (3, "trading_rl.phases.x"),
    ]
