"""``graph PATH``: the dependency graph — summary, drawing (SVG/PNG) or GML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_sim.commands.checks import int_in, select_steps
from echo_sim.commands.outputs import check_output, output_file
from echo_sim.commands.spec import Command, Result, arg
from echo_sim.errors import ConfigError, TraceFormatError

__all__ = ["COMMAND"]

DESCRIPTION = """\
Rebuild the dependency graph of the captured steps (the rules of docs/trace-format.md:
compute order, backward→communication, communication→update, cross-step chaining) on
every rank, and join the ranks: one node per collective instance (matched by group and
sequence number) and per send/recv pair (by source, destination and sequence number).

Prints the node and edge counts, cross-rank edges, unmatched communication and whether
the graph is acyclic. --output FILE draws it (.svg, .png: columns in order of measured
start time, one row per rank, cross-rank edges dashed) or writes it (.gml, networkx GML
with node attributes name, cat, dur_us (microseconds), ts_us, step, rank/ranks).
Graphs over 2000 nodes are not drawn: narrow them with --step, --rank or --filter.
PATH may also be one rank's dag.gml (dPRO's graph input): its counts, drawn or rewritten
with --output.
"""


def _write(g: Any, opts: Any) -> Path:
    """``g`` to --output: GML, or a drawing."""
    import networkx as nx

    from echo_sim.render.draw import MAX_NODES, check_image_type, draw_graph

    out = Path(opts.output)
    gml = out.suffix.lower() == ".gml"
    if not gml:
        try:
            check_image_type(out)
        except ConfigError as e:
            raise ConfigError(f"--output {out}: {str(e).split(': ', 1)[1]}") from None
        if g.number_of_nodes() > MAX_NODES:
            raise ConfigError(f"graph has {g.number_of_nodes()} nodes (> {MAX_NODES}) to "
                              "draw: narrow it with --step, --rank or --filter 'Comm.*'")
        if g.number_of_nodes() == 0:
            raise ConfigError("nothing to draw: no node matches the selection (check "
                              "--filter, --rank and --step)")
    check_output("--output", out, force=opts.force)
    with output_file("--output", out, force=opts.force) as tmp:
        if gml:
            nx.write_gml(g, str(tmp), stringizer=str)
        else:
            draw_graph(g, tmp)
    return out


def _gml_file(opts: Any) -> Result:
    """A ``dag.gml`` as PATH (dPRO's graph input): its summary, and --output as usual."""
    import networkx as nx

    from echo_sim.load.echo import read_dag

    path = opts.paths[0]
    try:
        g = read_dag(Path(path))
    except RecursionError:
        raise TraceFormatError(f"{path}: dag.gml nests too deeply to read") from None
    data: dict[str, Any] = {"source": path, "nodes": g.number_of_nodes(),
                            "edges": g.number_of_edges(),
                            "acyclic": nx.is_directed_acyclic_graph(g)}
    lines = [f"{path}: {data['nodes']} nodes, {data['edges']} edges (one rank's dag.gml; "
             "give the trace directory for the graph across ranks)"]
    if opts.output:
        for n in g.nodes:  # the drawing's labels and colours come from these attributes
            g.nodes[n].setdefault("name", str(n))
        data["output"] = str(_write(g, opts))
        lines.append(f"wrote {opts.output}")
    return Result("\n".join(lines), data)


def run(opts: Any) -> Result:
    import networkx as nx

    from echo_sim.load import load_trace
    from echo_sim.render.draw import filter_graph
    from echo_sim.trace.graph import build_deps, global_graph

    if opts.output:
        check_output("--output", opts.output, force=opts.force)  # before the work
    if opts.paths[0].lower().endswith(".gml") and Path(opts.paths[0]).is_file():
        return _gml_file(opts)
    trace = load_trace(opts.paths[0])
    if opts.rank is not None and opts.rank not in trace.ranks:
        raise ConfigError(f"--rank {opts.rank} is not in the trace; ranks: {sorted(trace.ranks)}")
    deps = build_deps(trace, select_steps(opts.step, trace.steps))
    full = global_graph(trace, deps=deps)
    g = filter_graph(full, name_glob=opts.filter, rank=opts.rank)
    cross = sum(1 for _, _, d in full.edges(data=True) if d.get("cross_rank"))
    data: dict[str, Any] = {
        "source": opts.paths[0], "steps": deps.steps,
        "nodes": full.number_of_nodes(), "edges": full.number_of_edges(),
        "cross_rank_edges": cross, "comm_instances": deps.n_inst,
        "unmatched_comm": deps.n_unmatched, "unmatched_examples": deps.unmatched[:10],
        "acyclic": nx.is_directed_acyclic_graph(full),
        "dag_gml_used_for": [list(x) for x in deps.dag_steps],
        "selected_nodes": g.number_of_nodes(), "selected_edges": g.number_of_edges(),
    }
    lines = [
        f"{opts.paths[0]}: steps {deps.steps}, {data['nodes']} nodes, {data['edges']} edges "
        f"({cross} cross-rank), {deps.n_inst} comm instances, {deps.n_unmatched} unmatched, "
        f"{'acyclic' if data['acyclic'] else 'HAS A CYCLE'}",
    ]
    if g is not full:
        lines.append(f"selection: {g.number_of_nodes()} nodes, {g.number_of_edges()} edges")
    for u in deps.unmatched[:5]:
        lines.append(f"unmatched: {u['name']} ({u['collective']}, step {u['step']}, "
                     f"seq {u['seq']}) on ranks {u['ranks_present']}, missing "
                     f"{u['ranks_missing']}")
    if opts.output:
        data["output"] = str(_write(g, opts))
        lines.append(f"wrote {opts.output}")
    return Result("\n".join(lines), data)


COMMAND = Command(
    name="graph",
    help="dependency graph across ranks: summary, drawing (SVG/PNG) or GML",
    description=DESCRIPTION,
    run=run,
    args=(
        arg("--step", metavar="STEPS",
            help="only these captured steps, e.g. 3 or 2,4-6 (default: all)"),
        arg("--rank", type=int_in(0, 2**31 - 1), metavar="RANK",
            help="only nodes involving this global rank (collectives it takes part in too)"),
        arg("--filter", metavar="GLOB",
            help="only nodes whose event name matches GLOB (fnmatch), e.g. 'Comm.*'; order "
                 "through removed nodes is kept as implied edges"),
        arg("--output", "-o", metavar="FILE",
            help="draw to FILE.svg / FILE.png, or write FILE.gml"),
        arg("--force", action="store_true", help="replace the output file if it exists"),
    ),
    epilog="example: python -m echo_sim graph traces/ --step 3 --rank 0 -o step3.svg",
)
