"""Training facts a framework knows (micro-batch, global batch, ZeRO stage...) added to meta.json.

Capture measures what it can see (``micro_batch_size`` is dimension 0 of the outermost
module's first tensor input); a framework knows more: gradient accumulation, the data
parallel size, the global batch. :func:`training_meta` puts them in one ``training`` object
and :func:`annotate_meta` adds it to the ``meta.json`` of a finished capture (atomically,
as the writer does), filling ``micro_batch_size`` when capture could not measure it and
setting the top-level ``global_batch_size``. Never raises into the training job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from echo_trace.writer import dumps_json, write_atomic

__all__ = ["annotate_meta", "annotate_written", "comm_summary", "training_meta"]

log = logging.getLogger("echo_trace")


def training_meta(*, framework: str, micro_batch_size: int | None,
                  gradient_accumulation_steps: int = 1, data_parallel_size: int = 1,
                  global_batch_size: int | None = None, **extra: Any) -> dict[str, Any]:
    """The ``training`` object of meta.json.

    ``global_batch_size`` defaults to micro-batch x accumulation x data-parallel size (the
    samples one optimizer step consumes); ``extra`` keys (e.g. ``zero_stage``) are kept.
    """
    if global_batch_size is None and micro_batch_size is not None:
        global_batch_size = micro_batch_size * gradient_accumulation_steps * data_parallel_size
    out: dict[str, Any] = {
        "framework": framework, "micro_batch_size": micro_batch_size,
        "gradient_accumulation_steps": gradient_accumulation_steps,
        "data_parallel_size": data_parallel_size, "global_batch_size": global_batch_size,
    }
    out.update(extra)
    return out


def comm_summary(rank_dir: str | Path) -> dict[str, dict[str, int]]:
    """Per collective name in the rank's trace: ``{"count": n, "bytes": total}`` ({} when the
    trace cannot be read; never raises)."""
    d = Path(rank_dir)
    path = d / "trace.json"
    try:
        if not path.exists():
            import gzip

            raw = gzip.decompress((d / "trace.json.gz").read_bytes())
        else:
            raw = path.read_bytes()
        events = json.loads(raw).get("traceEvents", [])
    except (OSError, ValueError, EOFError) as e:
        log.warning("echo_trace: could not summarise the collectives of %s (%s)", d, e)
        return {}
    out: dict[str, dict[str, int]] = {}
    for ev in events:
        if ev.get("cat") != "Comm" or ev.get("ph") != "X":
            continue
        a = ev.get("args") or {}
        c = str(a.get("collective", "unknown"))
        slot = out.setdefault(c, {"count": 0, "bytes": 0})
        slot["count"] += 1
        slot["bytes"] += int(a.get("bytes", 0) or 0)
    return out


def annotate_meta(rank_dir: str | Path | None, training: dict[str, Any],
                  **top: Any) -> bool:
    """Add ``training`` (and ``top`` keys) to ``rank_dir/meta.json``; False when not written.

    Fills ``micro_batch_size`` from ``training`` when capture left it null, and sets
    ``global_batch_size``; a measured ``micro_batch_size`` is kept as measured.
    """
    if rank_dir is None:
        return False
    path = Path(rank_dir) / "meta.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["training"] = training
        if meta.get("micro_batch_size") is None and training.get("micro_batch_size"):
            meta["micro_batch_size"] = training["micro_batch_size"]
        if training.get("global_batch_size") is not None:
            meta["global_batch_size"] = training["global_batch_size"]
        meta.update(top)
        write_atomic(path, dumps_json(meta, indent=1))
        return True
    except (OSError, ValueError, TypeError) as e:
        log.warning("echo_trace: could not add training facts to %s (%s)", path, e)
        return False


def annotate_written(cap: Any, read_training: Callable[[], dict[str, Any]], *,
                     collectives: bool = False) -> bool:
    """Add the framework's ``training`` facts to ``cap``'s meta.json once it is written.

    Returns True when done with it (annotated, or the facts could not be read: one warning,
    never raised into training), False while the trace is not written yet (call again).
    ``collectives``: also record per-collective counts and bytes from the trace.
    """
    if cap is None or cap.written is None or cap.rank_dir is None:
        return False
    try:
        training = read_training()
    except Exception as e:  # noqa: BLE001 - metadata must never stop training
        log.warning("echo_trace: could not read the training configuration (%s)", e)
        return True
    if collectives:
        training["collectives"] = comm_summary(cap.rank_dir)
    return annotate_meta(cap.rank_dir, training)
