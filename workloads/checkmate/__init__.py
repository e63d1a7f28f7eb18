"""Checkmate-style in-network checkpointing: the trainer, the shadow and their pure parts."""

__all__: list[str] = []
