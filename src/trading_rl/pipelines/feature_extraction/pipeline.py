from kedro.pipeline import Node, Pipeline

from trading_rl.phases.feature_extraction import scale_features
from trading_rl.pipelines.feature_extraction import nodes


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                nodes.load_and_validate_prices_node,
                inputs=["raw_price_files", "params:feature_extraction"],
                outputs="prices",
                name="load_and_validate_prices",
                tags=["data"],
            ),
            Node(
                nodes.define_splits_node,
                inputs=["prices", "params:feature_extraction"],
                outputs="splits",
                name="define_splits",
                tags=["data"],
            ),
            Node(
                nodes.report_price_quality_node,
                inputs=["prices", "splits", "params:feature_extraction"],
                outputs="price_quality_report",
                name="report_price_quality",
                tags=["report"],
            ),
            Node(
                nodes.fit_feature_params_node,
                inputs=["prices", "splits", "params:feature_extraction"],
                outputs="feature_params",
                name="fit_feature_params",
                tags=["data"],
            ),
            Node(
                nodes.build_features_node,
                inputs=["prices", "feature_params"],
                outputs="features",
                name="build_features",
                tags=["data"],
            ),
            Node(
                nodes.fit_scalers_node,
                inputs=["features", "prices", "splits", "params:feature_extraction"],
                outputs="scalers",
                name="fit_scalers",
                tags=["data"],
            ),
            Node(
                scale_features,
                inputs=["features", "scalers"],
                outputs="scaled_features",
                name="scale_features",
                tags=["data"],
            ),
        ]
    )
