from kedro.pipeline import Pipeline

from trading_rl.phases.forward import data, decay, record, report
from trading_rl.pipelines.tearsheet import tearsheet_node
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                data.prepare_forward_data,
                inputs=["deployed_model", "deployment", "raw_price_files", "params:feature_extraction"],
                outputs="forward_data",
                name="prepare_forward_data",
                tags=["data"],
            ),
            typed_node(
                record.score_forward_bars,
                inputs=["deployed_model", "forward_data", "previous_forward_record", "run_metadata", "params:forward"],
                outputs="forward_record",
                name="score_forward_bars",
                tags=["evaluate"],
            ),
            typed_node(
                report.report_forward,
                inputs=["forward_record", "forward_data", "deployment", "run_metadata", "params:seed"],
                outputs="forward_report",
                name="report_forward",
                tags=["evaluate"],
            ),
            typed_node(
                report.measure_forward_drift,
                inputs=["deployed_model", "forward_data", "forward_record", "params:forward"],
                outputs="forward_drift",
                name="measure_forward_drift",
                tags=["evaluate"],
            ),
            typed_node(
                decay.check_forward_decay,
                inputs=[
                    "forward_report",
                    "forward_record",
                    "forward_drift",
                    "walk_forward_folds",
                    "params:forward",
                    "forward_data",
                    "params:alerting",
                ],
                outputs=["forward_alerts", "forward_metrics"],
                name="check_forward_decay",
                tags=["report"],
            ),
            tearsheet_node(
                "forward",
                report.forward_tearsheet,
                ["forward_record", "forward_data", "forward_drift", "params:seed", "params:regime_validation"],
                gates=["forward_alerts"],
            ),
        ]
    )
