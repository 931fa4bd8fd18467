"""Loader for TrioSim traces: ``trace.csv`` (+ optional ``tensor.csv``) -> :class:`Trace`.

TrioSim (a multi-GPU DNN simulator) reads a per-operator CSV made from a PyTorch profile:

``trace.csv``: ``OperatorID, OperatorName, Operator_input, Operator_output,
Operator_cudatime, Operator_cudatimenooverlap, InputSize, OutputSize, gpuid, stage, tpflag``;
inputs / outputs are ``[id; id]`` tensor-id lists, sizes ``[n; n]`` element counts (one per
tensor), times microseconds, stage ``forward`` / ``backward`` / ``optimizer``.
``tensor.csv``: ``Index, TensorID, TensorShape, TensorNumElement, TensorEachByte,
TensorType, TensorStorgeid, gpuid`` (one row per use of a tensor; ids repeat).

How the rows map onto the trace model:

* one rank per ``gpuid``, one captured step (step 0) per rank, with a ``STEP`` row on tid 1;
* TrioSim traces carry **durations, not timestamps**: each rank's operators are laid out
  back to back from 0 µs in ``OperatorID`` order. Gaps, overlap with communication and the
  host time between kernels are not in the file, so none are in the trace;
* ``dur_us`` is ``Operator_cudatimenooverlap`` (the time TrioSim itself replays);
* stage -> category: forward -> ``FW.<OperatorName>``, backward -> ``BW.<OperatorName>``,
  optimizer -> ``UPDATE.<OperatorName>``; repeated names are told apart by ``occ``;
* sizes: element count × ``TensorEachByte`` of the tensor in ``tensor.csv``; a tensor it
  does not list (or no ``tensor.csv``) counts 4 bytes (float32) per element.
  ``param_bytes``: the inputs ``tensor.csv`` types ``weight`` / ``bias``; ``in_bytes``: the
  other inputs (as echo counts a module's inputs, without its parameters); ``out_bytes``:
  the outputs. Forward FLOPs of Linear / Conv: ``2 · output elements · Π weight.shape[1:]``
  (weight ``[out, in]`` or ``[C_out, C_in/groups, *kernel]``), when the weight shape is known;
* ``kind`` from the operator name (:func:`kind_of`): ``aten::linear`` / ``AddmmBackward0``
  -> ``Linear``, ``aten::conv2d`` -> ``Conv2d``, ``aten::embedding`` -> ``Embedding``, ...
* ``tpflag``: 1 marks the layers TrioSim's tensor parallelism splits (conv, linear,
  embedding and their backward). A trace with any such row says so in each rank's meta,
  ``tp_split`` = :data:`TP_SPLIT`, and ``simulate --tp`` splits those layers by output
  channels (:mod:`echo_sim.workload.channel_parallel`).

No row records the batch: TrioSim passes it on its command line (``-batch-size``, the
traced batch), so a loaded trace has none and ``simulate`` takes it from
``--traced-micro-batch`` (TrioSim's ``-batch-size`` spelling works too).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_sim.errors import TraceFormatError, TraceNotFoundError
from echo_sim.load.files import header_starts_with, read_regular_file
from echo_sim.trace.model import MAX_WORLD_SIZE, Cat, RankInfo, Trace, TraceBuilder

if TYPE_CHECKING:
    from echo_sim.load.sources import RankSource

__all__ = [
    "DEFAULT_ELEMENT_BYTES",
    "STAGES",
    "TENSOR_COLUMNS",
    "TP_SPLIT",
    "TRACE_COLUMNS",
    "is_triosim_csv",
    "kind_of",
    "load_triosim",
    "read_triosim",
]

TRACE_COLUMNS: tuple[str, ...] = (
    "OperatorID", "OperatorName", "Operator_input", "Operator_output", "Operator_cudatime",
    "Operator_cudatimenooverlap", "InputSize", "OutputSize", "gpuid", "stage", "tpflag",
)
TENSOR_COLUMNS: tuple[str, ...] = (
    "Index", "TensorID", "TensorShape", "TensorNumElement", "TensorEachByte", "TensorType",
    "TensorStorgeid", "gpuid",
)
STAGES: dict[str, Cat] = {"forward": Cat.FW, "backward": Cat.BW, "optimizer": Cat.UPDATE}
"""TrioSim stage -> echo category."""
DEFAULT_ELEMENT_BYTES = 4
"""Bytes per element of a tensor ``tensor.csv`` does not describe (float32)."""
TP_SPLIT = "output_channels"
"""``meta["tp_split"]`` of a trace with ``tpflag=1`` rows: its layers split by channels."""

_PREFIX = {Cat.FW: "FW.", Cat.BW: "BW.", Cat.UPDATE: "UPDATE."}
_EVAL = "autograd::engine::evaluate_function: "
# operator base name -> echo kind (module class name); conv dims come from the name
_KINDS = {
    "linear": "Linear", "addmm": "Linear", "linear_backward": "Linear",
    "addmmbackward": "Linear", "linearbackward": "Linear",
    "embedding": "Embedding", "embedding_backward": "Embedding",
    "embedding_dense_backward": "Embedding", "embeddingbackward": "Embedding",
    "embedding_bag": "EmbeddingBag", "embeddingbagbackward": "EmbeddingBag",
    "convolution": "Conv2d", "_convolution": "Conv2d", "convolution_backward": "Conv2d",
    "convolutionbackward": "Conv2d", "cudnn_convolution": "Conv2d",
}
_CONV = re.compile(r"^(conv|conv_transpose)([123])d$")
_PARAM_TYPES = ("weight", "bias")


def kind_of(op_name: str) -> str | None:
    """echo kind (module class) of a TrioSim / profiler operator name, else None.

    ``aten::conv<n>d`` -> ``Conv<n>d``, ``aten::conv_transpose<n>d`` -> ``ConvTranspose<n>d``;
    the dimension-free ``aten::convolution`` and ``ConvolutionBackward0`` -> ``Conv2d``.
    """
    base = op_name[len(_EVAL):] if op_name.startswith(_EVAL) else op_name
    base = base.rsplit("::", 1)[-1].strip()
    m = _CONV.match(base)
    if m:
        return ("Conv" if m.group(1) == "conv" else "ConvTranspose") + f"{m.group(2)}d"
    return _KINDS.get(re.sub(r"\d+$", "", base).lower())


def is_triosim_csv(path: Path) -> bool:
    """True when the file's first line is a TrioSim ``trace.csv`` header."""
    return header_starts_with(path, "OperatorID,OperatorName,")


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV whose header holds ``columns``."""
    text = read_regular_file(path)
    try:
        with io.StringIO(text.decode("utf-8-sig"), newline="") as f:
            reader = csv.DictReader(f, skipinitialspace=True)
            header = [h.strip() for h in (reader.fieldnames or [])]
            if not header:
                raise TraceFormatError(f"{path}: empty file (expected header "
                                       f"{','.join(columns)})")
            reader.fieldnames = header
            missing = [c for c in columns if c not in header]
            if missing:
                raise TraceFormatError(f"{path}:1: missing column(s) {', '.join(missing)} "
                                       f"(expected {','.join(columns)})")
            return [(reader.line_num, row) for row in reader]
    except OSError as e:
        raise TraceNotFoundError(f"{path}: cannot read ({e.strerror or e})") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise TraceFormatError(f"{path}: not a CSV file ({e})") from None


def _num(value: str | None, what: str, where: str, *, integer: bool = False) -> float:
    text = (value or "").strip()
    try:
        x = float(int(text)) if integer else float(text)
    except (ValueError, OverflowError):
        raise TraceFormatError(f"{where}: {what} {text!r} is not "
                               f"{'an integer' if integer else 'a number'}") from None
    if not math.isfinite(x) or x < 0:
        raise TraceFormatError(f"{where}: {what} {text!r} must be finite and >= 0")
    return x


def _gpu(value: str | None, where: str) -> int:
    """A ``gpuid`` cell: an integer rank below :data:`MAX_WORLD_SIZE`."""
    gpu = int(_num(value, "gpuid", where, integer=True))
    if gpu >= MAX_WORLD_SIZE:
        raise TraceFormatError(f"{where}: gpuid {gpu} is out of range (0..{MAX_WORLD_SIZE - 1})")
    return gpu


def _list(value: str | None, what: str, where: str) -> list[str]:
    """Items of a ``[a; b]`` list (``[]`` -> no items)."""
    text = (value or "").strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise TraceFormatError(f"{where}: {what} {text!r} is not a [a; b] list")
    inner = text[1:-1].replace(" ", "")
    return [t.strip("'") for t in inner.split(";")] if inner else []


def _tensors(path: Path) -> dict[tuple[int, str], tuple[int, str, tuple[int, ...]]]:
    """(gpuid, TensorID) -> (bytes per element, types joined by '|', shape) from tensor.csv."""
    out: dict[tuple[int, str], tuple[int, str, tuple[int, ...]]] = {}
    for line, row in _rows(path, TENSOR_COLUMNS):
        where = f"{path}:{line}"
        gpu = _gpu(row["gpuid"], where)
        tid = (row["TensorID"] or "").strip()
        each = int(_num(row["TensorEachByte"], "TensorEachByte", where, integer=True))
        dims = re.findall(r"\d+", row["TensorShape"] or "")
        kind = (row["TensorType"] or "").strip()
        prev = out.get((gpu, tid))
        if prev is not None:
            kind = kind if kind in prev[1].split("|") else f"{prev[1]}|{kind}"
            each = each or prev[0]
        out[(gpu, tid)] = (each, kind, tuple(int(d) for d in dims))
    return out


def _is_param(types: str) -> bool:
    return any(t.startswith(_PARAM_TYPES) for t in types.split("|"))


def read_triosim(path: str | Path, *, tensor_csv: str | Path | None = None,
                 source: str = "") -> Trace:
    """Read one TrioSim ``trace.csv`` (or the directory holding it) into a :class:`Trace`.

    ``tensor_csv``: the tensor table; by default ``tensor.csv`` next to ``trace.csv`` when
    it exists. Raises :class:`TraceFormatError` naming the file and line for an empty file,
    missing columns, a non-numeric or negative time or size, or an unknown stage.
    """
    p = Path(path)
    trace_csv = p / "trace.csv" if p.is_dir() else p
    if not trace_csv.is_file():
        raise TraceNotFoundError(f"{trace_csv}: no such file (expected a TrioSim trace.csv)")
    tpath = Path(tensor_csv) if tensor_csv is not None else trace_csv.parent / "tensor.csv"
    tensors = _tensors(tpath) if tensor_csv is not None or tpath.is_file() else {}
    rows = _rows(trace_csv, TRACE_COLUMNS)
    if not rows:
        raise TraceFormatError(f"{trace_csv}: no operator rows after the header")
    ops: dict[int, list[tuple[float, int, dict[str, Any]]]] = {}
    tp_rows = 0
    for line, row in rows:
        where = f"{trace_csv}:{line} (OperatorID {(row['OperatorID'] or '').strip()!r})"
        op_id = _num(row["OperatorID"], "OperatorID", where, integer=True)
        gpu = _gpu(row["gpuid"], where)
        stage = (row["stage"] or "").strip().lower()
        if stage not in STAGES:
            raise TraceFormatError(f"{where}: stage {stage!r} unknown "
                                   f"(valid: {', '.join(STAGES)})")
        dur = _num(row["Operator_cudatimenooverlap"], "Operator_cudatimenooverlap", where)
        _num(row["Operator_cudatime"], "Operator_cudatime", where)
        tp_rows += (row["tpflag"] or "").strip() == "1"
        name = (row["OperatorName"] or "").strip()
        if not name:
            raise TraceFormatError(f"{where}: empty OperatorName")
        ops.setdefault(gpu, []).append((op_id, line, _event(
            row, where, gpu, STAGES[stage], name, dur, tensors)))
    b = TraceBuilder("triosim", source or str(p))
    world = max(ops) + 1
    for gpu in sorted(ops):
        b.ranks[gpu] = RankInfo(rank=gpu, world_size=world, device="cuda",
                                source=str(trace_csv),
                                meta={"format": "triosim", "tensor_csv": bool(tensors),
                                      **({"tp_split": TP_SPLIT} if tp_rows else {})})
        t_us = 0.0
        for _op_id, _line, ev in sorted(ops[gpu], key=lambda o: (o[0], o[1])):
            b.add(rank=gpu, step=0, ts_us=t_us, **ev)
            t_us += ev["dur_us"]
        b.add(rank=gpu, name="STEP", cat=Cat.STEP, ts_us=0.0, dur_us=t_us, step=0, tid=1)
    return b.build(steps=[0])


def _event(row: dict[str, str], where: str, gpu: int, cat: Cat, name: str, dur: float,
           tensors: dict[tuple[int, str], tuple[int, str, tuple[int, ...]]]) -> dict[str, Any]:
    """Keyword arguments of :meth:`TraceBuilder.add` for one operator row."""
    def side(ids_col: str, size_col: str) -> tuple[int, int, int, tuple[int, ...]]:
        ids = _list(row[ids_col], ids_col, where)
        sizes = [int(_num(s, size_col, where, integer=True))
                 for s in _list(row[size_col], size_col, where)]
        total = params = 0
        weight: tuple[int, ...] = ()
        for i, n in enumerate(sizes):
            info = tensors.get((gpu, ids[i])) if i < len(ids) else None
            nbytes = n * (info[0] if info else DEFAULT_ELEMENT_BYTES)
            if info and _is_param(info[1]):
                params += nbytes
                if "weight" in info[1].split("|") and not weight:
                    weight = info[2]
            else:
                total += nbytes
        return total, params, sum(sizes), weight

    in_bytes, param_bytes, _, weight = side("Operator_input", "InputSize")
    out_bytes, _, out_elems, _ = side("Operator_output", "OutputSize")
    kind = kind_of(name)
    if kind == "Conv2d" and len(weight) >= 3 and "conv2d" not in name:  # dims from the weight
        kind = f"Conv{len(weight) - 2}d"
    flops = 0.0
    if cat == Cat.FW and kind and kind.startswith(("Linear", "Conv")) and len(weight) >= 2:
        flops = 2.0 * out_elems * math.prod(weight[1:])
    return {"name": _PREFIX[cat] + name, "cat": cat, "dur_us": dur, "kind": kind,
            "in_bytes": in_bytes, "out_bytes": out_bytes, "param_bytes": param_bytes,
            "flops": flops}


def load_triosim(sources: Sequence[RankSource], *, source: str = "",
                 wrap: Callable[[Iterable[Any]], Iterable[Any]] = iter) -> Trace:
    """Loader entry point for :func:`echo_sim.load.load_trace`: one TrioSim trace directory.

    A TrioSim ``trace.csv`` holds every GPU of a run, so exactly one source is accepted.
    """
    files = [s.trace_file for s in wrap(sources)]
    if len(files) != 1:
        raise TraceFormatError(
            f"{source or 'input'}: holds {len(files)} TrioSim traces "
            f"({', '.join(str(f.parent) for f in files[:4])}); pass the directory of one")
    return read_triosim(files[0], source=source)
