"""Rule compilation: topology in, P4Runtime-ready table entries out (pure functions)."""

from controller.routing.rail_routes import SwitchRules, compile_fabric, compile_switch
from controller.routing.topoopt_routes import HostRoute, compile_host_routes

__all__ = ["HostRoute", "SwitchRules", "compile_fabric", "compile_host_routes", "compile_switch"]
