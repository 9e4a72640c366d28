from kedro.pipeline import Node, Pipeline

from trading_rl.pipelines.promote import nodes


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                nodes.promote_model,
                inputs=["registered_versions", "params:promote", "run_metadata"],
                outputs=["promotion", "promotion_report"],
                name="promote_model",
                tags=["export"],
            )
        ]
    )
