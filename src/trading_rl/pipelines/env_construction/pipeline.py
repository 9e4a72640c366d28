from kedro.pipeline import Node, Pipeline

from trading_rl.pipelines.env_construction import nodes


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                nodes.symbol_env_spec_node,
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
            Node(nodes.check_env, inputs="env_spec", outputs="env_check_report", name="check_env", tags=["report"]),
        ]
    )
