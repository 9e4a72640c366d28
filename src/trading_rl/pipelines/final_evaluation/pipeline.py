from kedro.pipeline import Pipeline

from trading_rl.pipelines.final_evaluation import nodes
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                nodes.check_final_evaluation,
                inputs=[
                    "prior_trial_ledger",
                    "sac_icm_model",
                    "env_spec",
                    "params:final_evaluation",
                    "params:sac_icm",
                    "params:env_construction",
                    "params:feature_extraction",
                    "params:seed",
                ],
                outputs="final_evaluation_claim",
                name="check_final_evaluation",
                tags=["evaluate"],
            ),
            typed_node(
                nodes.evaluate_final,
                inputs=[
                    "sac_icm_model",
                    "env_spec",
                    "final_evaluation_claim",
                    "prior_trial_ledger",
                    "params:seed",
                    "run_metadata",
                ],
                outputs=["final_evaluation_report", "trial_ledger"],
                name="evaluate_final",
                tags=["evaluate"],
            ),
            tearsheet_node(
                "final_evaluation",
                nodes.final_evaluation_tearsheet,
                ["sac_icm_model", "env_spec", "final_evaluation_claim", "params:seed", "params:regime_validation"],
                gates=["final_evaluation_report"],
            ),
        ]
    )
