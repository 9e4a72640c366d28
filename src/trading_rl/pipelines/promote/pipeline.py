from kedro.pipeline import Pipeline

from trading_rl.pipelines.promote import nodes
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                nodes.promote_model,
                inputs=["registered_versions", "params:promote", "run_metadata"],
                outputs=["promotion", "promotion_report"],
                name="promote_model",
                tags=["export"],
            )
        ]
    )
