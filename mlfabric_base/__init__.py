"""What every layer of mlfabric shares and none owns: the controller, the workloads, the
Python target and the Mininet layer all import from here, and this package imports none of
them."""

__all__: list[str] = []
