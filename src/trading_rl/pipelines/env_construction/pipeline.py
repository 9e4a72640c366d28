from kedro.pipeline import Pipeline

from trading_rl.envs import symbol_env_spec
from trading_rl.pipelines.env_construction import nodes
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                symbol_env_spec,
                inputs=[
                    "prices",
                    "scaled_features",
                    "splits",
                    "params:env_construction",
                    "scalers",
                    "params:feature_extraction",
                ],
                outputs="env_spec",
                name="build_env_spec",
                tags=["data"],
            ),
            typed_node(
                nodes.check_env, inputs="env_spec", outputs="env_check_report", name="check_env", tags=["report"]
            ),
        ]
    )
