from kedro.pipeline import Node, Pipeline

from trading_rl.pipelines.regime_validation import nodes


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                nodes.label_market_regimes,
                inputs=["prices", "params:regime_validation"],
                outputs="regime_labels",
                name="label_market_regimes",
            ),
            Node(
                nodes.evaluate_regimes,
                inputs=["sac_icm_model", "env_spec", "regime_labels", "params:regime_validation", "params:seed"],
                outputs="regime_metrics",
                name="evaluate_regimes",
            ),
            Node(
                nodes.plot_regimes,
                inputs=["prices", "regime_labels", "env_spec", "params:regime_validation"],
                outputs=["regime_prices_plot", "regime_prices_plot_mlflow"],
                name="plot_regimes",
            ),
        ]
    )
