"""mlfabric control plane: topology, rule compilation, P4Runtime client, CLI."""

__all__: list[str] = []
