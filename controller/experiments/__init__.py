"""Experiments: configuration, aggregation and results of each emulated experiment."""
