"""A page's figures are tied to its run by value, kind and rounding, not by any digit anywhere."""

from __future__ import annotations

from doc_figures import figures, untied


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in figures(text)]


def test_decimals_percentages_and_integers_are_told_apart() -> None:
    assert _kinds("1.65 s, 2.13x as fast, +0.8% [+0.5, +1.2], 76,810 parameters, 150 of 9 runs") == [
        ("decimal", "1.65"), ("decimal", "2.13"), ("percent", "0.8"), ("decimal", "0.5"), ("decimal", "1.2"),
        ("integer", "76810"), ("integer", "150")]


def test_ranges_keep_both_ends_and_a_trailing_percent_applies_to_both() -> None:
    assert _kinds("1.29-1.36 and 14-18% and 0.798-0.996") == [
        ("decimal", "1.29"), ("decimal", "1.36"), ("percent", "14"), ("percent", "18"),
        ("decimal", "0.798"), ("decimal", "0.996")]


def test_names_versions_addresses_code_and_links_are_not_figures() -> None:
    text = ("rail-only-4x4 on eth1 of h0_0, p4c 1.2.4.8 at 10.200.0.2, 64KiB, a 16x16 grid, the 2nd run, "
            "a 95% CI, `--rate-mbps 25` and [the run](docs/run-2026.txt)")
    assert figures(text) == []


def test_a_figure_is_tied_only_by_a_run_value_of_its_kind_at_its_rounding() -> None:
    run = "ratio 0.897 [0.798, 0.996]; machine 41% of 2 cores; 76810 parameters; share 0.41"
    assert untied(figures("0.90, 0.897, 41%, 76,810"), run) == []
    assert untied(figures("0.8971"), run) == ["0.8971 (decimal)"]  # more places than the run has
    assert untied(figures("0.41%"), run) == ["0.41 (percent)"]  # a fraction is not a percentage
    assert untied(figures("0.5"), "ratio 0.45") == []  # rounded half up, as printed
    assert untied(figures("12 iterations"), "12.23 iterations") == []  # a decimal rounded to none
    assert untied(figures("33 workers"), "3 workers, 0.33 of a core") == ["33 (integer)"]
