from kedro.pipeline import Pipeline

from trading_rl.phases.walk_forward import report, run
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.tracking import log_history
from trading_rl.pipelines.typed_node import bound, typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                bound(run.walk_forward, log_history=log_history),
                inputs=[
                    "prices",
                    "params:walk_forward",
                    "params:feature_extraction",
                    "params:env_construction",
                    "params:sac_icm",
                    "params:seed",
                    "params:runtime",
                ],
                outputs=["walk_forward_folds", "walk_forward_returns", "walk_forward_models"],
                name="walk_forward",
                tags=["train", "evaluate"],
            ),
            typed_node(
                run.record_walk_forward_trials,
                inputs=[
                    "walk_forward_returns",
                    "prices",
                    "params:walk_forward",
                    "params:feature_extraction",
                    "params:env_construction",
                    "params:sac_icm",
                    "params:seed",
                    "run_metadata",
                ],
                outputs="trial_ledger",
                name="record_walk_forward_trials",
                tags=["report"],
            ),
            typed_node(
                run.summarise_walk_forward,
                inputs=[
                    "walk_forward_folds",
                    "walk_forward_returns",
                    "trial_ledger",
                    "prices",
                    "params:env_construction",
                ],
                outputs=["walk_forward_summary", "walk_forward_equity"],
                name="summarise_walk_forward",
                tags=["report"],
            ),
            typed_node(
                report.plot_walk_forward,
                inputs=["walk_forward_folds", "walk_forward_equity"],
                outputs=[
                    "walk_forward_equity_plot",
                    "walk_forward_sharpe_plot",
                    "walk_forward_actions_plot",
                ],
                name="plot_walk_forward",
                tags=["plot"],
            ),
            tearsheet_node(
                "walk_forward",
                report.walk_forward_tearsheet,
                ["walk_forward_equity", "prices", "params:env_construction", "params:regime_validation"],
                ledger="trial_ledger",
                gates=["walk_forward_summary"],
            ),
        ]
    )
