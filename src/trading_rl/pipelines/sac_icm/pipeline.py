from kedro.pipeline import Pipeline

from trading_rl.phases import sac_icm
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.pipelines.typed_node import bound, typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                bound(sac_icm.train_sac_icm, metrics_callback=stream_to_mlflow("sac_icm")),
                inputs=[
                    "env_spec",
                    "params:sac_icm",
                    "params:seed",
                    "run_metadata",
                    "feature_params",
                    "params:env_construction",
                    "params:feature_extraction",
                ],
                outputs=[
                    "sac_icm_model",
                    "sac_icm_best_model",
                    "sac_icm_training_history",
                ],
                name="train_sac_icm",
                tags=["train"],
            ),
            typed_node(
                sac_icm.evaluate_sac_icm,
                inputs=["sac_icm_model", "env_spec", "params:sac_icm", "params:seed"],
                outputs=["sac_icm_evaluation_report", "sac_icm_collapse_report", "sac_icm_eval_metrics"],
                name="evaluate_sac_icm",
                tags=["evaluate"],
            ),
            tearsheet_node(
                "sac_icm",
                sac_icm.sac_icm_tearsheet,
                ["sac_icm_model", "env_spec", "params:sac_icm", "params:seed", "params:regime_validation"],
                gates=["sac_icm_collapse_report"],
            ),
        ]
    )
