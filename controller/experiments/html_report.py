"""One page per results folder, ``index.html``: the verdicts first, then the regime the run
stands for, its configuration, its table and plots, and its raw files.

The page is self-contained: styles are inline, plots are embedded as data URIs and every raw
file (CSV, JSON, text) small enough rides along as a download link, so the page opens from
the file system and can be mailed on its own. Reading the folder (:func:`read_folder`) is
kept apart from rendering it (:func:`render`, pure).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["INDEX", "MAX_EMBEDDED_BYTES", "FolderContents", "is_results_folder", "read_folder", "render",
           "render_listing", "write_index", "write_listing"]

INDEX = "index.html"
#: raw files up to this size are embedded in the page; larger ones are linked beside it
MAX_EMBEDDED_BYTES = 2_000_000
#: the file a run's dashboard is kept in (controller.dashboard.recorder.FILE_NAME)
DASHBOARD_FILE = "dashboard.sqlite"
_RAW_SUFFIXES = {".csv": "text/csv", ".json": "application/json", ".txt": "text/plain", ".log": "text/plain"}
_IMAGE_SUFFIXES = {".png": "image/png", ".svg": "image/svg+xml"}

_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#1d2330}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #dde}
.status{display:inline-block;padding:.25em .7em;border-radius:1em;font-weight:600}
.ok{background:#d8f3dc;color:#1b4332} .warn{background:#fff3bf;color:#7a5c00} .bad{background:#ffd6d6;color:#7a1010}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #dde;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f5f9} pre{background:#f7f7fa;padding:1em;overflow-x:auto;font-size:12.5px;line-height:1.3}
img{max-width:100%;border:1px solid #eee;margin:.5em 0} .muted{color:#667}
"""


@dataclass(frozen=True)
class FolderContents:
    """What a results folder holds, as read from disk."""

    name: str
    summary_name: str | None  # the JSON with the run's verdicts (summary.json or results.json)
    summary: Mapping[str, Any] | None
    table: str | None
    images: tuple[tuple[str, bytes], ...] = ()
    raw: tuple[tuple[str, bytes | None, int], ...] = ()  # (name, content or None when too large, size)
    kept_dashboard: str | None = None  # the file holding the run's dashboard (run with --dashboard)


def _summary(folder: Path) -> tuple[str | None, Mapping[str, Any] | None]:
    """The folder's summary: the first JSON file with a ``fidelity`` section, and its name."""
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "fidelity" in data:
            return path.name, data
    return None, None


def read_folder(folder: Path) -> FolderContents:
    """The folder's summary, table, plots and raw files; anything unreadable is left out
    rather than failing the page."""
    summary_name, summary = _summary(folder)
    table_path = folder / "table.txt"
    table = table_path.read_text(errors="replace") if table_path.is_file() else None
    images, raw = [], []
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.suffix in _IMAGE_SUFFIXES:
            images.append((path.name, path.read_bytes()))
        elif path.suffix in _RAW_SUFFIXES:
            size = path.stat().st_size
            raw.append((path.name, path.read_bytes() if size <= MAX_EMBEDDED_BYTES else None, size))
    kept = DASHBOARD_FILE if (folder / DASHBOARD_FILE).is_file() else None
    return FolderContents(folder.name, summary_name, summary, table, tuple(images), tuple(raw), kept)


def is_results_folder(folder: Path) -> bool:
    """Whether ``folder`` is one run's results (it holds a table or a summary with verdicts)."""
    return (folder / "table.txt").is_file() or _summary(folder)[1] is not None


def write_listing(root: Path) -> Path:
    """Write ``root/index.html``: every results folder under ``root`` (one level down), newest
    first, with its headline; each gets its own page first. Returns the listing's path."""
    runs = sorted((d for d in root.iterdir() if d.is_dir() and is_results_folder(d)), key=_finished, reverse=True)
    entries = []
    for run in runs:
        contents = read_folder(run)
        _write_page(run, contents)
        entries.append((run.name, *_status(contents.summary)))
    page = root / INDEX
    page.write_text(render_listing(root.name, entries))
    return page


def _finished(run: Path) -> float:
    """When a run wrote its results: its newest file but the page (which a rebuild rewrites)."""
    return max((p.stat().st_mtime for p in run.iterdir() if p.is_file() and p.name != INDEX), default=0.0)


def write_index(folder: Path) -> Path:
    """Write ``folder/index.html`` from what the folder holds now; returns its path."""
    return _write_page(folder, read_folder(folder))


def _write_page(folder: Path, contents: FolderContents) -> Path:
    page = folder / INDEX
    tmp = page.with_suffix(".html.tmp")
    tmp.write_text(render(contents))
    tmp.replace(page)
    return page


def _e(value: object) -> str:
    return html.escape(str(value))


def _num(value: object) -> str:
    """A figure as a person reads it: 3 significant digits, whole numbers from 100 up.

    >>> _num(0.013171875), _num(44.444444), _num(4000.0), _num(9000), _num("?")
    ('0.0132', '44.4', '4,000', '9,000', '?')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _e(value)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _data_uri(mime: str, content: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(content).decode()}"


def _status(summary: Mapping[str, Any] | None) -> tuple[str, str]:
    """The page's headline: (css class, words)."""
    if summary is None:
        return "warn", "no verdicts in this folder"
    if summary.get("interrupted"):
        return "bad", f"interrupted ({summary['interrupted']}): partial results"
    verdicts = (summary.get("fidelity") or {}).get("verdicts") or []
    undecided = [v for v in verdicts if not v.get("decided")]
    if not verdicts:
        return "warn", "no comparisons judged"
    if undecided:
        return "warn", f"{len(verdicts) - len(undecided)} of {len(verdicts)} comparisons decided"
    return "ok", f"all {len(verdicts)} comparisons decided"


def _verdicts(summary: Mapping[str, Any]) -> list[str]:
    fidelity = summary.get("fidelity") or {}
    rows = []
    for v in fidelity.get("verdicts") or []:
        css = "ok" if v.get("decided") else "warn"
        outcome = "decided" if v.get("decided") else "undecided: " + ", ".join(v.get("outcomes") or [])
        runs = "; ".join(f"{r['configuration']}: {r['ok']} of {r['total']}" for r in v.get("runs") or [])
        rows.append(f"<tr><td>{_e(v.get('comparison', ''))}</td><td>{_e(v.get('figures_say') or '-')}</td>"
                    f"<td><span class='status {css}'>{_e(outcome)}</span></td><td>{_e(runs)}</td>"
                    f"<td class='muted'>{_e(v.get('verdict', ''))}</td></tr>")
    out = ["<h2>Verdicts</h2>"]
    if rows:
        out += ["<table><tr><th>comparison</th><th>the figures say</th><th>outcome</th><th>successful runs</th>"
                "<th>verdict</th></tr>", *rows, "</table>"]
    limits = fidelity.get("limits")
    if limits:
        out.append("<p class='muted'>fidelity limits: " + ", ".join(f"{_e(k)} {_e(v)}" for k, v in limits.items())
                   + "</p>")
    return out


def _regime(regime: Mapping[str, Any] | None) -> list[str]:
    if not regime:
        return []
    real = regime.get("real") or {}
    out = ["<h2>The regime it stands for</h2>",
           f"<p>{_num(real.get('nic_gbps', '?'))} Gbit/s NICs, {_num(real.get('hop_latency_us', '?'))} us per hop, "
           f"{_num(real.get('mtu', '?'))}-byte frames; time stretched {_num(regime.get('dilation', '?'))}x</p>",
           "<table><tr><th>quantity</th><th>real</th><th>emulated</th><th>scaled with the links</th></tr>"]
    for q in regime.get("quantities") or []:
        unit = _e(q.get("unit", ""))
        out.append(f"<tr><td>{_e(q.get('name'))}</td><td>{_num(q.get('real'))} {unit}</td>"
                   f"<td>{_num(q.get('emulated'))} {unit}</td><td>{'yes' if q.get('scaled') else 'no'}</td></tr>")
    return [*out, "</table>"]


def _config(config: object) -> list[str]:
    if not isinstance(config, Mapping) or not config:
        return []
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(json.dumps(v) if not isinstance(v, str) else v)}</td></tr>"
                   for k, v in config.items())
    return ["<h2>Configuration</h2>", f"<table>{rows}</table>"]


def _files(raw: Sequence[tuple[str, bytes | None, int]]) -> list[str]:
    if not raw:
        return []
    items = []
    for name, content, size in raw:
        mime = _RAW_SUFFIXES.get(Path(name).suffix, "application/octet-stream")
        href = _data_uri(mime, content) if content is not None else _e(name)
        note = "" if content is not None else " (too large to embed: beside this page)"
        items.append(f"<li><a download='{_e(name)}' href='{href}'>{_e(name)}</a> "
                     f"<span class='muted'>{size:,} bytes{note}</span></li>")
    return ["<h2>Raw files</h2>", "<ul>", *items, "</ul>"]


def render_listing(title: str, entries: Sequence[tuple[str, str, str]]) -> str:
    """A page listing runs: each ``(folder name, css class, headline)`` linking to the folder's
    own page."""
    rows = "".join(f"<tr><td><a href='{_e(name)}/{INDEX}'>{_e(name)}</a></td>"
                   f"<td><span class='status {css}'>{_e(words)}</span></td></tr>" for name, css, words in entries)
    body = (f"<h1>{_e(title)}</h1><p class='muted'>{len(entries)} runs, newest first</p>"
            f"<table><tr><th>run</th><th>verdicts</th></tr>{rows}</table>" if entries
            else f"<h1>{_e(title)}</h1><p>no results folders here</p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(title)}: mlfabric runs</title><style>{_STYLE}</style></head><body>{body}</body></html>\n")


def render(contents: FolderContents) -> str:
    """The page for ``contents``, as one HTML string."""
    css, words = _status(contents.summary)
    summary = contents.summary or {}
    body = [f"<h1>{_e(contents.name)}</h1>", f"<p><span class='status {css}'>{_e(words)}</span></p>"]
    if contents.summary is not None:
        body += _verdicts(summary)
        body += _regime(summary.get("regime"))
    for name, content in contents.images:
        mime = _IMAGE_SUFFIXES[Path(name).suffix]
        body.append(f"<h2>{_e(name)}</h2><img alt='{_e(name)}' src='{_data_uri(mime, content)}'>")
    if contents.table is not None:
        body += ["<h2>Table</h2>", f"<pre>{_e(contents.table)}</pre>"]
    body += _config(summary.get("config"))
    body += _files(contents.raw)
    if contents.kept_dashboard:
        body += ["<h2>Dashboard</h2>", f"<p>The run's dashboard was kept ({_e(contents.kept_dashboard)}): "
                 f"<code>mlfabric dashboard --replay {_e(contents.name)}</code> shows it again.</p>"]
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(contents.name)}: mlfabric results</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(body)}<p class='muted'>written by mlfabric from this folder "
            f"({_e(contents.summary_name or 'no summary')}); rebuild with <code>mlfabric report "
            f"{_e(contents.name)}</code></p></body></html>\n")
