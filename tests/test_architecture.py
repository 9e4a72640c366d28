"""The architecture of docs/architecture.md, checked on the source: the import layering (every
``import`` and ``from ... import`` of every module under ``src/trading_rl``, at module level or inside
a function), where parameter sections are resolved, and the length of modules and functions."""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trading_rl"

# Modules every layer may use: they import no other part of the project.
FOUNDATION = ("archives", "config", "file_lock", "provenance", "seeding")

# The domain packages, lowest first. A package imports only from the packages before it (and the
# foundation); packages on one rank import none of each other.
DOMAIN_ORDER: tuple[tuple[str, ...], ...] = (
    ("runtime",),  # the execution engine: imports nothing of the domain, every layer above may run tasks
    ("data",),
    ("features",),
    ("envs",),
    ("monitoring",),
    ("evaluation",),  # inside it, EVALUATION_ORDER
    ("training",),
    ("algorithms",),  # inside it, ALGORITHM_BASES
    ("rewards",),
    ("migration", "export"),
    ("serving",),  # the exported actor served over HTTP: an MLflow pyfunc around export.SignalEngine
)
PHASES = "phases"
# Above the domain and the phases: the Kedro/MLflow integration (hooks, MLflow conventions, catalog
# datasets, run manifest, parameter sections), then the pipelines, which may use it. Above them only
# Kedro's entry modules (settings, pipeline_registry, __main__), which may import anything.
ADAPTERS = ("integration", "pipelines")
# The sub-packages of ``evaluation``, lowest first: scoring one policy (metrics), the trial ledger and
# the test split's one spending (ledger), validation across folds and regimes and the gates
# (validation), the drawings and summaries (reporting). Each imports only those before it.
EVALUATION_ORDER = ("metrics", "ledger", "validation", "reporting")
# One package per algorithm under ``algorithms/`` (shared parts are ``training``, below). An algorithm
# package imports no other one, except the one it builds on: the hierarchical agent's low level is a
# SAC+ICM (options_her), and the population updates N SAC+ICM learners batched with the ICM's
# losses (population). The modules directly under ``algorithms/`` (``saved``: the one saved form of
# every agent) may use every algorithm package.
ALGORITHM_BASES: dict[str, set[str]] = {
    "sac_icm": set(),
    "options_her": {"sac_icm"},
    "vtrace": set(),
    "es": set(),
    "population": {"sac_icm"},
}
# A phase's home (``phases/<phase>.py`` or ``phases/<phase>/``) imports no other phase's: what two
# phases share lives in the domain. The one exception: tuning scores its trials with the walk-forward
# protocol, so it runs the walk-forward's execution.
PHASE_BASES: dict[str, set[str]] = {"tuning": {"walk_forward"}}
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


def sub_package(module: str) -> str:
    """The package under ``trading_rl.<top>`` (``""`` for a module directly in it)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else ""


def layering_problem(importer: str, imported: str) -> str | None:
    """Why ``importer`` may not import ``imported`` (``None`` when it may)."""
    source, target = top(importer), top(imported)
    if source == "evaluation" == target:
        own, other = sub_package(importer), sub_package(imported)
        if (
            own in EVALUATION_ORDER
            and other in EVALUATION_ORDER
            and EVALUATION_ORDER.index(other) > EVALUATION_ORDER.index(own)
        ):
            return f"evaluation.{own} imports evaluation.{other}, which is not below it (EVALUATION_ORDER)"
        return None
    if source == "algorithms" == target:
        own, other = sub_package(importer), sub_package(imported)
        if own and other and other != own and other not in ALGORITHM_BASES.get(own, set()):
            return f"algorithm {own} imports algorithm {other} (ALGORITHM_BASES names what an algorithm builds on)"
        return None
    if source == PHASES == target:
        own, other = importer.split(".")[2], imported.split(".")[2] if imported.count(".") >= 2 else ""
        if other and other != own and other not in PHASE_BASES.get(own, set()):
            return f"phase {own} imports phase {other} (what phases share belongs in the domain; PHASE_BASES)"
        return None
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
        ("trading_rl.algorithms.sac_icm.sac_icm", "trading_rl.phases.walk_forward"),
        ("trading_rl.evaluation.validation.gates", "trading_rl.algorithms.es.es"),
        ("trading_rl.envs.spec", "trading_rl.pipelines.env_construction.nodes"),
        ("trading_rl.runtime.engine", "trading_rl.export.onnx_export"),
        ("trading_rl.phases.walk_forward", "trading_rl.pipelines.walk_forward.pipeline"),
        ("trading_rl.pipelines.multi_symbol.pipeline", "trading_rl.pipelines.env_construction.nodes"),
        ("trading_rl.config", "trading_rl.envs"),
        ("trading_rl.runtime.engine", "trading_rl.algorithms.vtrace.actor_learner"),
        ("trading_rl.integration.hooks", "trading_rl.pipelines.tearsheet"),
        ("trading_rl.phases.walk_forward", "trading_rl.integration.parameter_sections"),
        ("trading_rl.pipelines.sac_icm.pipeline", "trading_rl.settings"),
        ("trading_rl.runtime.engine", "trading_rl.algorithms.sac_icm.shared_encoder"),
        ("trading_rl.runtime.engine", "trading_rl.phases.walk_forward.chains"),
        ("trading_rl.phases.walk_forward.execution", "trading_rl.integration.parameter_sections"),
        ("trading_rl.phases.sac_icm", "trading_rl.pipelines.tracking"),
        ("trading_rl.training.loop", "trading_rl.algorithms.sac_icm.sac_icm"),
        ("trading_rl.algorithms.vtrace.actor_learner", "trading_rl.algorithms.sac_icm.sac_icm"),
        ("trading_rl.algorithms.sac_icm.sac_icm", "trading_rl.algorithms.options_her.hierarchical"),
        ("trading_rl.evaluation.metrics.metrics", "trading_rl.evaluation.ledger.ledger"),
        ("trading_rl.evaluation.validation.regimes", "trading_rl.evaluation.reporting.plots"),
        ("trading_rl.phases.sac_icm", "trading_rl.phases.forward"),
        ("trading_rl.phases.walk_forward.trainers", "trading_rl.phases.options_her"),
        ("trading_rl.phases.walk_forward.execution", "trading_rl.phases.tuning"),
    ],
)
def test_an_upward_or_sideways_import_is_named(importer, imported):
    assert layering_problem(importer, imported)


def test_allowed_imports_pass():
    assert layering_problem("trading_rl.phases.walk_forward", "trading_rl.algorithms.sac_icm.sac_icm") is None
    assert layering_problem("trading_rl.phases.tuning", "trading_rl.phases.walk_forward") is None
    assert (
        layering_problem("trading_rl.phases.walk_forward.population", "trading_rl.phases.walk_forward.chains") is None
    )
    assert layering_problem("trading_rl.algorithms.sac_icm.sac_icm", "trading_rl.evaluation.metrics.metrics") is None
    assert layering_problem("trading_rl.algorithms.vtrace.actor_learner", "trading_rl.runtime.engine") is None
    assert layering_problem("trading_rl.pipelines.tracking", "trading_rl.integration.mlflow_tracking") is None
    assert layering_problem("trading_rl.integration.parameter_sections", "trading_rl.phases.walk_forward") is None
    assert layering_problem("trading_rl.settings", "trading_rl.integration.hooks") is None
    assert layering_problem("trading_rl.phases.walk_forward.chains", "trading_rl.runtime.engine") is None
    assert layering_problem("trading_rl.phases.multi_symbol", "trading_rl.algorithms.sac_icm.shared_encoder") is None
    assert layering_problem("trading_rl.pipelines.sac_icm.pipeline", "trading_rl.phases.sac_icm") is None
    assert layering_problem("trading_rl.pipelines.walk_forward.pipeline", "trading_rl.pipelines.tearsheet") is None
    assert layering_problem("trading_rl.pipelines.validation.pipeline", "trading_rl.pipelines.walk_forward") is None
    assert (
        layering_problem("trading_rl.algorithms.options_her.hierarchical", "trading_rl.algorithms.sac_icm.sac_icm")
        is None
    )
    assert layering_problem("trading_rl.algorithms.saved", "trading_rl.algorithms.options_her.hierarchical") is None
    assert layering_problem("trading_rl.algorithms.es.es", "trading_rl.training.params") is None
    assert layering_problem("trading_rl.evaluation.reporting.plots", "trading_rl.evaluation.validation.regimes") is None
    assert layering_problem("trading_rl.pipelines.validation.nodes", "trading_rl.pipelines.regime_validation.nodes")


def test_imports_inside_functions_and_relative_imports_are_seen(tmp_path, monkeypatch):
    package = tmp_path / "trading_rl" / "envs"
    package.mkdir(parents=True)
    (tmp_path / "trading_rl" / "training").mkdir()
    (tmp_path / "trading_rl" / "training" / "loop.py").write_text("")
    module = package / "spec.py"
    module.write_text("def f():\n    from ..training import loop\n    import trading_rl.phases.x\n")
    monkeypatch.setattr(__import__(__name__), "SOURCE", tmp_path / "trading_rl")
    assert imported_modules(module) == [
        (2, "trading_rl.training"),
        (2, "trading_rl.training.loop"),
        (3, "trading_rl.phases.x"),
    ]


# ---------------------------------------------------------------- import circles, node files, sections


def type_checking_lines(path: Path) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks (imports for annotations only, never executed)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in {getattr(test, "id", None), getattr(test, "attr", None)}:
            lines |= {
                line for child in node.body for line in range(child.lineno, (child.end_lineno or child.lineno) + 1)
            }
    return lines


def module_graph() -> dict[str, set[str]]:
    """Every module under ``src/trading_rl`` -> the project modules it imports when it runs (inside
    functions too; not ``TYPE_CHECKING`` imports). Importing ``a.b.c`` counts as an edge to ``a.b.c``
    only, and ``from a.b import c`` inside ``a.b`` not as an edge to ``a.b``, its own package."""
    modules = {module_name(path): path for path in SOURCE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        skipped = type_checking_lines(path)
        graph[name] = {
            imported
            for line, imported in imported_modules(path)
            if imported in modules and line not in skipped and not name.startswith(f"{imported}.") and imported != name
        }
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle_even_inside_functions():
    assert import_circles(module_graph()) == []


def test_a_circle_through_a_function_level_import_is_found():
    graph = {"trading_rl.phases.a": {"trading_rl.phases.b"}, "trading_rl.phases.b": {"trading_rl.phases.a"}}
    assert import_circles(graph) == [["trading_rl.phases.a", "trading_rl.phases.b"]]


BENCHMARKS = SOURCE.parents[1] / "benchmarks"


def node_file_imports() -> list[tuple[str, str]]:
    """``(importer, node module)`` for every import of a ``pipelines/<name>/nodes.py`` from outside
    that pipeline's folder, in ``src/trading_rl`` and ``benchmarks/``."""
    paths = [(module_name(path), path) for path in SOURCE.rglob("*.py")]
    paths += [(f"benchmarks.{path.stem}", path) for path in BENCHMARKS.glob("*.py")]
    found = []
    for importer, path in paths:
        for _, imported in imported_modules(path) if importer.startswith("trading_rl") else _imports_of(path):
            parts = imported.split(".")
            if len(parts) == 4 and parts[1] == "pipelines" and parts[3] == "nodes":
                if not importer.startswith(f"trading_rl.pipelines.{parts[2]}."):
                    found.append((importer, imported))
    return found


def _imports_of(path: Path) -> list[tuple[int, str]]:
    """``imported_modules`` for a file outside the package (absolute imports only)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return [(line, module) for line, module in found if module.startswith("trading_rl.")]


def test_no_node_file_is_imported_outside_its_pipeline():
    assert node_file_imports() == []


# Section resolution (``X.from_mapping``, ``resolved_section`` and the ``resolve_*`` functions of
# parameter sections) belongs to the resolution layer: the ``Section`` machinery (``config.py``, which
# also checks ``Overlay`` fields, so no section re-parses a mapping it holds), the run's sections
# (``integration/parameter_sections.py``) and the node wrapper that hands them over. Everything else
# takes typed sections. Not sections: these ``resolve_*`` helpers.
NOT_SECTION_RESOLVERS = {"resolve_device", "resolve_save_version", "resolve_load_version"}
RESOLVING_MODULES = ("config.py", "integration/parameter_sections.py", "pipelines/typed_node.py")
# The few callers of the resolution layer outside it, by function, and at most this many calls: the
# parameter check where Kedro hands a run's parameters over (before the first node), the conf file
# the registry wires multi_symbol's namespaces from, `trading-rl params` and the dashboard's defaults, and the served
# model's safeguards (serving/package.py: to move to ``stored_section``, see below).
RESOLVING_CALLERS = {
    "integration/hooks.py": {"ParameterValidationHooks.before_pipeline_run"},
    "pipelines/multi_symbol/pipeline.py": {"read_wiring"},
    "commands.py": {"resolved_parameters"},
}
MAX_RESOLUTIONS_OUTSIDE = 5
# A stored file that holds sections as plain data is read into them once, by the function that reads
# the file, through ``config.stored_section``: that is where the data enters, as parameters enter in a
# node, and what it returns holds no dict to resolve again. These functions, and no others, call it.
DESERIALISERS = {
    "envs/spec.py": {"EnvSpec.from_bytes"},  # an env spec archive's env config and market model
    "phases/feature_extraction.py": {"build_features"},  # the stored feature_params
    # a deployed model's deployment block, an exported actor's inference config, a served model's config
    "envs/deployment.py": {"stored_sections"},
    "serving/package.py": {"read_serving_config"},  # a served model's safeguards and alerting
}


def calls_of(path: Path, is_target: Callable[[str], bool]) -> list[tuple[str, int]]:
    """``(scope, line)`` of each call in ``path`` whose function name passes ``is_target``; ``scope``
    is the enclosing ``Class.method`` or ``function``. Calls inside a section's own ``from_mapping``
    (an override's ``super().from_mapping``: a definition, not a resolution) are left out."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, scope: str, in_definition: bool) -> None:
        for child in ast.iter_child_nodes(node):
            child_scope, inside = scope, in_definition
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                child_scope = f"{scope}.{child.name}" if scope else child.name
                inside = inside or (isinstance(node, ast.ClassDef) and child.name == "from_mapping")
            if isinstance(child, ast.Call) and not inside:
                name = getattr(child.func, "attr", None) or getattr(child.func, "id", "")
                if is_target(name):
                    found.append((child_scope, child.lineno))
            visit(child, child_scope, inside)

    visit(ast.parse(path.read_text(), str(path)), "", False)
    return found


def resolves_a_section(name: str) -> bool:
    return name in ("from_mapping", "resolved_section") or (
        name.startswith("resolve_") and name not in NOT_SECTION_RESOLVERS
    )


def calls_outside(modules: Collection[str], is_target: Callable[[str], bool]) -> dict[str, list[tuple[str, int]]]:
    """Per module outside ``modules``, the calls ``calls_of`` finds."""
    found = {}
    for path in sorted(SOURCE.rglob("*.py")):
        relative = path.relative_to(SOURCE).as_posix()
        if relative not in modules and (calls := calls_of(path, is_target)):
            found[relative] = calls
    return found


def test_sections_are_resolved_in_the_resolution_layer_only():
    """Nodes get typed sections from ``typed_node``; outside the resolution layer only the named
    callers resolve a section, at most ``MAX_RESOLUTIONS_OUTSIDE`` calls in all."""
    found = calls_outside(RESOLVING_MODULES, resolves_a_section)
    callers = {relative: {scope for scope, _ in calls} for relative, calls in found.items()}
    assert callers == RESOLVING_CALLERS, "wire the node with typed_node and take the typed section it hands over"
    assert sum(len(calls) for calls in found.values()) <= MAX_RESOLUTIONS_OUTSIDE, found


def test_stored_sections_are_read_where_the_file_is_read():
    """``stored_section`` is called by the named deserialisers and nowhere else (a renamed or moved
    one must not leave its entry behind)."""
    found = calls_outside(("config.py",), lambda name: name == "stored_section")
    assert {relative: {scope for scope, _ in calls} for relative, calls in found.items()} == DESERIALISERS


def test_the_resolution_count_sees_calls_and_not_overrides(tmp_path):
    """``calls_of`` finds a resolution anywhere in a function, but not an override's ``super()``."""
    module = tmp_path / "module.py"
    module.write_text(
        "class A(Section):\n"
        "    @classmethod\n"
        "    def from_mapping(cls, m, p, b):\n"
        "        return super().from_mapping(m, p, b)\n"
        "    def validate(self, prefix):\n"
        "        B.from_mapping(self.x, prefix)\n"
        "def node(raw):\n"
        "    return [resolved_section('a', raw), resolve_device('auto'), resolve_parameters(raw)]\n"
    )
    assert calls_of(module, resolves_a_section) == [("A.validate", 6), ("node", 8), ("node", 8)]


def test_a_phase_has_one_home():
    """A phase's code lives in ``phases/<phase>``; its pipeline only wires it (``pipeline.py``), so no
    pipeline with a phase home keeps a ``nodes.py`` beside it."""
    phases = {path.stem for path in (SOURCE / "phases").iterdir() if path.name != "__init__.py"} - {"__pycache__"}
    doubles = sorted(name for name in phases if (SOURCE / "pipelines" / name / "nodes.py").exists())
    assert doubles == [], f"phases/ and pipelines/<name>/nodes.py both hold {doubles}"


# Short where it is read (issue 44): no module over 450 lines, no function over 80 (the architecture
# page's length: tests/test_docs.py).
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 80


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name: lines`` of each function or method in ``path`` longer than ``limit`` lines (its
    ``def`` line to its last line, docstring included)."""
    return [
        f"{node.name}: {node.end_lineno - node.lineno + 1}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_80_lines():
    found = {
        path.relative_to(SOURCE).as_posix(): functions
        for path in sorted(SOURCE.rglob("*.py"))
        if (functions := long_functions(path))
    }
    assert found == {}, "split the function: each part a name that says what it does"


def test_a_long_function_is_found(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * 80)
    assert long_functions(module) == ["long: 81"]


def test_no_module_is_longer_than_450_lines():
    found = {
        relative: lines
        for path in sorted(SOURCE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
        and (relative := path.relative_to(SOURCE).as_posix())
    }
    assert found == {}, "split the module along what its parts are for"
