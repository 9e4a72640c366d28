from kedro.pipeline import Pipeline

from trading_rl.phases import checkpoint_migration as phase
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.pipelines.typed_node import bound, typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                phase.check_and_back_up_legacy_checkpoints,
                inputs=["legacy_checkpoints", "env_spec", "params:checkpoint_migration"],
                outputs="legacy_checkpoint_backups",
                name="check_and_back_up_legacy_checkpoints",
                tags=["data"],
            ),
            typed_node(
                phase.provide_discrete_checkpoints,
                inputs=["legacy_checkpoint_backups", "env_spec", "params:checkpoint_migration", "params:seed"],
                outputs="discrete_checkpoints",
                name="provide_discrete_checkpoints",
                tags=["train"],
            ),
            typed_node(
                phase.migrate_checkpoints,
                inputs=[
                    "discrete_checkpoints",
                    "env_spec",
                    "params:checkpoint_migration",
                    "params:seed",
                    "run_metadata",
                ],
                outputs=["migrated_models", "migration_report"],
                name="migrate_checkpoints",
                tags=["train"],
            ),
            typed_node(
                bound(
                    phase.fine_tune_models,
                    metrics_callback_for=lambda stem: stream_to_mlflow(f"checkpoint_migration/{stem}"),
                ),
                inputs=["migrated_models", "env_spec", "params:checkpoint_migration", "params:seed"],
                outputs="fine_tuned_models",
                name="fine_tune_migrated_models",
                tags=["train"],
            ),
            typed_node(
                phase.compare_discrete_and_continuous,
                inputs=[
                    "discrete_checkpoints",
                    "migrated_models",
                    "fine_tuned_models",
                    "env_spec",
                    "params:checkpoint_migration",
                    "params:seed",
                ],
                outputs="migration_comparison",
                name="compare_discrete_and_continuous",
                tags=["evaluate"],
            ),
            tearsheet_node(
                "checkpoint_migration",
                phase.checkpoint_migration_tearsheet,
                [
                    "migrated_models",
                    "fine_tuned_models",
                    "env_spec",
                    "params:checkpoint_migration",
                    "params:seed",
                    "params:regime_validation",
                ],
                gates=["migration_comparison"],
            ),
        ]
    )
