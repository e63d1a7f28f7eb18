"""Finite numbers only: the checks every loader and every numeric command-line option use.

A NaN compares false with everything, so ``rate <= 0`` lets it through and every figure
computed from it becomes NaN; an infinity overflows an integer conversion far from where it
was typed. Each input is checked where it enters, and the message names it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["finite_float", "finite_floats", "is_finite_number", "nonfinite_fields", "nonnegative_float", "nonnegative_int", "number_problem",
           "parse_finite", "positive_float", "positive_int", "unit_fraction"]


def is_finite_number(value: Any) -> bool:
    """An int or float (never a bool) that is neither NaN nor infinite, nor an integer too
    large to become a float.

    >>> [is_finite_number(v) for v in (1, 2.5, float("nan"), float("inf"), True, "3", 10 ** 400)]
    [True, True, False, False, False, False, False]
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max
    return math.isfinite(value)


def number_problem(value: Any, *, minimum: float | None = None, above: float | None = None,
                   maximum: float | None = None, integer: bool = False) -> str | None:
    """What is wrong with ``value`` as a number in the given bounds (None: nothing).

    >>> number_problem(float("nan")), number_problem(-1, minimum=0), number_problem(0, above=0)
    ('must be a finite number', 'must be >= 0', 'must be > 0')
    >>> number_problem(2.5, integer=True), number_problem(3, maximum=2), number_problem(1.5, minimum=0)
    ('must be an integer', 'must be <= 2', None)
    """
    if integer and (isinstance(value, bool) or not isinstance(value, int)):
        return "must be an integer"
    if not is_finite_number(value):
        return "must be a finite number"
    if minimum is not None and value < minimum:
        return f"must be >= {minimum:g}"
    if above is not None and value <= above:
        return f"must be > {above:g}"
    if maximum is not None and value > maximum:
        return f"must be <= {maximum:g}"
    return None


def parse_finite(text: str) -> float:
    """``float(text)``, refusing NaN and the infinities with a ValueError (for parsers of
    compound options: ``RATE/DELAY``, ``a,b,c``).

    >>> parse_finite("2.5")
    2.5
    >>> parse_finite("1e400")
    Traceback (most recent call last):
    ...
    ValueError: '1e400' is not a finite number
    """
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def finite_floats(text: str) -> tuple[float, ...]:
    """An argparse type: a comma-separated list of finite numbers.

    >>> finite_floats("16,32.5")
    (16.0, 32.5)
    >>> finite_floats("16,nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: a comma-separated list of finite numbers, got '16,nan'
    """
    try:
        return tuple(parse_finite(x) for x in text.split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of finite numbers, got {text!r}") from None


def _float_type(name: str, *, minimum: float | None = None, above: float | None = None,
                maximum: float | None = None) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        problem = number_problem(value, minimum=minimum, above=above, maximum=maximum)
        if problem:
            raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
        return value

    parse.__name__ = name  # argparse names the type in its messages
    return parse


#: an argparse type: any finite number (``nan``, ``inf`` and ``1e400`` refused)
finite_float = _float_type("finite_float")
#: an argparse type: a finite number > 0 (a rate, a duration)
positive_float = _float_type("positive_float", above=0.0)
#: an argparse type: a finite number >= 0
nonnegative_float = _float_type("nonnegative_float", minimum=0.0)
#: an argparse type: a probability or share, 0..1
unit_fraction = _float_type("unit_fraction", minimum=0.0, maximum=1.0)


def _int_type(name: str, minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``.

    >>> positive_int("3"), nonnegative_int("0")
    (3, 0)
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '0': must be >= 1
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: must be >= {minimum}")
        return value

    parse.__name__ = name  # argparse names the type in its messages
    return parse


#: an argparse type: an integer >= 1
positive_int = _int_type("positive_int", 1)
#: an argparse type: an integer >= 0
nonnegative_int = _int_type("nonnegative_int", 0)


def nonfinite_fields(config: Any) -> Iterator[tuple[str, Any]]:
    """Every field of a dataclass (nested dataclasses, tuples and lists too) holding a float
    that is NaN or infinite, as ``(dotted name, value)``: what a configuration's
    ``validate()`` refuses before its own range checks, which a NaN passes.

    >>> @dataclasses.dataclass(frozen=True)
    ... class C:
    ...     rate: float = 1.0
    ...     levels: tuple[float, ...] = (0.5, float("inf"))
    >>> list(nonfinite_fields(C(rate=float("nan"))))
    [('rate', nan), ('levels[1]', inf)]
    """
    def walk(name: str, value: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(value, float) and not math.isfinite(value):
            yield name, value
        elif isinstance(value, tuple | list):
            for i, item in enumerate(value):
                yield from walk(f"{name}[{i}]", item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                yield from walk(f"{name}.{f.name}" if name else f.name, getattr(value, f.name))

    yield from walk("", config)
