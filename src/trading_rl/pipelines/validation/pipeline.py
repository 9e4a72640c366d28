from kedro.pipeline import Pipeline

from trading_rl.pipelines.forward import create_pipeline as forward
from trading_rl.pipelines.regime_validation import create_pipeline as regime_validation
from trading_rl.pipelines.typed_node import typed_node
from trading_rl.pipelines.validation import nodes
from trading_rl.pipelines.walk_forward import create_pipeline as walk_forward


def create_pipeline(**kwargs) -> Pipeline:
    return (
        walk_forward()
        + regime_validation()
        # The deployed agent's forward record; without a deployed model its nodes report "no deployed model".
        + forward()
        + Pipeline(
            [
                typed_node(
                    nodes.build_validation_report,
                    inputs=[
                        "walk_forward_folds",
                        "walk_forward_returns",
                        "walk_forward_summary",
                        "regime_metrics",
                        "params:validation",
                        "run_metadata",
                    ],
                    outputs="validation_report",
                    name="build_validation_report",
                    tags=["report"],
                ),
                typed_node(
                    nodes.compare_with_previous,
                    inputs=["validation_report", "previous_validation_report", "params:validation"],
                    outputs="validation_comparison",
                    name="compare_with_previous_validation",
                    tags=["report"],
                ),
                typed_node(
                    nodes.enforce_gates,
                    inputs=["validation_report", "validation_comparison", "params:validation"],
                    outputs=None,
                    name="enforce_validation_gates",
                    tags=["report"],
                ),
            ]
        )
    )
