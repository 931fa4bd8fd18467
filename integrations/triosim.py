"""Export an echo trace to TrioSim's ``trace.csv`` + ``tensor.csv``.

TrioSim replays a per-operator profile of one GPU on many; this writes the compute events
(``FW``/``BW``/``UPDATE``) of one rank and one captured step, one CSV row per operator:

* rows in time order, ``OperatorID`` 1, 2, ...; only leaf events (an event that holds
  another compute event is its parent module and would count twice);
* ``OperatorName``: the event name without its ``FW.`` / ``BW.`` / ``UPDATE.`` prefix;
  ``stage``: forward / backward / optimizer; ``gpuid``: 0 (TrioSim's ``-GPUnumber``
  decides how many GPUs replay it);
* ``Operator_cudatime`` = ``Operator_cudatimenooverlap`` = the event's ``dur_us`` (3
  decimals); the gaps between events are not representable and are dropped;
* tensors are synthesised, since echo records sizes, not tensor identities: operator ``i``
  reads activation ``a_i`` and writes ``a_(i+1)`` (chained ids), plus one ``weight`` tensor
  of ``param_bytes`` when it has parameters. Element counts are bytes ÷ ``dtype_bytes``
  (rounded up); shapes are written flat (``[n]``). ``tensor.csv`` lists every use of a
  tensor (as TrioSim's tracer does), so every id ``trace.csv`` names is defined;
* ``tpflag`` = 1 for the kinds tensor parallelism splits (Linear, Conv*, Embedding*).

``python -m integrations.triosim export PATH --output DIR [--rank R] [--step S]
[--dtype-bytes N] [--force]`` loads any trace echo_sim reads and writes ``DIR/trace.csv``
and ``DIR/tensor.csv``; then run TrioSim with ``-trace-dir DIR``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from echo_sim.errors import ConfigError, EchoError
from echo_sim.load import load_trace
from echo_sim.load.triosim import TENSOR_COLUMNS, TRACE_COLUMNS
from echo_sim.trace.model import CAT_NAMES, Cat, Trace

__all__ = ["TP_KINDS", "TriosimExport", "export_triosim", "main", "triosim_rows"]

TP_KINDS: tuple[str, ...] = ("Linear", "Conv", "Embedding")
"""Kind prefixes whose operators get ``tpflag=1`` (ConvTranspose starts with Conv)."""

_STAGE = {int(Cat.FW): "forward", int(Cat.BW): "backward", int(Cat.UPDATE): "optimizer"}


@dataclass(frozen=True, kw_only=True)
class TriosimExport:
    """What :func:`export_triosim` wrote: the two files, the rank and step, the row count."""

    trace_csv: Path
    tensor_csv: Path
    rank: int
    step: int
    num_ops: int


def _pick(trace: Trace, rank: int | None, step: int | None) -> tuple[int, int]:
    ranks = sorted(trace.ranks) or sorted({int(r) for r in trace.events.rank})
    if not ranks:
        raise ConfigError(f"trace {trace.source or '(in memory)'} has no ranks to export")
    r = ranks[0] if rank is None else rank
    if r not in ranks:
        raise ConfigError(f"--rank {r} not in the trace (valid: {ranks})")
    rows = trace.rank_rows(r)
    steps = list(trace.steps) or sorted({int(s) for s in trace.events.step[rows]})
    s = steps[-1] if step is None and steps else step
    if s is None or s not in steps:
        raise ConfigError(f"--step {s} not captured on rank {r} (valid: {steps})")
    return r, s


def _leaf_compute(trace: Trace, rank: int, step: int) -> np.ndarray:
    """Rows of the step's innermost FW/BW/UPDATE events, in time order."""
    ev = trace.events
    rows = trace.step_rows(rank, step)
    rows = rows[np.isin(ev.cat[rows], list(_STAGE))]
    order = np.lexsort((-ev.dur_us[rows], ev.ts_us[rows]))  # parents before children
    rows = rows[order]
    end = ev.ts_us[rows] + ev.dur_us[rows]
    leaf = np.ones(rows.size, dtype=bool)
    leaf[:-1] = ev.ts_us[rows[1:]] >= end[:-1] - 1e-6
    return rows[leaf]


def _elems(nbytes: int, dtype_bytes: int) -> int:
    return -(-int(nbytes) // dtype_bytes)


def triosim_rows(trace: Trace, *, rank: int, step: int, dtype_bytes: int = 4
                 ) -> tuple[list[list[str]], list[list[str]]]:
    """(``trace.csv`` rows, ``tensor.csv`` rows), without headers, for one rank and step."""
    if dtype_bytes <= 0:
        raise ConfigError(f"dtype_bytes {dtype_bytes} must be a positive byte count (e.g. 4)")
    ev = trace.events
    ops: list[list[str]] = []
    tensors: list[list[str]] = []

    def tensor(tid: int, n: int, kind: str) -> None:
        tensors.append([str(len(tensors)), str(tid), f"[{n}]", str(n), str(dtype_bytes),
                        kind, str(tid), "0"])

    rows = _leaf_compute(trace, rank, step)
    next_id = rows.size + 2  # weight ids after the activation chain 1 .. n+1
    for i, row in enumerate(rows):
        cat = int(ev.cat[row])
        name = trace.name_of(int(row))
        prefix = CAT_NAMES[cat] + "."
        op_name = name[len(prefix):] if name.startswith(prefix) else name
        k = int(ev.kind[row])
        kind = trace.kinds[k] if k >= 0 else ""
        act_in, act_out = i + 1, i + 2
        n_in, n_out = _elems(ev.in_bytes[row], dtype_bytes), _elems(ev.out_bytes[row], dtype_bytes)
        ids, sizes = [act_in], [n_in]
        tensor(act_in, n_in, "input")
        if int(ev.param_bytes[row]) > 0:
            n_w = _elems(ev.param_bytes[row], dtype_bytes)
            ids.append(next_id)
            sizes.append(n_w)
            tensor(next_id, n_w, "weight")
            next_id += 1
        tensor(act_out, n_out, "output")
        dur = f"{float(ev.dur_us[row]):.3f}"
        ops.append([
            str(i + 1), op_name, _list(ids), f"[{act_out}]", dur, dur, _list(sizes),
            f"[{n_out}]", "0", _STAGE[cat], "1" if kind.startswith(TP_KINDS) else "0",
        ])
    return ops, tensors


def _list(items: Sequence[int]) -> str:
    return "[" + "; ".join(str(x) for x in items) + "]"


def _write_csv(path: Path, header: Sequence[str], rows: list[list[str]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


def export_triosim(trace: Trace, out_dir: str | Path, *, rank: int | None = None,
                   step: int | None = None, dtype_bytes: int = 4,
                   force: bool = False) -> TriosimExport:
    """Write ``out_dir/trace.csv`` and ``out_dir/tensor.csv`` for one rank and step.

    ``rank``: default the lowest; ``step``: default the last captured step;
    ``dtype_bytes``: bytes per element used to turn byte counts into element counts;
    ``force``: overwrite an existing ``trace.csv``. Raises :class:`ConfigError` for a rank or
    step the trace lacks, or a step with no compute events.
    """
    r, s = _pick(trace, rank, step)
    ops, tensors = triosim_rows(trace, rank=r, step=s, dtype_bytes=dtype_bytes)
    if not ops:
        raise ConfigError(f"rank {r} step {s} of {trace.source or 'the trace'} has no "
                          "FW/BW/UPDATE events to export")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: exists and is not a directory")
    if not force and (out / "trace.csv").exists():
        raise ConfigError(f"{out / 'trace.csv'}: exists (pass --force to overwrite)")
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "tensor.csv", TENSOR_COLUMNS, tensors)
    _write_csv(out / "trace.csv", TRACE_COLUMNS, ops)
    return TriosimExport(trace_csv=out / "trace.csv", tensor_csv=out / "tensor.csv",
                         rank=r, step=s, num_ops=len(ops))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m integrations.triosim",
                                description="Convert echo traces to TrioSim's CSV format.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write trace.csv + tensor.csv for one rank and step")
    e.add_argument("path", help="any trace echo_sim reads (echo, ByteProfile, Kineto, TrioSim)")
    e.add_argument("--output", "-o", required=True, help="directory to write into")
    e.add_argument("--rank", type=int, default=None, help="rank to export (default: lowest)")
    e.add_argument("--step", type=int, default=None, help="step to export (default: last)")
    e.add_argument("--dtype-bytes", type=int, default=4,
                   help="bytes per tensor element (default 4: float32)")
    e.add_argument("--force", action="store_true", help="overwrite an existing trace.csv")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input)."""
    opts = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        res = export_triosim(load_trace(opts.path), opts.output, rank=opts.rank,
                             step=opts.step, dtype_bytes=opts.dtype_bytes, force=opts.force)
    except EchoError as e:
        sys.stderr.write(f"integrations.triosim: error: {e}\n")
        return 2
    print(f"wrote {res.trace_csv} ({res.num_ops} operators, rank {res.rank}, step {res.step}) "
          f"and {res.tensor_csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
