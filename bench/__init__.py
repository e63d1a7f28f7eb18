"""Benchmarks (``make bench``): figures as ratios against baselines measured in the same run."""

__all__: list[str] = []
