"""The figures a page shows and the committed run they come from.

A figure is a number as the page prints it: a decimal (``1.65``, ``2.13x``), a percentage
(``+0.8%``, ``41%``) or an integer of two digits or more (``150``, ``76,810``; single digits
are counts in a sentence far more often than results). Each has a kind, and a page's figure
is tied to the run only by a run value of the same kind that the page's rounding turns into
it: ``0.897`` is a run's ``0.8971``, not its ``0.90``; ``41%`` a run's ``41%`` or ``40.6%``,
never its ``0.41``; an integer an integer or a decimal rounded to none.

Versions, addresses and names (``1.2.4.8``, ``10.200.0.2``, ``eth1``, ``4x4``, ``95% CI``),
inline code and link targets are not figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

__all__ = ["Figure", "figures", "run_values", "untied"]

#: a number with an optional sign, thousands separators, decimals and a percent sign; what
#: surrounds it is checked in ``figures``
_NUMBER = re.compile(r"(?P<sign>[+\-\u2212])?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?P<pct>%)?")
#: what may follow a figure directly: a unit glued to it, nothing else that is a letter
_GLUED_UNITS = ("x", "s", "ms", "us")
_CODE = re.compile(r"`[^`]*`")
_RANGE_TO_PERCENT = re.compile(r"[-\u2013]\d+(?:\.\d+)?%")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")


@dataclass(frozen=True)
class Figure:
    kind: str  # "decimal", "percent" or "integer"
    text: str  # as shown, without sign or thousands separators: "1.65", "41", "76810"

    @property
    def places(self) -> int:
        return len(self.text.split(".")[1]) if "." in self.text else 0


def _figure(text: str, m: re.Match[str]) -> Figure | None:
    """The figure ``m`` matched in ``text``, or None where it is part of a name, a version or
    an address. A sign after a letter or digit is a range's dash (``1.29-1.36``), not a sign."""
    start = m.start()
    if m.group("sign") and start and (text[start - 1].isalnum() or text[start - 1] in "_."):
        start = m.start("int")
    before = text[start - 1] if start else " "
    after = text[m.end():m.end() + 3]
    if before.isalnum() or before in "_.:#" or (before == "-" and start > 1 and text[start - 2].isalpha()
                                                 and not text[start - 2:start].lower().endswith("x-")):
        return None  # a name: eth1, d3, rail-only-4, h0_0
    if after[:1] in ".," and after[1:2].isdigit():
        return None  # a version, an address or a list without spaces: 1.2.4, 10.200.0.2
    if m.group("pct") and re.match(r" (CI|confidence)", text[m.end():m.end() + 11]):
        return None  # the name of an interval: 95% CI
    word = re.match(r"[A-Za-z_]+", after)
    if word and not m.group("pct") and (word.group(0) not in _GLUED_UNITS or after[1:2].isdigit()):
        return None  # a name or a shape: 2nd, 64KiB, 4x4
    whole = m.group("int").replace(",", "")
    if m.group("pct") or _RANGE_TO_PERCENT.match(text, m.end()):  # 14-18%: both ends are percentages
        return Figure("percent", whole + (m.group("frac") or ""))
    if m.group("frac"):
        return Figure("decimal", whole + m.group("frac"))
    return Figure("integer", whole)


def figures(text: str, *, integers_from: int = 10) -> list[Figure]:
    """The figures of ``text`` (prose or a table row) in order."""
    text = _LINK_TARGET.sub("]", _CODE.sub(" ", text))
    found = (_figure(text, m) for m in _NUMBER.finditer(text))
    return [f for f in found if f is not None and (f.kind != "integer" or int(f.text) >= integers_from)]


def run_values(text: str) -> dict[str, set[str]]:
    """What a page may show from run ``text``, per kind: every value at every rounding from
    its own places down to none (a percentage as a percentage, a decimal as a decimal or an
    integer, an integer as itself)."""
    shown: dict[str, set[str]] = {"decimal": set(), "percent": set(), "integer": set()}
    for fig in figures(text, integers_from=0):
        value = Decimal(fig.text)
        roundings = {str(value.quantize(Decimal(1).scaleb(-p), rounding=ROUND_HALF_UP)) for p in range(fig.places + 1)}
        if fig.kind == "percent":
            shown["percent"] |= roundings
        elif fig.kind == "decimal":
            shown["decimal"] |= {r for r in roundings if "." in r}
            shown["integer"] |= {r for r in roundings if "." not in r}
        else:
            shown["integer"].add(fig.text)
    return shown


def untied(shown: list[Figure], run_text: str) -> list[str]:
    """The figures of ``shown`` that no value of the run gives at the page's rounding."""
    values = run_values(run_text)
    return [f"{f.text} ({f.kind})" for f in shown if f.text not in values[f.kind]]
