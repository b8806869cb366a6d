"""A run's ``report.html``: one static file, plots embedded, that opens from disk.

It shows the summary, each failure (minimal network, message, triage, link to its repro.py), what ran
in which checkpoint API and dtype and whether thunder compiled it, thunder's error beside eager's per
dtype, and examples per second over time. Rendered from ``summary.json`` alone, so ``ckpt-fuzz report``
can render any run again.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from fuzz.report.clusters import CHANGES, clusters, comparison_lines
from fuzz.report.run_folder import SUMMARY, write_atomically
from fuzz.report.summary import confirmation_text

REPORT = "report.html"
_GRID_ROWS = 40  # the most-run layer kinds and ops in the coverage picture

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.result { padding: 0.6em 1em; font-weight: bold; border-radius: 4px; }
.passed { background: #d4edda; } .failed { background: #f8d7da; } .other { background: #fff3cd; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { border: 1px solid #bbb; padding: 0.3em 0.6em; }
tr.failure td { background: #f8d7da; vertical-align: top; } tr.harness td { background: #fff3cd; }
pre { background: #f4f4f4; padding: 0.6em; white-space: pre-wrap; font-size: 0.85em; }
code { font-size: 0.9em; } img { max-width: 100%; }
"""


def write_report(run_dir: Path) -> Path:
    """Render ``run_dir/report.html`` from ``run_dir/summary.json``; returns its path."""
    summary = json.loads((run_dir / SUMMARY).read_text())
    path = run_dir / REPORT
    write_atomically(path, render(summary, run_dir))
    return path


def render(summary: dict[str, Any], run_dir: Path) -> str:
    """The report page of ``summary`` (a run's summary.json), links relative to ``run_dir``."""
    from fuzz.report.summary import summary_lines

    result = summary["result"]
    tone = "passed" if result.startswith("passed") else "failed" if result.startswith("failed") else "other"
    sections = [
        f"<h1>ckpt-parity-fuzz run {_e(summary['run_id'])}</h1>",
        f"<p><code>{_e(summary['command'])}</code></p>",
        f"<p>{_e(summary['found_with'])}</p>",
        f'<p class="result {tone}">result: {_e(result)}</p>',
        _clusters(summary, run_dir),
        _failures(summary, run_dir),
        "<h2>Summary</h2>",
        f"<pre>{_e(chr(10).join(summary_lines(summary)))}</pre>",
        "<h2>Coverage: checkpointed layers by checkpoint API and dtype</h2>",
        _figure(_coverage_plot(summary.get("checkpoint_grid", {}))),
        "<h2>Thunder's error beside eager's, per dtype</h2>",
        "<p>Largest relative error of each valid example's output and gradients against the float64 reference.</p>",
        _figure(_error_plot(summary.get("error_decades", {}))),
        "<h2>Examples per second</h2>",
        _figure(_timeline_plot(summary.get("timeline", {}))),
        axes_section(summary.get("op_family", {}).get("axes", {})),
    ]
    body = "\n".join(sections)
    title = f"ckpt-parity-fuzz {_e(summary['run_id'])}"
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style>' \
        f"</head><body>\n{body}\n</body></html>\n"  # fmt: skip


def axes_section(axes: dict[str, Any]) -> str:
    """The op family's argument axes (`fuzz.report.op_family.axis_coverage`): per op and axis, the value classes
    that ran inside a compiled checkpoint of those offered, and why each pair never did ('' without axes)."""
    if not axes.get("pairs"):
        return ""
    rows = []
    for op, by_axis in sorted(axes["by_op"].items()):
        cells = []
        for axis, classes in by_axis.items():
            ran, offered = classes["compiled"], classes["classes"]
            tone = "passed" if ran else "other"  # (never ran: not a failure)
            title = f"ran: {', '.join(ran) or 'none'}; offered: {', '.join(offered)}"
            cells.append(f'<span class="{tone}" title="{_e(title)}">{_e(axis)} {len(ran)}/{len(offered)}</span>')
        rows.append(f"<tr><td>{_e(op)}</td><td>{' '.join(cells)}</td></tr>")
    never = "".join(f"<li>{_e(pair)}: {_e(why)}</li>" for pair, why in sorted(axes["never_varied"].items()))
    return (
        f"<h2>Argument axes of the op family</h2><p>{axes['pairs_varied_in_compiled_checkpoint']} of "
        f"{axes['pairs']} (op, axis) pairs varied inside a compiled checkpoint; per op and axis, the value classes "
        f"that ran there of those offered (docs/op-axes.md).</p>"
        f"<table><tr><th>op</th><th>axes: classes ran / offered</th></tr>{''.join(rows)}</table>"
        + (f"<h3>Never varied inside a compiled checkpoint</h3><ul>{never}</ul>" if never else "")
    )


def _e(text: Any) -> str:
    return html.escape(str(text))


def _failures(summary: dict[str, Any], run_dir: Path) -> str:
    failures, errors = summary["failures"], summary["harness_errors"]
    unshrunk = summary.get("unshrunk_failures", [])
    if not failures and not errors and not unshrunk:
        return "<h2>Failures</h2><p>None.</p>"
    rows = [
        '<tr class="failure">'
        f"<td><b>{_e(f['id'])}</b><br>{_e(f['class'])}, {_e(f['triage'])}</td>"
        f"<td>{_e(f['message'])}<br><i>{_e(confirmation_text(f))}</i>"
        + "".join(f"<br>{_e(line)}" for line in f.get("resembles", ()))
        + "</td>"
        f"<td>{_network(Path(f['repro']).parent / 'spec.json')}</td>"
        f'<td><a href="{_e(_link(Path(f["repro"]), run_dir))}">repro.py</a></td></tr>'
        for f in failures
    ]
    rows += [
        '<tr class="failure unshrunk">'
        f"<td><b>{_e(f['id'])}</b><br>{_e(f['class'])}, {_e(f['triage'])}<br><i>not shrunk: the run was stopped "
        f"first</i></td><td>{_e(f['message'])}</td><td>{_network(Path(f['repro']).parent / 'spec.json')}</td>"
        f'<td><a href="{_e(_link(Path(f["repro"]), run_dir))}">repro.py</a></td></tr>'
        for f in unshrunk
    ]
    rows += [
        f'<tr class="harness"><td><b>harness error</b> (ours)<br>{_e(e["item"])}</td><td colspan="3">{_e(e["error"])}'
        "</td></tr>"
        for e in errors
    ]
    header = "<tr><th>failure</th><th>message</th><th>minimal network</th><th>repro</th></tr>"
    return f"<h2>Failures ({len(failures) + len(unshrunk)})</h2><table>{header}{''.join(rows)}</table>"


def _clusters(summary: dict[str, Any], run_dir: Path) -> str:
    """One row per cluster (`fuzz.report.clusters`) with its smallest member's upstream.py and issue.md; then, where
    ``ckpt-fuzz report --against`` compared the run with an earlier one, what changed."""
    listed = summary.get("clusters") or clusters(summary["failures"])
    rows = []
    for c in listed:
        folder = Path(c["repro"]).parent
        links = " ".join(
            f'<a href="{_e(_link(folder / name, run_dir))}">{name}</a>'
            for name in ("upstream.py", "issue.md", "repro.py")
            if (folder / name).exists()
        )
        rows.append(
            f'<tr class="cluster"><td>{_e(c["label"])}</td><td>{c["folders"]}</td><td>{c["found"]}</td>'
            f"<td>{_e(c['smallest'])}<br>{links}</td></tr>"
        )
    changes = run_dir / CHANGES
    since = ""
    if changes.exists():
        compared_with = json.loads(changes.read_text())
        lines = comparison_lines(compared_with["changes"], compared_with["earlier"])
        since = f"<h3>Since {_e(compared_with['earlier'])}</h3><pre>{_e(chr(10).join(lines))}</pre>"
    if not rows:
        return since
    header = "<tr><th>cluster (one root cause)</th><th>folders</th><th>found</th><th>smallest member</th></tr>"
    return f"<h2>Clusters ({len(rows)})</h2><table>{header}{''.join(rows)}</table>{since}"


def _link(path: Path, run_dir: Path) -> str:
    """``path`` relative to the run folder when inside it (the report moves with its folder), else absolute."""
    try:
        return path.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def _network(spec_path: Path) -> str:
    """A failure's minimal network in one line (input, layers, checkpoints), its spec.json below."""
    try:
        spec = json.loads(spec_path.read_text())
    except (OSError, ValueError) as error:
        return f"<i>spec unreadable: {_e(error)}</i>"
    if model := spec.get("model"):
        sizes = ", ".join(f"{key} {value}" for key, value in model.items() if key != "arch")
        line = (
            f"{spec['dtype']} tokens ({spec['batch']}, {spec['seq']}) of {spec['vocab']}: transformers {model['arch']}"
        )
        line += f" ({sizes})"
    else:
        shape = [
            spec.get("batch"),
            *(spec.get("spatial") or ([spec["seq"]] if spec.get("seq") else [])),
            spec["features"],
        ]
        layers = " → ".join(layer["params"].get("op", layer["kind"]) for layer in spec["layers"])
        checkpoints = ", ".join(f"{c.get('api', 'checkpoint')}[{c['start']}:{c['stop']}]" for c in spec["checkpoints"])
        line = f"{spec['dtype']} input {tuple(shape)}: {layers or 'no layers'}; {checkpoints or 'no checkpoint'}"
    return f"{_e(line)}<details><summary>spec.json</summary><pre>{_e(json.dumps(spec, indent=1))}</pre></details>"


def _figure(figure) -> str:
    if figure is None:
        return "<p><i>Nothing to plot: no valid example ran.</i></p>"
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: renders to files only
    import matplotlib.pyplot as plt

    return plt


def _coverage_plot(grid: dict[str, list[int]]):
    """Heat maps, layer kind or op x (API, dtype): examples thunder compiled, and examples it fell back on."""
    if not grid:
        return None
    plt = _pyplot()
    counts: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for key, (compiled, fell_back) in grid.items():
        name, api, dtype = key.split("\t")
        counts[name][f"{api}\n{dtype}"] = [compiled, fell_back]
    names = sorted(counts, key=lambda n: -sum(sum(c) for c in counts[n].values()))[:_GRID_ROWS]
    columns = sorted({column for name in names for column in counts[name]})
    figure, axes = plt.subplots(1, 2, figsize=(4 + 0.9 * len(columns) * 2, 1.5 + 0.28 * len(names)), squeeze=False)
    panels = ((axes[0][0], 0, "compiled by thunder", "Greens"), (axes[0][1], 1, "fell back", "Oranges"))
    for axis, index, title, colours in panels:
        values = [[counts[name].get(column, [0, 0])[index] for column in columns] for name in names]
        axis.imshow(values, cmap=colours, aspect="auto", vmin=0)
        axis.set_title(title)
        axis.set_xticks(range(len(columns)), columns, fontsize=7)
        axis.set_yticks(range(len(names)), names, fontsize=7)
        for row, line in enumerate(values):
            for column, value in enumerate(line):
                if value:
                    axis.text(column, row, str(value), ha="center", va="center", fontsize=6)
    figure.tight_layout()
    return figure


def _error_plot(decades: dict[str, int]):
    """Per dtype: how many examples' largest relative error lies in each decade, thunder's bars beside eager's."""
    if not decades:
        return None
    plt = _pyplot()
    by_dtype: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for key, count in decades.items():
        dtype, who, decade = key.split("\t")
        by_dtype[dtype][who][int(decade)] = count
    dtypes = sorted(by_dtype)
    figure, axes = plt.subplots(1, len(dtypes), figsize=(4.2 * len(dtypes), 3), squeeze=False)
    seen = [int(key.split("\t")[2]) for key in decades]
    span = range(min(seen), max(seen) + 1)
    for axis, dtype in zip(axes[0], dtypes, strict=True):
        for offset, who, colour in ((-0.2, "eager", "#4c72b0"), (0.2, "thunder", "#dd8452")):
            counts = [by_dtype[dtype][who].get(d, 0) for d in span]
            axis.bar([d + offset for d in span], counts, 0.4, label=who, color=colour)
        axis.set_title(dtype)
        axis.set_xlabel("log10 relative error (at -17: 0)")
        axis.set_ylabel("examples")
        axis.legend(fontsize=7)
    figure.tight_layout()
    return figure


def _timeline_plot(timeline: dict[str, int]):
    """Examples finished per second in each 10-second interval since the first one."""
    if not timeline:
        return None
    plt = _pyplot()
    times = sorted(int(t) for t in timeline)
    start, width = times[0], 10
    minutes = [(t - start) / 60 for t in range(start, times[-1] + width, width)]
    rates = [timeline.get(str(t), 0) / width for t in range(start, times[-1] + width, width)]
    figure, axis = plt.subplots(figsize=(8, 2.6))
    axis.step(minutes, rates, where="post")
    axis.set_xlabel("minutes since the first example")
    axis.set_ylabel("examples / s")
    figure.tight_layout()
    return figure
