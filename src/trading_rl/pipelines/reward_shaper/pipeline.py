from kedro.pipeline import Pipeline

from trading_rl.phases import reward_shaper as phase
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.pipelines.typed_node import bound, typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                phase.collect_reward_rollouts,
                inputs=["sac_icm_model", "env_spec", "params:reward_shaper", "params:seed"],
                outputs="reward_shaper_rollouts",
                name="collect_reward_rollouts",
                tags=["data"],
            ),
            typed_node(
                phase.fit_reward_shaper,
                inputs=["reward_shaper_rollouts", "sac_icm_model", "params:reward_shaper", "params:seed"],
                outputs=["objective_weight_network", "potential_function", "reward_shaper_fit"],
                name="fit_reward_shaper",
                tags=["train"],
            ),
            typed_node(
                bound(phase.train_shaped_agent, metrics_callback=stream_to_mlflow("reward_shaper")),
                inputs=[
                    "sac_icm_model",
                    "env_spec",
                    "objective_weight_network",
                    "potential_function",
                    "params:reward_shaper",
                    "params:seed",
                    "run_metadata",
                ],
                outputs=["reward_shaped_model", "reward_shaper_training"],
                name="train_shaped_agent",
                tags=["train"],
            ),
            typed_node(
                phase.report_reward_shaping,
                inputs=[
                    "reward_shaped_model",
                    "sac_icm_model",
                    "env_spec",
                    "reward_shaper_fit",
                    "reward_shaper_training",
                    "params:reward_shaper",
                    "params:seed",
                ],
                outputs=["reward_shaping_report", "reward_shaper_metrics"],
                name="report_reward_shaping",
                tags=["evaluate", "report"],
            ),
            tearsheet_node(
                "reward_shaper",
                phase.reward_shaper_tearsheet,
                [
                    "reward_shaped_model",
                    "sac_icm_model",
                    "env_spec",
                    "params:reward_shaper",
                    "params:seed",
                    "params:regime_validation",
                ],
                gates=["reward_shaping_report"],
            ),
        ]
    )
