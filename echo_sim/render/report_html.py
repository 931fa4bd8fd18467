"""One self-contained HTML report of a trace: interactive plotly charts, tables, and the
data as embedded JSON (:func:`write_report`).

The file needs no network to open: plotly.js is inlined once (about 4.5 MB), every chart is a
``<div>`` drawn by it, and the :class:`~echo_sim.analysis.overview.Overview` is embedded as
``<script type="application/json" id="echo-data">`` for scripts. When the page has drawn
every chart, the ``#echo-status`` element says ``rendered N of N charts`` and ``<body>``
gets ``data-rendered="N"``; a script error shows there instead (what the browser test reads).

plotly is an optional extra (``pip install "echo-sim[plot]"``); asking for a report without
it is one clear error.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from echo_sim.analysis.overview import Overview
from echo_sim.analysis.statistic import PARTS
from echo_sim.analysis.tables import shorten
from echo_sim.errors import ConfigError
from echo_sim.trace.model import STEP_COUNT_SERIES
from echo_sim.units import fmt_bytes

__all__ = ["PART_COLORS", "render_report", "write_report"]

PART_COLORS: dict[str, str] = {
    "FW": "#4c72b0", "BW": "#dd8452", "UPDATE": "#55a868", "other": "#8172b3",
    "Comm_overlapped": "#64b5cd", "Comm_exposed": "#c44e52", "idle": "#bbbbbb",
    "Comm": "#c44e52", "host delay": "#bbbbbb",
}
_LABEL = {"Comm_overlapped": "Comm overlapped with compute", "Comm_exposed": "Comm exposed",
          "other": "other device work"}
_MAX_SEGMENTS = 3000  # critical-path bars drawn (the JSON keeps all)
_MAX_MEMORY_LINES = 24
_MAX_ANATOMY_ROWS = 20  # collectives drawn and listed, costliest per step first


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ConfigError("the report needs plotly, which is not installed: "
                          "pip install 'echo-sim[plot]'") from None
    return go


def _ms(us: float | None) -> str:
    return "-" if us is None or (isinstance(us, float) and math.isnan(us)) else f"{us / 1e3:,.3f}"


def _pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f} %"


def _bytes(b: float | None) -> str:
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return "-"
    return fmt_bytes(b)


def _num(x: float | None, fmt: str = "{:,.2f}") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _table(headers: list[str], rows: list[list[str]], *, title: str = "",
           full: list[str] | None = None) -> str:
    """An HTML table of already-formatted cells (escaped here); ``full``: a tooltip per row
    (the whole name where the cell is shortened)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = []
    for i, row in enumerate(rows):
        tip = f' title="{html.escape(full[i])}"' if full else ""
        cells = "".join(f"<td{tip if j == 0 else ''}>{html.escape(c)}</td>"
                        for j, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    cap = f"<caption>{html.escape(title)}</caption>" if title else ""
    return f"<table>{cap}{thead}<tbody>{''.join(body)}</tbody></table>"


class _Charts:
    """Collects figures as ``<div>`` snippets; counts them for the completion check."""

    def __init__(self) -> None:
        self.go = _plotly()
        self.count = 0

    def div(self, fig: Any, height: int = 420) -> str:
        import plotly.io as pio

        self.count += 1
        fig.update_layout(height=height, margin={"l": 60, "r": 20, "t": 40, "b": 50},
                          template="plotly_white", legend={"orientation": "h", "y": -0.2})
        return str(pio.to_html(fig, full_html=False, include_plotlyjs=False,
                               div_id=f"echo-chart-{self.count}",
                               config={"displaylogo": False, "responsive": True}))


def _step_times(ch: _Charts, ov: Overview) -> str:
    go = ch.go
    it = ov.iteration_us / 1e3
    z = [[None if math.isnan(v) else round(v, 3) for v in row] for row in it.tolist()]
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(s) for s in ov.steps], y=[str(r) for r in ov.ranks], colorscale="Viridis",
        colorbar={"title": "ms"},
        hovertemplate="rank %{y}, step %{x}: %{z:.3f} ms<extra></extra>"))
    fig.update_layout(title="Step time per rank and step (ms): stragglers are the bright cells",
                      xaxis_title="step", yaxis_title="rank", xaxis_type="category",
                      yaxis_type="category")
    mean = np.nanmean(ov.iteration_us, axis=1)
    worst = int(np.nanargmax(mean)) if np.isfinite(mean).any() else 0
    med = float(np.nanmedian(mean)) if np.isfinite(mean).any() else float("nan")
    note = (f"<p>Slowest rank on average: <b>{ov.ranks[worst]}</b> at {_ms(float(mean[worst]))}"
            f" ms per step (median rank {_ms(med)} ms).</p>") if ov.ranks else ""
    return ch.div(fig, height=max(300, min(900, 60 + 22 * len(ov.ranks)))) + note


def _breakdown(ch: _Charts, ov: Overview, predicted: Overview | None,
               predicted_label: str) -> str:
    go = ch.go
    fig = go.Figure()
    x = [f"step {s}" for s in ov.steps]
    columns: list[tuple[str, dict[str, float]]] = []
    for p in PARTS:
        vals = ov.parts_per_step[p]
        if p == "other" and not any(vals):
            continue
        fig.add_bar(name=_LABEL.get(p, p), x=x, y=[v / 1e3 for v in vals],
                    marker_color=PART_COLORS[p],
                    hovertemplate=f"{_LABEL.get(p, p)}: %{{y:.3f}} ms<extra></extra>")
    fig.update_layout(barmode="stack", yaxis_title="ms (mean over ranks)",
                      title="Where each step goes: the parts add up to the step (100 %)")
    out = ch.div(fig)
    measured = {c.category: c.per_step_us for c in ov.stats.categories}
    columns.append(("measured", measured))
    if predicted is not None:
        columns.append((predicted_label, {c.category: c.per_step_us
                                          for c in predicted.stats.categories}))
        fig2 = go.Figure()
        for p in PARTS:
            if p == "other" and not any(col[p] for _, col in columns):
                continue
            fig2.add_bar(name=_LABEL.get(p, p), x=[name for name, _ in columns],
                         y=[col[p] / 1e3 for _, col in columns], marker_color=PART_COLORS[p])
        fig2.update_layout(barmode="stack", yaxis_title="ms per step (mean over ranks)",
                           title="Measured and predicted step, part by part")
        out += ch.div(fig2, height=460)
    headers = ["part"] + [h for name, _ in columns for h in (f"{name} ms", f"{name} share")]
    rows = []
    for p in PARTS:
        row = [_LABEL.get(p, p)]
        for _, col in columns:
            tot = sum(col.values())
            row += [_ms(col[p]), _pct(col[p] / tot if tot else None)]
        rows.append(row)
    rows.append(["step"] + [c for _, col in columns for c in (_ms(sum(col.values())),
                                                              "100.0 %")])
    per_step = ""
    if any(v is not None for v in ov.mfu_per_step):
        per_step = _table(["step", *map(str, ov.steps)],
                          [["MFU", *[_pct(v) for v in ov.mfu_per_step]]],
                          title="Model FLOPs utilisation per step (mean over ranks)")
    return out + _table(headers, rows, title="Mean per (rank, step)") + per_step


def _operators(ch: _Charts, ov: Overview) -> str:
    go = ch.go
    ops = ov.ops[:20][::-1]
    fig = go.Figure(go.Bar(
        x=[o.total_us / 1e3 for o in ops], y=[shorten(o.name, 48) for o in ops],
        orientation="h", marker_color=[PART_COLORS.get(o.category, "#777") for o in ops],
        customdata=[[o.name, o.category, o.count] for o in ops],
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}, %{customdata[2]} calls: "
                      "%{x:.3f} ms<extra></extra>"))
    fig.update_layout(title="Top operators by total time (ms, all ranks and steps)",
                      xaxis_title="ms", yaxis={"automargin": True})
    rows = [[shorten(o.name), o.category, f"{o.count:,}", _ms(o.total_us), _ms(o.mean_us),
             _pct(o.share), _num(o.flops / 1e9 if o.flops else None),
             _num(o.tflops, "{:,.3f}"), _pct(o.mfu)] for o in ov.ops]
    job = (f"<p>Model FLOPs per step and rank: {_num(ov.model_tflops_per_step, '{:,.4f}')} "
           f"TFLOP (3 × forward); achieved {_num(ov.achieved_tflops, '{:,.3f}')} TFLOP/s per "
           f"rank; <b>MFU {_pct(ov.mfu)}</b> against {_num(ov.peak_tflops, '{:,.1f}')} TFLOP/s "
           f"({html.escape(ov.peak_source)}).</p>")
    return ch.div(fig, height=max(360, 24 * len(ops) + 120)) + job + _table(
        ["operator", "cat", "count", "total ms", "mean ms", "share", "GFLOP", "TFLOP/s",
         "MFU"], rows, title="Operators (durations; FLOPs where recorded)",
        full=[o.name for o in ov.ops])


def _communication(ch: _Charts, ov: Overview) -> str:
    if not ov.comm:
        return "<p>No communication in this trace.</p>"
    go = ch.go
    labels = [f"{c.collective} [{c.group}]" for c in ov.comm]
    fig = go.Figure(go.Bar(x=labels, y=[c.busbw_gbps or 0.0 for c in ov.comm],
                           marker_color="#c44e52",
                           hovertemplate="%{x}: %{y:.3f} GB/s bus bandwidth<extra></extra>"))
    fig.update_layout(title="Achieved bus bandwidth per collective and group (GB/s)",
                      yaxis_title="GB/s")
    rows = [[c.collective, c.group, str(c.group_size), f"{c.calls:,}", _bytes(c.bytes),
             _ms(c.time_us), _num(c.algbw_gbps, "{:,.3f}"), _num(c.busbw_gbps, "{:,.3f}")]
            for c in ov.comm]
    return ch.div(fig, height=380) + _table(
        ["collective", "group", "ranks", "calls", "bytes", "time ms", "algbw GB/s",
         "busbw GB/s"], rows, title="Communication (time as the ranks met it, waits included)"
    ) + _anatomy(ch, ov.anatomy)


def _anatomy(ch: _Charts, an: dict[str, Any] | None) -> str:
    """Each collective's cost per step split into the wait for the last member, the transfer
    and the late return (``python -m echo_sim collectives``), as stacked bars and a table."""
    if not an or not an["collectives"]:
        return ""
    go = ch.go
    rows = an["collectives"][:_MAX_ANATOMY_ROWS]
    labels = [f"{r['collective']} {_bytes(r['nbytes'])} [{r['group_size']}]" for r in rows]
    fig = go.Figure()
    for part, key, colour in (("waiting for the last member", "wait_mean_us", "#dd8452"),
                              ("transfer", "transfer_mean_us", "#4c72b0"),
                              ("returning late", "lag_mean_us", "#c44e52")):
        fig.add_bar(y=labels, x=[r[key] * r["per_step"] / 1e3 for r in rows], name=part,
                    orientation="h", marker_color=colour,
                    hovertemplate="%{y}: %{x:.3f} ms per step<extra>" + part + "</extra>")
    fig.update_layout(barmode="stack", xaxis_title="ms per step (a typical member)",
                      legend_traceorder="normal",
                      title="Where the collectives' time goes, per step")
    table = [[lab, f"{r['per_step']:g}", _ms(r["own_mean_us"]), _ms(r["wait_mean_us"]),
              _ms(r["transfer_mean_us"]), _ms(r["transfer_median_us"]),
              _ms(r["transfer_p90_us"]), _ms(r["lag_mean_us"]), _ms(r["per_step_us"]),
              _ms(r.get("queued_mean_us", 0.0))]
             for lab, r in zip(labels, rows, strict=True)]
    return ch.div(fig, height=120 + 40 * len(rows)) + _table(
        ["collective", "per step", "own ms", "wait ms", "transfer mean ms",
         "transfer median ms", "transfer p90 ms", "lag ms", "ms per step",
         "queued ms (not in own)"], table,
        title="Collectives across their members (a transfer mean far above its median: "
              "stalls, which a step pays; queued: behind the member's own earlier "
              "collectives of that kind, whose time it is)")


def _memory(ch: _Charts, ov: Overview) -> str:
    if not ov.memory:
        return "<p>No memory counters in this trace.</p>"
    go = ch.go
    fig = go.Figure()
    lines = 0
    for name, per_rank in ov.memory.items():
        if name.startswith("peak_") or name in STEP_COUNT_SERIES:
            continue  # per-step peaks and page-fault counts are in the table
        for r, (t, v) in per_rank.items():
            if lines >= _MAX_MEMORY_LINES:
                break
            fig.add_scatter(x=[x / 1e3 for x in t], y=[b / 2**30 for b in v], mode="lines",
                            name=f"{name} rank {r}", line={"shape": "hv"})
            lines += 1
    fig.update_layout(title="Memory over time (GiB; ms from the first captured step)",
                      xaxis_title="ms", yaxis_title="GiB")
    rows = [[name] + [(f"{v:,.0f}" if math.isfinite(v) else "-") if name in STEP_COUNT_SERIES
                      else _bytes(v) for v in peaks]
            for name, peaks in ov.memory_peak_per_step.items()]
    return ch.div(fig) + _table(["series"] + [f"step {s} peak" for s in ov.steps], rows,
                                title="Peak per step (max over ranks; minor_faults / "
                                      "major_faults: the process's page faults in the step)")


def _critical(ch: _Charts, ov: Overview) -> str:
    cp = ov.critical
    if not cp:
        return "<p>No critical path (see what could not be computed).</p>"
    go = ch.go
    segs = cp["segments"][:_MAX_SEGMENTS]
    fig = go.Figure()
    for cat in ("FW", "BW", "Comm", "UPDATE", "host delay"):
        mine = [s for s in segs if s["cat"] == cat]
        if not mine:
            continue
        fig.add_bar(name=cat, orientation="h", y=[cat] * len(mine),
                    x=[s["dur_us"] / 1e3 for s in mine],
                    base=[s["start_us"] / 1e3 for s in mine],
                    marker_color=PART_COLORS.get(cat, "#777"),
                    customdata=[[s["name"], ",".join(map(str, s["ranks"]))] for s in mine],
                    hovertemplate="%{customdata[0]} (rank %{customdata[1]}): %{x:.3f} ms"
                                  "<extra></extra>")
    fig.update_layout(barmode="overlay", xaxis_title="ms from the start of the step",
                      title=f"Critical path of step {cp['step']}: {_ms(cp['total_us'])} ms "
                            f"(measured iteration {_ms(cp['measured_iteration_time_us'])} ms)")
    rows = [[c, _ms(v["us"]), f"{v['pct']:.1f} %"] for c, v in cp["shares"].items()]
    more = (f"<p>First {_MAX_SEGMENTS} of {len(cp['segments'])} segments drawn; the embedded "
            "JSON has all.</p>" if len(cp["segments"]) > _MAX_SEGMENTS else "")
    return ch.div(fig, height=340) + more + _table(["category", "ms", "share of path"], rows)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;
max-width:1200px;padding:1em 2em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left;font-family:ui-monospace,monospace}
.summary td{text-align:left}.summary td:first-child{font-family:inherit;font-weight:600}
.missing{background:#fff6e5;border-left:4px solid #f0a500;padding:.5em 1em}
#echo-status{color:#888;font-size:.8em}
nav a{margin-right:1em}
"""

_STATUS_JS = """
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message||e));
    var s=document.getElementById('echo-status');
    if(s){s.textContent='error: '+errors.join('; ');}
    document.body.setAttribute('data-error',errors.join('; '));});
  window.addEventListener('load',function(){
    var want=parseInt(document.body.getAttribute('data-charts'),10);
    var got=document.querySelectorAll('.js-plotly-plot').length;
    var s=document.getElementById('echo-status');
    if(errors.length===0){
      s.textContent='rendered '+got+' of '+want+' charts';
      document.body.setAttribute('data-rendered',String(got));}
  });
})();
"""


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _clean(o: Any) -> Any:
    """NaN/inf → None, so the embedded JSON is valid JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    return o


def render_report(ov: Overview, *, predicted: Overview | None = None,
                  predicted_label: str = "predicted",
                  predicted_summary: dict[str, Any] | None = None) -> str:
    """The whole HTML document. ``predicted``: the overview of a simulated timeline of the same
    job (``simulate``), shown beside the measurement; ``predicted_summary``: its headline
    figures (embedded in the JSON)."""
    ch = _Charts()
    import plotly
    from plotly.offline import get_plotlyjs

    sections = [
        ("steps", "Step time", _step_times(ch, ov)),
        ("breakdown", "Breakdown", _breakdown(ch, ov, predicted, predicted_label)),
        ("operators", "Operators and FLOPs", _operators(ch, ov)),
        ("comm", "Communication", _communication(ch, ov)),
        ("memory", "Memory", _memory(ch, ov)),
        ("critical", "Critical path", _critical(ch, ov)),
    ]
    n_cells = int(np.isfinite(ov.iteration_us).sum())
    summary = [
        ["trace", ov.source], ["ranks", f"{len(ov.ranks)}"],
        ["steps", ", ".join(map(str, ov.steps))],
        ["mean step time", f"{_ms(ov.mean_iteration_us)} ms over {n_cells} (rank, step) cells"],
        ["device", ov.device or "-"],
        ["MFU", f"{_pct(ov.mfu)} ({html.escape(ov.peak_source)})"],
    ]
    if predicted_summary:
        summary.append(["predicted", str(predicted_summary.get("headline", ""))])
        summary += [["prediction warning", str(w)]
                    for w in predicted_summary.get("warnings") or ()]
    missing = "".join(f"<li>{html.escape(m)}</li>" for m in ov.missing)
    missing_html = (f'<div class="missing"><b>Not computed</b><ul>{missing}</ul></div>'
                    if missing else "")
    data = _clean(ov.to_dict())
    if predicted is not None:
        data["predicted"] = _clean(predicted.to_dict())
        data["predicted_summary"] = _clean(predicted_summary or {})
    blob = json.dumps(data, default=_json_default).replace("</", "<\\/")
    nav = "".join(f'<a href="#{k}">{html.escape(t)}</a>' for k, t, _ in sections)
    body = "".join(f'<h2 id="{k}">{html.escape(t)}</h2>{s}' for k, t, s in sections)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    from echo_sim import __version__

    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>echo report: {html.escape(Path(ov.source).name or ov.source)}</title>
<style>{_CSS}</style>
<script>{_STATUS_JS}</script>
<script>{get_plotlyjs()}</script>
</head><body data-charts="{ch.count}">
<h1>echo report</h1>
<p id="echo-status">rendering…</p>
{_table(["", ""], summary).replace("<table>", '<table class="summary">', 1)}
{missing_html}
<nav>{nav}</nav>
{body}
<script type="application/json" id="echo-data">{blob}</script>
<p style="color:#888;font-size:.8em">echo {html.escape(__version__)}, plotly
{html.escape(plotly.__version__)}; generated {stamp}. The data above is embedded as JSON
(#echo-data).</p>
</body></html>
"""


def write_report(ov: Overview, path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`render_report` to ``path`` (its directory must exist). The CLI writes
    through :func:`echo_sim.commands.outputs.output_file` (atomic, link-safe)."""
    p = Path(path)
    p.write_text(render_report(ov, **kwargs), encoding="utf-8")
    return p
