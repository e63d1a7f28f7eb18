"""Rule compilation: topology in, P4Runtime-ready table entries out (pure functions)."""

from controller.routing.rail_routes import SwitchRules, compile_fabric, compile_switch

__all__ = ["SwitchRules", "compile_fabric", "compile_switch"]
