"""How the Python side addresses the engine built for one program: where each table,
profile and extern lives in it. Plain data, apart from the generator, so that a warm start
(:mod:`pybmv2.native.cache`) reads it back without importing the generator."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NativeManifest", "TableMeta"]


@dataclass(frozen=True, slots=True)
class TableMeta:
    """Where a table lives in the engine and how its keys are laid out in words."""

    tid: int
    pipeline: str
    name: str
    mode: str
    #: per key field: (match kind, bit width, first word, words)
    fields: tuple[tuple[str, int, int, int], ...]
    nwords: int
    profile: int | None  # the action profile id of an indirect table


@dataclass(frozen=True)
class NativeManifest:
    """How the Python side addresses the engine built for one program."""

    tables: tuple[TableMeta, ...]
    profiles: dict[tuple[str, str | None], int]
    counters: dict[str, int]
    registers: dict[str, tuple[int, int]]
    meters: dict[str, int]
    #: action id -> (first word, bit width) of each parameter in the action data
    action_args: dict[int, list[tuple[int, int]]]
    max_argw: int
    #: learn list id -> signedness of each field (to decode digest values)
    learn_signed: dict[int, tuple[bool, ...]]
    #: (name, size) of every header stack, then union stack: a fault record names its stack
    stacks: tuple[tuple[str, int], ...] = ()
    #: the engine's number of every parser value set, by name
    value_sets: dict[str, int] = field(default_factory=dict)

    def table(self, pipeline: str, name: str) -> TableMeta:
        for meta in self.tables:
            if meta.pipeline == pipeline and meta.name == name:
                return meta
        raise KeyError(f"{pipeline}.{name}")
