from kedro.pipeline import Pipeline

from trading_rl.pipelines.regime_validation import nodes
from trading_rl.pipelines.typed_node import typed_node


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            typed_node(
                nodes.label_market_regimes,
                inputs=["prices", "walk_forward_returns", "params:regime_validation"],
                outputs="regime_labels",
                name="label_market_regimes",
                tags=["data"],
            ),
            typed_node(
                nodes.evaluate_regimes,
                inputs=["walk_forward_returns", "regime_labels", "prices", "params:env_construction"],
                outputs="regime_metrics",
                name="evaluate_regimes",
                tags=["evaluate"],
            ),
            typed_node(
                nodes.plot_regimes,
                inputs=["prices", "regime_labels", "walk_forward_returns"],
                outputs="regime_prices_plot",
                name="plot_regimes",
                tags=["plot"],
            ),
        ]
    )
