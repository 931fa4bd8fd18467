"""Loader for Aceso's op-level profiling database: a directory of CSVs -> :class:`Trace`.

Aceso's profiler (``op_profiler.py --prof-path DIR``) writes, per model, size, micro-batch,
tensor-parallel size and partition algorithm, one file
``{model}_{size}_mbs{m}_tp{t}_algo{a}.csv`` with the columns
``op_name,forward-compute,backward-compute,input_size,output_size,weights,activations,
fwd_reserved,bwd_reserved`` (times µs per op on one GPU, sizes MB = 2^20 bytes, all per GPU
of the tensor-parallel group). One transformer layer is profiled and stands for every layer.
Its collective database (``prim_{model}_{size}_{coll}_{n}gpus.csv``) and point-to-point
bandwidths (``p2p_intra_node.csv``, ``p2p_inter_node.csv``) sit in the same directory; this
loader lists them in ``meta["aceso"]`` but prices collectives with echo's own model.

How the database becomes a one-rank, one-step trace ``simulate`` and ``search`` run on:

* the ``tp1`` / ``algo0`` file of the smallest micro-batch is the traced run; its ops are laid
  back to back from 0 µs: ``encoder-embedding``, ``num_layers`` x the layer's ``enc-*`` ops,
  ``final-layernorm``, ``gpt-post-process``, then the backward ops in reverse order, then a
  0 µs ``UPDATE.Adam`` (Aceso does not profile the optimizer; its memory model is Adam's);
* op names become Megatron module paths so echo's tensor-parallel pattern applies
  (:data:`MODULES`: ``enc-attention-qkv`` -> ``layers.<i>.attention.query_key_value``, a
  column-parallel Linear; ``enc-attention-dense`` -> ``...attention.dense``, row-parallel; the
  attention core and GeLU between them are sharded; ``encoder-embedding`` -> ``embedding`` and
  ``gpt-post-process`` -> ``output``, vocab-parallel);
* ``weights`` -> ``param_bytes`` (fp16), ``input_size`` / ``output_size`` -> ``in_bytes`` /
  ``out_bytes``, ``activations`` -> the bytes saved for backward (``saved_activations``);
* the measured times at every other profiled ``tp`` are kept, per op in trace order, in the
  rank's ``meta["tp_time_us"]``: :func:`echo_sim.workload.build.make_plan` uses them instead
  of its ``1/tp`` model when the layout's ``tp`` was profiled;
* the model's shape (layers, hidden, heads, sequence) comes from Aceso's size table
  (:data:`MODEL_SHAPES`), as Aceso's own search takes it from ``--model-size``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_sim.errors import TraceFormatError, TraceNotFoundError
from echo_sim.load.files import header_starts_with, read_regular_file
from echo_sim.trace.model import Cat, RankInfo, Trace, TraceBuilder

if TYPE_CHECKING:
    from echo_sim.load.sources import RankSource

__all__ = [
    "COLUMNS",
    "MB",
    "MODEL_SHAPES",
    "MODULES",
    "AcesoFile",
    "aceso_files",
    "is_aceso_csv",
    "load_aceso",
    "pick_aceso_file",
    "read_aceso",
]

COLUMNS: tuple[str, ...] = ("op_name", "forward-compute", "backward-compute", "input_size",
                            "output_size", "weights", "activations", "fwd_reserved",
                            "bwd_reserved")
MB = 1 << 20
"""Bytes per MB of Aceso's size columns (``torch.cuda`` bytes / 1024 / 1024)."""

MODEL_SHAPES: dict[tuple[str, str], dict[str, int]] = {
    ("gpt", "350M"): {"layers": 24, "hidden": 1024, "heads": 16, "seq": 2048},
    ("gpt", "1_3B"): {"layers": 24, "hidden": 2048, "heads": 32, "seq": 2048},
    ("gpt", "2_6B"): {"layers": 32, "hidden": 2560, "heads": 32, "seq": 2048},
    ("gpt", "6_7B"): {"layers": 32, "hidden": 4096, "heads": 32, "seq": 2048},
    ("gpt", "13B"): {"layers": 40, "hidden": 5120, "heads": 40, "seq": 2048},
}
"""Aceso's GPT sizes (``--model-size``): transformer layers, hidden size, attention heads,
sequence length (Aceso's ``model_configs``, Megatron-LM's GPT-3 table)."""

# Aceso op -> (module path; {i}: the layer), echo kind. Layer ops carry the "enc-" prefix.
MODULES: dict[str, tuple[str, str]] = {
    "encoder-embedding": ("embedding", "Embedding"),
    "enc-1st-layernorm": ("layers.{i}.input_layernorm", "LayerNorm"),
    "enc-attention-qkv": ("layers.{i}.attention.query_key_value", "Linear"),
    "enc-attention-score": ("layers.{i}.attention.score", "Attention"),
    "enc-attention-softmax": ("layers.{i}.attention.softmax", "Attention"),
    "enc-attention-dropout": ("layers.{i}.attention.attention_dropout", "Attention"),
    "enc-attention-context": ("layers.{i}.attention.context", "Attention"),
    "enc-attention-dense": ("layers.{i}.attention.dense", "Linear"),
    "enc-post-attention-dropout": ("layers.{i}.post_attention_dropout", "Dropout"),
    "enc-2nd-layernorm": ("layers.{i}.post_attention_layernorm", "LayerNorm"),
    "enc-MLP-GEMM-1": ("layers.{i}.mlp.dense_h_to_4h", "Linear"),
    "enc-MLP-gelu": ("layers.{i}.mlp.gelu", "GELU"),
    "enc-MLP-GEMM-2": ("layers.{i}.mlp.dense_4h_to_h", "Linear"),
    "enc-post-MLP-dropout": ("layers.{i}.post_mlp_dropout", "Dropout"),
    "final-layernorm": ("final_layernorm", "LayerNorm"),
    "gpt-post-process": ("output", "Linear"),
}
_LAYER_PREFIX = "enc-"
_FILE = re.compile(r"^(?P<model>[A-Za-z0-9-]+)_(?P<size>.+)_mbs(?P<mbs>\d+)_tp(?P<tp>\d+)"
                   r"_algo(?P<algo>\d+)\.csv$")
_SIDE = re.compile(r"^(prim_.+_\d+gpus|p2p_(intra|inter)_node)\.csv$")


@dataclass(frozen=True)
class AcesoFile:
    """One op-database file and what its name says."""

    path: Path
    model: str
    size: str
    mbs: int
    tp: int
    algo: int


def _parse_name(path: Path) -> AcesoFile | None:
    m = _FILE.match(path.name)
    if m is None:
        return None
    return AcesoFile(path, m["model"], m["size"], int(m["mbs"]), int(m["tp"]), int(m["algo"]))


def is_aceso_csv(path: Path) -> bool:
    """True when the file's first line is an Aceso op-database header."""
    return header_starts_with(path, "op_name,forward-compute,backward-compute")


def aceso_files(directory: Path) -> list[AcesoFile]:
    """The op-database files of ``directory`` (named as Aceso names them), sorted."""
    try:
        found = [_parse_name(p) for p in directory.iterdir() if p.is_file()]
    except OSError:
        return []
    return sorted((f for f in found if f is not None),
                  key=lambda f: (f.model, f.size, f.mbs, f.tp, f.algo))


def pick_aceso_file(directory: Path) -> Path | None:
    """The file that stands for the traced run: ``tp1`` ``algo0`` at the smallest
    micro-batch. None when ``directory`` holds no op database; :class:`TraceFormatError`
    when it holds several models (name one file of the model wanted)."""
    files = aceso_files(directory)
    if not files:
        return None
    models = sorted({(f.model, f.size) for f in files})
    if len(models) > 1:
        names = ", ".join(f"{m}_{s}" for m, s in models)
        raise TraceFormatError(
            f"{directory}: Aceso database of several models ({names}); pass one file, e.g. "
            f"{directory / (models[0][0] + '_' + models[0][1] + '_mbs1_tp1_algo0.csv')}")
    base = [f for f in files if f.tp == 1 and f.algo == 0]
    if not base:
        raise TraceFormatError(f"{directory}: Aceso database without a tp1 algo0 file "
                               f"(have {', '.join(f.path.name for f in files[:4])})")
    return base[0].path


def _read_rows(path: Path) -> list[tuple[str, list[float]]]:
    """(op name, the eight numbers) per row of one op-database CSV, in file order."""
    try:
        text = read_regular_file(path).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}: not a text CSV ({e})") from None
    except OSError as e:
        raise TraceNotFoundError(f"{path}: cannot read ({e.strerror or e})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [h.strip() for h in next(reader, [])]
    if header[: len(COLUMNS)] != list(COLUMNS):
        raise TraceFormatError(f"{path}:1: header {','.join(header)!r} is not Aceso's "
                               f"(expected {','.join(COLUMNS)})")
    rows: list[tuple[str, list[float]]] = []
    for line, row in enumerate(reader, start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) < len(COLUMNS):
            raise TraceFormatError(f"{path}:{line}: {len(row)} columns, expected {len(COLUMNS)}")
        name = row[0].strip()
        vals: list[float] = []
        for col, cell in zip(COLUMNS[1:], row[1:len(COLUMNS)], strict=True):
            try:
                x = float(cell)
            except ValueError:
                raise TraceFormatError(f"{path}:{line} ({name}): {col} {cell.strip()!r} is not "
                                       "a number") from None
            if not math.isfinite(x) or x < 0:
                raise TraceFormatError(f"{path}:{line} ({name}): {col} {cell.strip()!r} must "
                                       "be finite and >= 0")
            vals.append(x)
        rows.append((name, vals))
    if not rows:
        raise TraceFormatError(f"{path}: no op rows after the header")
    return rows


def _op_sequence(rows: list[tuple[str, list[float]]], layers: int, path: Path
                 ) -> list[tuple[str, str, str, list[float]]]:
    """(Aceso op, module path, kind, numbers) of the forward pass in order: the ops before
    the layer, the layer's ops ``layers`` times, the ops after it."""
    unknown = [n for n, _ in rows if n not in MODULES]
    if unknown:
        raise TraceFormatError(f"{path}: op(s) {', '.join(unknown[:4])} are not GPT ops this "
                               f"loader maps (valid: {', '.join(MODULES)})")
    layer = [(n, v) for n, v in rows if n.startswith(_LAYER_PREFIX)]
    head = [(n, v) for n, v in rows if not n.startswith(_LAYER_PREFIX)]
    first = [(n, v) for n, v in head if n == "encoder-embedding"]
    last = [(n, v) for n, v in head if n != "encoder-embedding"]
    out: list[tuple[str, str, str, list[float]]] = []
    for n, v in first:
        out.append((n, MODULES[n][0], MODULES[n][1], v))
    for i in range(layers):
        for n, v in layer:
            out.append((n, MODULES[n][0].format(i=i), MODULES[n][1], v))
    for n, v in last:
        out.append((n, MODULES[n][0], MODULES[n][1], v))
    return out


def _shape(model: str, size: str, path: Path) -> dict[str, int]:
    shape = MODEL_SHAPES.get((model, size))
    if shape is None:
        known = ", ".join(f"{m}_{s}" for m, s in MODEL_SHAPES)
        raise TraceFormatError(f"{path}: Aceso model {model}_{size} has no known shape "
                               f"(valid: {known})")
    return dict(shape)


def read_aceso(path: str | Path, *, source: str = "") -> Trace:
    """Read an Aceso op database (a directory, or one ``*_mbs*_tp1_algo0.csv`` of it) into a
    one-rank :class:`Trace` (module docstring). Raises :class:`TraceFormatError` naming the
    file for a bad header, a non-numeric or negative cell, an op this loader does not map,
    an unknown model size, or a ``tp`` file whose ops differ from the traced one's."""
    p = Path(path)
    chosen = pick_aceso_file(p) if p.is_dir() else p
    if chosen is None:
        raise TraceNotFoundError(f"{p}: no Aceso op database "
                                 "({model}_{size}_mbs{m}_tp{t}_algo{a}.csv)")
    info = _parse_name(chosen)
    if info is None:
        raise TraceFormatError(f"{chosen}: not named as Aceso names its op database "
                               "({model}_{size}_mbs{m}_tp{t}_algo{a}.csv)")
    shape = _shape(info.model, info.size, chosen)
    fw = _op_sequence(_read_rows(chosen), shape["layers"], chosen)
    siblings = [f for f in aceso_files(chosen.parent)
                if (f.model, f.size, f.mbs, f.algo) == (info.model, info.size, info.mbs, info.algo)]
    b = TraceBuilder("aceso", source or str(p))
    t_us = 0.0
    saved: list[list[Any]] = []
    params: list[dict[str, Any]] = []
    for _n, module, kind, v in fw:
        f_us, _b, in_mb, out_mb, w_mb, act_mb = v[:6]
        b.add(rank=0, step=0, name=f"FW.{module}", cat=Cat.FW, ts_us=t_us, dur_us=f_us,
              kind=kind, param_bytes=int(round(w_mb * MB)), in_bytes=int(round(in_mb * MB)),
              out_bytes=int(round(out_mb * MB)))
        t_us += f_us
        saved.append([module, int(round(act_mb * MB))])
        if w_mb > 0:
            params.append({"name": f"{module}.weight", "bytes": int(round(w_mb * MB)),
                           "dtype": "float16"})
    for _n, module, kind, v in reversed(fw):
        b.add(rank=0, step=0, name=f"BW.{module}", cat=Cat.BW, ts_us=t_us, dur_us=v[1],
              kind=kind)
        t_us += v[1]
    b.add(rank=0, step=0, name="UPDATE.Adam", cat=Cat.UPDATE, ts_us=t_us, dur_us=0.0)
    b.add(rank=0, name="STEP", cat=Cat.STEP, ts_us=0.0, dur_us=t_us, step=0, tid=1)
    tp_time: dict[str, list[float]] = {}
    for f in siblings:
        if f.tp == 1:
            continue
        seq = _op_sequence(_read_rows(f.path), shape["layers"], f.path)
        if [m for _, m, _, _ in seq] != [m for _, m, _, _ in fw]:
            raise TraceFormatError(f"{f.path}: its ops differ from {chosen.name}'s")
        tp_time[str(f.tp)] = ([v[0] for _, _, _, v in seq]
                              + [v[1] for _, _, _, v in reversed(seq)] + [0.0])
    side = sorted(q.name for q in chosen.parent.iterdir() if q.is_file() and _SIDE.match(q.name))
    others = sorted({(f.mbs, f.tp, f.algo) for f in aceso_files(chosen.parent)
                     if (f.model, f.size) == (info.model, info.size)})
    meta = {
        "format": "aceso", "micro_batch_size": info.mbs, "micro_batch_source": chosen.name,
        "device": "cuda", "model": {**shape, "name": info.model, "size": info.size},
        "params": params, "saved_activations": {"per_call": saved}, "tp_time_us": tp_time,
        "aceso": {"model_name": info.model, "model_size": info.size, "file": chosen.name,
                  "profiled": [{"mbs": m, "tp": t, "algo": a} for m, t, a in others],
                  "side_files": side},
    }
    b.ranks[0] = RankInfo(rank=0, world_size=1, device="cuda", source=str(chosen), meta=meta)
    trace = b.build(steps=[0])
    if len({m for m, _, _ in others}) > 1:
        trace.notes.append(f"{chosen.parent}: Aceso micro-batch(es) "
                           f"{sorted({m for m, _, _ in others} - {info.mbs})} not used; the "
                           f"simulation scales op times from mbs{info.mbs}")
    return trace


def load_aceso(sources: Sequence[RankSource], *, source: str = "",
               wrap: Callable[[Iterable[Any]], Iterable[Any]] = iter) -> Trace:
    """Loader entry point for :func:`echo_sim.load.load_trace`: one Aceso database."""
    files = [s.trace_file for s in wrap(sources)]
    if len(files) != 1:
        raise TraceFormatError(
            f"{source or 'input'}: holds {len(files)} Aceso databases "
            f"({', '.join(str(f.parent) for f in files[:4])}); pass the directory of one")
    return read_aceso(files[0], source=source)
