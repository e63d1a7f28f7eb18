"""Stateful externs: counter, register and meter arrays."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pybmv2.errors import InvalidEntryError

__all__ = ["CounterArray", "MeterArray", "MeterRates", "RegisterArray"]


class CounterArray:
    """An indirect or direct counter array (packets and bytes are both kept)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.id: int = int(spec["id"])
        self.size: int = int(spec.get("size", 0))
        self.is_direct: bool = bool(spec.get("is_direct", False))
        self.binding: str | None = spec.get("binding")
        self.packets = [0] * self.size
        self.bytes = [0] * self.size

    def count(self, index: int, nbytes: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes

    def read(self, index: int) -> tuple[int, int]:
        self._check(index)
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        self._check(index)
        self.packets[index] = packets
        self.bytes[index] = nbytes

    def reset(self) -> None:
        self.packets = [0] * self.size
        self.bytes = [0] * self.size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise InvalidEntryError(
                f"counter {self.name!r}: index {index} out of range 0..{self.size - 1}"
            )


class RegisterArray:
    """A register array, read and written by the data plane only (as on BMv2's P4Runtime)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.id: int = int(spec["id"])
        self.size: int = int(spec.get("size", 0))
        self.bitwidth: int = int(spec.get("bitwidth", 32))
        self.mask = (1 << self.bitwidth) - 1
        self.values = [0] * self.size

    def read(self, index: int) -> int:
        return self.values[index] if 0 <= index < self.size else 0

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.values[index] = value & self.mask


@dataclass(frozen=True, slots=True)
class MeterRates:
    """A two-rate three-color meter configuration (rates per second, bursts in units)."""

    cir: int
    cburst: int
    pir: int
    pburst: int


GREEN, YELLOW, RED = 0, 1, 2


class MeterArray:
    """trTCM meters (RFC 2698) as BMv2 implements them; an unconfigured meter is green."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.id: int = int(spec["id"])
        self.size: int = int(spec.get("size", 0))
        self.is_direct: bool = bool(spec.get("is_direct", False))
        self.type: str = spec.get("type", "packets")
        self.rates: list[MeterRates | None] = [None] * self.size
        self._tokens: list[list[float]] = [[0.0, 0.0, 0.0] for _ in range(self.size)]

    def configure(self, index: int, rates: MeterRates | None) -> None:
        if not 0 <= index < self.size:
            raise InvalidEntryError(f"meter {self.name!r}: index {index} out of range")
        self.rates[index] = rates
        if rates is not None:
            self._tokens[index] = [float(rates.pburst), float(rates.cburst), time.monotonic()]

    def execute(self, index: int, nbytes: int) -> int:
        if not 0 <= index < self.size:
            return GREEN
        rates = self.rates[index]
        if rates is None:
            return GREEN
        tokens = self._tokens[index]
        now = time.monotonic()
        elapsed = now - tokens[2]
        tokens[2] = now
        tokens[0] = min(rates.pburst, tokens[0] + elapsed * rates.pir)
        tokens[1] = min(rates.cburst, tokens[1] + elapsed * rates.cir)
        units = 1 if self.type == "packets" else nbytes
        if tokens[0] < units:
            return RED
        tokens[0] -= units
        if tokens[1] < units:
            return YELLOW
        tokens[1] -= units
        return GREEN
