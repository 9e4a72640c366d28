from kedro.pipeline import Pipeline

from trading_rl.phases import options_her as phase
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.pipelines.typed_node import bound, typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                bound(phase.train_options_her, metrics_callback=stream_to_mlflow("options_her")),
                inputs=["env_spec", "sac_icm_model", "params:options_her", "params:seed"],
                outputs=["options_her_model", "options_her_training"],
                name="train_options_her",
                tags=["train"],
            ),
            typed_node(
                phase.evaluate_and_report,
                inputs=["options_her_model", "env_spec", "options_her_training", "params:options_her", "params:seed"],
                outputs=["option_usage_report", "her_report", "options_her_evaluation"],
                name="evaluate_options_her",
                tags=["evaluate"],
            ),
            tearsheet_node(
                "options_her",
                phase.options_her_tearsheet,
                ["options_her_model", "env_spec", "params:options_her", "params:seed", "params:regime_validation"],
                gates=["option_usage_report"],
            ),
        ]
    )
