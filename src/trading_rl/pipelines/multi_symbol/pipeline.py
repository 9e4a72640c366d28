"""One namespace per symbol, wired from ``conf/base/parameters_multi_symbol.yml``.

Kedro builds the pipeline registry before it resolves parameters, so the symbol list (and whether the
shared encoder node exists) is read from that file here; adding a symbol is a change to that file
(the symbol must also be in ``feature_extraction.symbols``). The phase's functions check at run time
that the resolved ``multi_symbol.symbols`` still matches the wiring.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from kedro.pipeline import Pipeline
from kedro.utils import find_kedro_project

from trading_rl.integration.parameter_sections import resolved_section
from trading_rl.phases import multi_symbol as phase
from trading_rl.phases.multi_symbol import MultiSymbolParams
from trading_rl.phases.walk_forward.population import make_executor
from trading_rl.pipelines.tracking import log_history
from trading_rl.pipelines.typed_node import bound, typed_node

WIRING_FILE = Path("conf") / "base" / "parameters_multi_symbol.yml"
ENCODER = "multi_symbol_shared_encoder"


def read_wiring(project_root: Path | None = None) -> MultiSymbolParams:
    """The validated ``multi_symbol`` section of ``conf/base`` under ``project_root`` (default: the
    Kedro project containing the working directory, so notebooks in ``notebooks/`` work too)."""
    root = project_root or find_kedro_project(Path.cwd()) or Path.cwd()
    path = root / WIRING_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the multi_symbol pipeline builds one namespace per symbol listed under "
            "'multi_symbol.symbols' there when the pipeline registry is built; run kedro inside the project"
        )
    # Through the resolution layer: the run's parameter check then finds this parse, not a second one.
    return resolved_section("multi_symbol", (yaml.safe_load(path.read_text()) or {}).get("multi_symbol"))


def create_pipeline(project_root: Path | None = None, **kwargs) -> Pipeline:
    wiring = read_wiring(project_root)
    symbols = wiring.symbols
    with_encoder = wiring.shared_encoder.enabled
    shared_data = ["prices", "scaled_features", "splits"]
    parameters = {"params:env_construction", "params:multi_symbol", "params:sac_icm", "params:seed", "params:runtime"}

    encoder = Pipeline(
        [
            typed_node(
                bound(phase.fit_encoder, wired_symbols=symbols),
                inputs=[*shared_data, "params:env_construction", "params:multi_symbol", "params:seed"],
                outputs=[ENCODER, "multi_symbol_encoder_report"],
                name="fit_shared_encoder",
                tags=["train"],
            )
        ]
    )
    per_symbol = [
        Pipeline(
            [
                typed_node(
                    bound(phase.build_symbol_spec, symbol=symbol, wired_symbols=symbols),
                    inputs=[*shared_data, "params:env_construction", "params:multi_symbol"],
                    outputs="env_spec",
                    name="build_symbol_env_spec",
                    tags=["data"],
                ),
                typed_node(
                    bound(phase.train_symbol, make_executor=make_executor, log_history=log_history),
                    inputs=[
                        "env_spec",
                        "params:sac_icm",
                        "params:seed",
                        "run_metadata",
                        "params:runtime",
                        *([ENCODER] if with_encoder else []),
                    ],
                    outputs=["sac_icm_model", "sac_icm_best_model", "sac_icm_training_history"],
                    name="train_symbol_agent",
                    tags=["train"],
                ),
            ],
            namespace=symbol,
            inputs={*shared_data, "run_metadata", *([ENCODER] if with_encoder else [])},
            parameters=parameters,
        )
        for symbol in symbols
    ]
    return (encoder if with_encoder else Pipeline([])) + sum(per_symbol, Pipeline([]))
