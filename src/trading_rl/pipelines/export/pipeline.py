"""One export node per exported agent.

Kedro wires nodes before it reads parameters, so the agents are a module constant rather than a
parameter; to export another SB3 SAC agent, add its catalog name here (outputs follow the catalog
patterns ``{agent}_onnx``, ``{agent}_export_report``, ``{agent}_inference_config`` and
``{agent}_served``, the served model's package that the MLflow hooks log and, where the catalog
names a registered model for it, register).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial, update_wrapper

from kedro.pipeline import Pipeline

from trading_rl.pipelines.export import nodes
from trading_rl.pipelines.typed_node import typed_node

EXPORTED_AGENTS = ("sac_icm_model",)


def create_pipeline(agents: Sequence[str] = EXPORTED_AGENTS, **kwargs) -> Pipeline:
    return Pipeline(
        [
            node
            for agent in agents
            for node in (
                typed_node(
                    update_wrapper(partial(nodes.export_agent, model_dataset=agent), nodes.export_agent),
                    inputs=[agent, "env_spec", "feature_params", "scalers", "params:export", "params:seed"],
                    outputs=[f"{agent}_onnx", f"{agent}_export_report", f"{agent}_inference_config"],
                    name=f"export_{agent}",
                    tags=["export"],
                ),
                typed_node(
                    update_wrapper(
                        partial(nodes.package_served_model, model_dataset=agent), nodes.package_served_model
                    ),
                    inputs=[
                        agent,
                        f"{agent}_onnx",
                        f"{agent}_inference_config",
                        "env_spec",
                        "prices",
                        "params:serving",
                        "params:alerting",
                        "run_metadata",
                    ],
                    outputs=f"{agent}_served",
                    name=f"package_served_{agent}",
                    tags=["export"],
                ),
            )
        ]
    )
