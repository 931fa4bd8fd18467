"""What a prediction runs on, and at which micro-batch, and where each choice came from.

Honest defaults: with no cluster and no GPU asked for, the prediction is for the hardware
the trace was taken on (``meta.json`` ``device`` / ``device_name`` / ``backend``):

* a CPU trace (gloo) → the ``cpu-gloo`` cluster, one host holding every requested rank
  (``dp·tp·pp`` processes), op times as traced;
* a GPU trace → the DGX preset of that GPU (``h100`` → ``dgx-h100``, ...), op times as
  traced; a GPU with no preset → op times as traced, collectives on ``dgx-h100``'s fabric,
  with a warning.

Re-timing to another device happens only when a cluster or GPU is asked for, and the
description says so. The micro-batch is the one asked for, else the traced one
(``meta.json`` ``micro_batch`` / ``micro_batch_size`` and, when the tracer recorded it,
``micro_batch_source``), else 1 with a warning: every batch-dependent time then rests on
that assumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echo_sim.cost.compute_scaling import resolve_device

__all__ = ["BatchChoice", "HardwareChoice", "choose_batch", "choose_hardware", "traced_micro_batch"]

# the DGX preset of each GPU preset (echo_sim.cost.hardware.CLUSTERS)
_CLUSTER_OF_GPU = {"h100": "dgx-h100", "a100": "dgx-a100", "h200": "dgx-h200",
                   "v100": "dgx2-v100", "cpu": "cpu-gloo"}


@dataclass(frozen=True, kw_only=True)
class HardwareChoice:
    """``cluster``: preset name; ``target_gpu``: preset name op times are scaled to (None:
    as traced); ``one_host``: every rank on one host (CPU default); ``retimed``: op times
    move to another device; ``traced``: what the trace ran on; ``source``: why this one."""

    cluster: str
    target_gpu: str | None
    one_host: bool
    retimed: bool
    traced: str
    source: str
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "target_gpu": self.target_gpu,
                "retimed": self.retimed, "traced_on": self.traced, "source": self.source,
                "one_host": self.one_host}


def _traced(device: str, device_name: str, backend: str) -> str:
    name = " ".join(dict.fromkeys(x for x in (device, device_name) if x)) or "unknown device"
    return f"{name}, {backend}" if backend and backend != "None" else name


def choose_hardware(*, cluster: str | None, gpu: str | None, device: str, device_name: str,
                    backend: str = "") -> HardwareChoice:
    """The target hardware (see the module docstring). ``cluster`` / ``gpu``: what was asked
    for (None: derive from the trace's ``device`` / ``device_name`` / ``backend``)."""
    src = resolve_device(device, device_name)
    traced = _traced(device, device_name, backend)
    if cluster is None and gpu is None:
        if src is None:
            return HardwareChoice(
                cluster="dgx-h100", target_gpu=None, one_host=False, retimed=False,
                traced=traced, source=f"traced on {traced}: no preset for it; op times as "
                "traced, collectives on dgx-h100's fabric (pass --cluster)",
                warnings=(f"traced device {traced!r} has no preset: collectives are priced on "
                          "dgx-h100's network; pass --cluster/--gpu or --comm-profile",))
        name = _CLUSTER_OF_GPU[src.name]
        return HardwareChoice(cluster=name, target_gpu=None, one_host=src.name == "cpu",
                              retimed=False, traced=traced,
                              source=f"the traced hardware: {traced} -> {name} (meta.json)")
    from echo_sim.cost.hardware import get_cluster

    name = cluster or _CLUSTER_OF_GPU.get((gpu or "").strip().lower(), "dgx-h100")
    target = gpu or get_cluster(name).gpu.name
    retimed = src is None or src.name != target.strip().lower()
    asked = " and ".join(x for x in (f"--cluster {cluster}" if cluster else "",
                                     f"--gpu {gpu}" if gpu else "") if x)
    how = (f"re-timed from {traced} to {target}" if retimed
           else f"same device as traced ({traced})")
    return HardwareChoice(cluster=name, target_gpu=target, one_host=False, retimed=retimed,
                          traced=traced, source=f"{asked}: {how}")


@dataclass(frozen=True, kw_only=True)
class BatchChoice:
    """The micro-batch predicted for, the traced one it scales from, and their sources."""

    micro_batch: int
    traced: int | None
    source: str
    assumed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"micro_batch": self.micro_batch, "traced_micro_batch": self.traced,
                "source": self.source, "assumed": self.assumed}


_FRAMEWORKS = {"huggingface": "the HF Trainer", "lightning": "Lightning",
               "deepspeed": "DeepSpeed", "megatron": "Megatron-core"}


def traced_micro_batch(meta: dict[str, Any]) -> tuple[int | None, str]:
    """(micro-batch, where the tracer got it) from one rank's ``meta.json``: the one the user
    stated, else the framework's own figure (``training.micro_batch_size`` from an
    integration: "from the HF Trainer"), else what the tracer detected or assumed."""
    training = meta.get("training")
    if meta.get("micro_batch_source") != "user" and isinstance(training, dict):
        v = training.get("micro_batch_size")
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            fw = str(training.get("framework") or "the framework")
            return v, f"from {_FRAMEWORKS.get(fw, fw)} (meta.json training.micro_batch_size)"
    for key in ("micro_batch", "micro_batch_size"):
        v = meta.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            how = meta.get("micro_batch_source")
            return v, f"meta.json {key}" + (f" ({how})" if how else "")
    return None, ""


def choose_batch(asked: int | None, traced: int | None, traced_source: str) -> BatchChoice:
    """The micro-batch to predict for (see the module docstring)."""
    if traced is None:
        mb = asked or 1
        return BatchChoice(micro_batch=mb, traced=None, assumed=True, source=(
            f"--micro-batch {asked}; the trace records no micro-batch, so its op times are "
            "taken as micro-batch 1" if asked else
            "assumed 1: the trace records no micro-batch"))
    if asked is None:
        return BatchChoice(micro_batch=traced, traced=traced, assumed=False,
                           source=f"traced: {traced_source or 'meta.json'}")
    return BatchChoice(micro_batch=asked, traced=traced, assumed=False,
                       source=f"--micro-batch {asked} (traced {traced}, "
                              f"{traced_source or 'meta.json'})")
