"""Stateful externs: counter, register and meter arrays."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybmv2.errors import InvalidEntryError

__all__ = ["CounterArray", "MeterArray", "MeterCell", "MeterRates", "RegisterArray", "meter_cell"]


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
        #: told ``(array, index)`` after the control plane writes a cell, or None
        self.observer: Callable[[CounterArray, int], None] | None = None

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
        if self.observer is not None:
            self.observer(self, index)

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


class MeterCell:
    """One configured trTCM meter (RFC 2698) as BMv2 implements it."""

    __slots__ = ("_tokens", "rates")

    def __init__(self, rates: MeterRates) -> None:
        self.rates = rates
        self._tokens = [float(rates.pburst), float(rates.cburst), time.monotonic()]

    def execute(self, units: int) -> int:
        """The colour of a packet of ``units`` (1 for packet meters, else its bytes)."""
        rates, tokens = self.rates, self._tokens
        now = time.monotonic()
        elapsed = now - tokens[2]
        tokens[2] = now
        tokens[0] = min(rates.pburst, tokens[0] + elapsed * rates.pir)
        tokens[1] = min(rates.cburst, tokens[1] + elapsed * rates.cir)
        if tokens[0] < units:
            return RED
        tokens[0] -= units
        if tokens[1] < units:
            return YELLOW
        tokens[1] -= units
        return GREEN


def meter_cell(rates: MeterRates | None) -> MeterCell | None:
    """A fresh meter for ``rates``; None (always green) for an unconfigured one."""
    return None if rates is None else MeterCell(rates)


class MeterArray:
    """trTCM meters; an unconfigured meter is green.

    A direct meter (``is_direct``) keeps no cells here: each entry of its ``binding`` table
    holds its own :class:`MeterCell`, and a hit writes the colour to ``result_target``.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.id: int = int(spec["id"])
        self.is_direct: bool = bool(spec.get("is_direct", False))
        self.size: int = 0 if self.is_direct else int(spec.get("size", 0))
        self.type: str = spec.get("type", "packets")
        self.binding: str | None = spec.get("binding")
        target = spec.get("result_target")
        #: the (header, field) a direct meter's colour goes to
        self.result_target: tuple[str, str] | None = (target[0], target[1]) if target else None
        self.cells: list[MeterCell | None] = [None] * self.size
        #: told ``(array, index)`` after a cell is configured, or None
        self.observer: Callable[[MeterArray, int], None] | None = None

    def units(self, nbytes: int) -> int:
        """What one packet of ``nbytes`` costs: 1 for packet meters, else its bytes."""
        return 1 if self.type == "packets" else nbytes

    def configure(self, index: int, rates: MeterRates | None) -> None:
        if not 0 <= index < self.size:
            raise InvalidEntryError(f"meter {self.name!r}: index {index} out of range")
        self.cells[index] = meter_cell(rates)
        if self.observer is not None:
            self.observer(self, index)

    def rates(self, index: int) -> MeterRates | None:
        cell = self.cells[index]
        return None if cell is None else cell.rates

    def execute(self, index: int, nbytes: int) -> int:
        cell = self.cells[index] if 0 <= index < self.size else None
        return GREEN if cell is None else cell.execute(self.units(nbytes))
