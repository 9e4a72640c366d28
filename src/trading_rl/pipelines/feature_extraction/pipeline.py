from kedro.pipeline import Pipeline

from trading_rl.phases import feature_extraction as phase
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                phase.load_and_validate_prices,
                inputs=["raw_price_files", "params:feature_extraction"],
                outputs="prices",
                name="load_and_validate_prices",
                tags=["data"],
            ),
            typed_node(
                phase.define_splits,
                inputs=["prices", "params:feature_extraction"],
                outputs="splits",
                name="define_splits",
                tags=["data"],
            ),
            typed_node(
                phase.report_price_quality,
                inputs=["prices", "splits", "params:feature_extraction"],
                outputs="price_quality_report",
                name="report_price_quality",
                tags=["report"],
            ),
            typed_node(
                phase.fit_feature_params,
                inputs=["prices", "splits", "params:feature_extraction"],
                outputs="feature_params",
                name="fit_feature_params",
                tags=["data"],
            ),
            typed_node(
                phase.build_features,
                inputs=["prices", "feature_params"],
                outputs="features",
                name="build_features",
                tags=["data"],
            ),
            typed_node(
                phase.fit_scalers,
                inputs=["features", "prices", "splits", "params:feature_extraction"],
                outputs="scalers",
                name="fit_scalers",
                tags=["data"],
            ),
            typed_node(
                phase.scale_features,
                inputs=["features", "scalers"],
                outputs="scaled_features",
                name="scale_features",
                tags=["data"],
            ),
        ]
    )
