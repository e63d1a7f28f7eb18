"""Experiments: configuration, aggregation and results of each emulated experiment."""

from controller.experiments.rail_only import ExperimentConfig, comparison, model_times, summarize
from controller.experiments.results import new_results_dir, plot_collectives, write_csv, write_json

__all__ = [
    "ExperimentConfig",
    "comparison",
    "model_times",
    "new_results_dir",
    "plot_collectives",
    "summarize",
    "write_csv",
    "write_json",
]
