"""Strict loading of the component price/power file of the cost model.

The file (default ``topologies/params/rail_only_costs.yaml``) gives every number as
``{value: ..., source: "..."}``. Unknown keys, missing keys, wrong types and numbers without
a source are rejected with one :class:`~controller.errors.ConfigError` that names the file,
the key path and the value. :func:`parse_cost_params` is pure; :func:`load_cost_params`
only adds the file read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.errors import ConfigError
from controller.models.cost import ClusterSpec, ComponentCosts
from mlfabric_base.numbers import number_problem

__all__ = ["DEFAULT_COST_FILE", "CostParams", "load_cost_params", "parse_cost_params"]

DEFAULT_COST_FILE = Path(__file__).resolve().parents[2] / "topologies" / "params" / "rail_only_costs.yaml"

_SECTIONS: dict[str, tuple[str, ...]] = {
    "switch": ("radix", "port_gbps", "price_usd", "price_per_port_usd", "power_w", "power_per_port_w"),
    "switch_transceiver": ("price_usd", "power_w"),
    "nic_transceiver": ("price_usd", "power_w"),
    "cable": ("price_usd", "power_w"),
}
_TOP = (*_SECTIONS, "count_host_links")


@dataclass(frozen=True)
class CostParams:
    """The loaded file: unit costs, the switch model and the source of every number."""

    costs: ComponentCosts
    radix: int
    port_gbps: float
    file: str
    sources: Mapping[str, str] = field(default_factory=dict)

    def spec(self, gpus: int, hb_domain: int = 8, oversubscription: float = 1.0) -> ClusterSpec:
        """A :class:`ClusterSpec` with this file's switch radix."""
        return ClusterSpec(gpus, hb_domain, self.radix, oversubscription)


class _Reader:
    def __init__(self, file: str) -> None:
        self.file = file
        self.sources: dict[str, str] = {}

    def fail(self, key: str, value: Any, problem: str) -> ConfigError:
        return ConfigError(self.file, key, value, problem)

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key or "<top>", value, "expected a mapping")
        for k, v in value.items():
            if k not in allowed:
                raise self.fail(f"{key}.{k}" if key else str(k), v,
                                f"unknown key (allowed: {', '.join(allowed)})")
        for k in required:
            if k not in value:
                raise self.fail(f"{key}.{k}" if key else k, None, "required key is missing")
        return value

    def sourced(self, value: Any, key: str) -> Any:
        entry = self.mapping(value, key, ("value", "source"), ("value", "source"))
        source = entry["source"]
        if not isinstance(source, str) or not source.strip():
            raise self.fail(f"{key}.source", source, "expected a non-empty string naming the source")
        self.sources[key] = source
        return entry["value"]

    def number(self, value: Any, key: str) -> float:
        v = self.sourced(value, key)
        if number_problem(v, minimum=0) is not None:
            raise self.fail(f"{key}.value", v, "expected a finite non-negative number")
        return float(v)

    def flag(self, value: Any, key: str) -> bool:
        v = self.sourced(value, key)
        if not isinstance(v, bool):
            raise self.fail(f"{key}.value", v, "expected true or false")
        return v


def parse_cost_params(doc: Any, file: str = "<cost params>") -> CostParams:
    """Validate a parsed YAML document and build :class:`CostParams`.

    Examples
    --------
    >>> n = lambda v: {"value": v, "source": "test"}
    >>> doc = {"switch": {k: n(1) for k in _SECTIONS["switch"]},
    ...        "switch_transceiver": {"price_usd": n(2), "power_w": n(3)},
    ...        "nic_transceiver": {"price_usd": n(2), "power_w": n(3)},
    ...        "cable": {"price_usd": n(1), "power_w": n(0)}, "count_host_links": n(True)}
    >>> doc["switch"]["radix"] = n(64)
    >>> parse_cost_params(doc).radix
    64
    >>> doc["cable"]["colour"] = "blue"
    >>> parse_cost_params(doc, "x.yaml")
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: x.yaml: cable.colour: unknown key (allowed: description, price_usd, power_w) (got 'blue')
    """
    r = _Reader(file)
    top = r.mapping(doc, "", _TOP, _TOP)
    values: dict[str, dict[str, float]] = {}
    for section, keys in _SECTIONS.items():
        body = r.mapping(top[section], section, ("description", *keys), keys)
        if "description" in body and not isinstance(body["description"], str):
            raise r.fail(f"{section}.description", body["description"], "expected a string")
        values[section] = {k: r.number(body[k], f"{section}.{k}") for k in keys}
    sw = values["switch"]
    radix = sw["radix"]
    if radix != int(radix) or radix < 2 or int(radix) % 2:
        raise r.fail("switch.radix.value", radix, "expected an even integer >= 2")
    if sw["port_gbps"] <= 0:
        raise r.fail("switch.port_gbps.value", sw["port_gbps"], "must be > 0")
    costs = ComponentCosts(
        switch_price_usd=sw["price_usd"], switch_power_w=sw["power_w"],
        switch_transceiver_price_usd=values["switch_transceiver"]["price_usd"],
        switch_transceiver_power_w=values["switch_transceiver"]["power_w"],
        nic_transceiver_price_usd=values["nic_transceiver"]["price_usd"],
        nic_transceiver_power_w=values["nic_transceiver"]["power_w"],
        cable_price_usd=values["cable"]["price_usd"], cable_power_w=values["cable"]["power_w"],
        switch_price_per_port_usd=sw["price_per_port_usd"], switch_power_per_port_w=sw["power_per_port_w"],
        count_host_links=r.flag(top["count_host_links"], "count_host_links"),
    )
    return CostParams(costs, int(radix), sw["port_gbps"], file, dict(r.sources))


def load_cost_params(path: str | Path = DEFAULT_COST_FILE) -> CostParams:
    """Read and parse a cost parameter file; every problem is a ConfigError naming the file."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(str(p), "<file>", str(p), f"cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(str(p), "<file>", str(p), f"not valid YAML: {exc}") from exc
    return parse_cost_params(doc, str(p))
