from kedro.pipeline import Pipeline

from trading_rl.phases.tuning import report, run
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                run.tune,
                inputs=[
                    "prices",
                    "params:tuning",
                    "params:walk_forward",
                    "params:feature_extraction",
                    "params:env_construction",
                    "params:sac_icm",
                    "params:seed",
                    "params:runtime",
                    "run_metadata",
                ],
                outputs=["tuning_trials", "trial_ledger", "tuned_parameters"],
                name="tune",
                tags=["train", "evaluate"],
            ),
            typed_node(
                report.report_tuning,
                inputs=["tuning_trials", "trial_ledger", "tuned_parameters", "run_metadata"],
                outputs=["tuning_report", "tuning_metrics"],
                name="report_tuning",
                tags=["report"],
            ),
        ]
    )
