"""Published at-scale training measurements, one row per run, each with its source.

Every figure below was read from the cited table (transcriptions checked against a second
copy where one was found); rows whose figures could not be checked were left out. Units:
``tflops_per_gpu`` is the paper's "achieved teraFLOP/s per GPU", computed by the papers
with Narayanan et al. 2021 eq. (3), which counts the full-recomputation forward:
``F = 96·B·s·l·h²·(1 + s/6h + V/16lh)`` per iteration; ``iteration_s`` is a measured
iteration time in seconds.

Layout fields the sources do not state are filled by one documented rule for all rows
(never tuned per row): micro-batch 1 where unstated (Narayanan et al. 2021 §5.1 use small
micro-batches with pipelining); the non-interleaved 1F1B schedule where the source names
no interleaving; full activation recomputation for the Megatron-LM 2021 runs (§5.1: "we
use activation recomputation" for all these runs; eq. (3) counts it).

Software facts of the time, applied to every row of that software (not tuned): all rows
predate FlashAttention (attention with materialised scores, ``unfused``); Megatron-LM and
Megatron-DeepSpeed all-reduce the gradient buffer once after the last micro-batch's
backward (``data_parallel="post"``); the ZeRO-3 baseline of Table 2 is DeepSpeed's ZeRO-3 of
2021 (``fsdp_impl="deepspeed-2021"``, :mod:`echo_sim.cost.zero3`); the optimizer is a
one-pass fused Adam (Megatron-LM's ``megatron/optimizer``: ``from apex.optimizers import
FusedAdam as Adam``; DeepSpeed's ``FusedAdam``), ``optimizer="fused"``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ROWS", "Row"]

_MEGATRON = ("Narayanan et al. 2021, \"Efficient Large-Scale Language Model Training on GPU "
             "Clusters Using Megatron-LM\" (SC21, arXiv:2104.04473)")
_KORTHI = ("Korthikanti et al. 2022, \"Reducing Activation Recomputation in Large Transformer "
           "Models\" (MLSys 2023, arXiv:2205.05198)")
_BLOOM = ("BigScience 2022, BLOOM-176B model page (bigscience.notion.site) and Le Scao et al. "
          "2022 \"BLOOM\" arXiv:2211.05100 §3.4; HF blog \"The Technology Behind BLOOM "
          "Training\" (TP 4 x PP 12)")


@dataclass(frozen=True, kw_only=True)
class Row:
    """One published run. ``zero3``: ZeRO-3 / fully sharded data parallel, no model parallel."""

    id: str
    source: str
    where: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    gpus: int
    tp: int
    pp: int
    global_batch: int
    micro_batch: int = 1
    virtual_stages: int = 1
    recompute: str = "full"  # none | selective | full
    zero3: bool = False
    cluster: str = "dgx-a100"
    tflops_per_gpu: float | None = None
    iteration_s: float | None = None
    attention: str = "unfused"  # every row predates FlashAttention (Dao et al., May 2022)
    optimizer: str = "fused"  # Megatron-LM / Megatron-DeepSpeed: apex FusedAdam, one pass

    @property
    def sequence_parallel(self) -> bool:
        """Korthikanti et al. run selective recomputation together with sequence parallelism."""
        return self.recompute == "selective" and self.tp > 1

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    def model_flops(self) -> float:
        """Narayanan et al. eq. (3): FLOPs of one iteration counting a recompute forward."""
        b, s, l_, h, v = self.global_batch, self.seq, self.layers, self.hidden, self.vocab
        return 96.0 * b * s * l_ * h * h * (1 + s / (6 * h) + v / (16 * l_ * h))

    def measured_iteration_s(self) -> float:
        if self.iteration_s is not None:
            return self.iteration_s
        assert self.tflops_per_gpu is not None  # every row sets one (checked in tests)
        return self.model_flops() / (self.gpus * self.tflops_per_gpu * 1e12)


def _t1(id_: str, heads: int, hidden: int, layers: int, tp: int, pp: int, gpus: int,
        batch: int, tflops: float) -> Row:
    return Row(id=f"megatron-t1-{id_}", source=_MEGATRON,
               where="Table 1 (weak scaling, 8 x A100-80GB DGX nodes, Selene)",
               layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200, gpus=gpus,
               tp=tp, pp=pp, global_batch=batch, tflops_per_gpu=tflops)


def _t2(id_: str, zero3: bool, layers: int, hidden: int, heads: int, mp: tuple[int, int],
        batch: int, gpus: int, mb: int, tflops: float) -> Row:
    return Row(id=f"megatron-t2-{id_}", source=_MEGATRON,
               where="Table 2 / Figure 10 (§5.2, ZeRO-3 without model parallelism vs PTD-P)",
               layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200, gpus=gpus,
               tp=mp[0], pp=mp[1], global_batch=batch, micro_batch=mb, zero3=zero3,
               tflops_per_gpu=tflops)


def _k(id_: str, layers: int, hidden: int, heads: int, pp: int, gpus: int, batch: int,
       mb: int, virtual: int, recompute: str, seconds: float) -> Row:
    return Row(id=f"korthikanti-{id_}-{recompute}", source=_KORTHI,
               where="Table 3 (configurations) and Table 5 (iteration time, s)",
               layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200, gpus=gpus,
               tp=8, pp=pp, global_batch=batch, micro_batch=mb, virtual_stages=virtual,
               recompute=recompute, iteration_s=seconds)


ROWS: tuple[Row, ...] = (
    # Narayanan et al. 2021, Table 1: all ten weak-scaling rows.
    _t1("1.7b", 24, 2304, 24, 1, 1, 32, 512, 137),
    _t1("3.6b", 32, 3072, 30, 2, 1, 64, 512, 138),
    _t1("7.5b", 32, 4096, 36, 4, 1, 128, 512, 142),
    _t1("18.4b", 48, 6144, 40, 8, 1, 256, 1024, 135),
    _t1("39.1b", 64, 8192, 48, 8, 2, 512, 1536, 138),
    _t1("76.1b", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    _t1("145.6b", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    _t1("310.1b", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    _t1("529.6b", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    _t1("1008b", 160, 25600, 128, 8, 64, 3072, 3072, 163),
    # Narayanan et al. 2021, Table 2: ZeRO-3 (DeepSpeed, no model parallelism) and PTD-P.
    # Model-parallel size 96 = TP 8 x PP 12 (175B), 280 = TP 8 x PP 35 (530B).
    _t2("zero3-175b-384", True, 96, 12288, 96, (1, 1), 1536, 384, 4, 144),
    _t2("zero3-175b-768", True, 96, 12288, 96, (1, 1), 1536, 768, 2, 88),
    _t2("zero3-175b-1536", True, 96, 12288, 96, (1, 1), 1536, 1536, 1, 44),
    _t2("zero3-530b-640", True, 105, 20480, 128, (1, 1), 2560, 640, 4, 138),
    _t2("zero3-530b-1120", True, 105, 20480, 128, (1, 1), 2240, 1120, 2, 98),
    _t2("zero3-530b-2240", True, 105, 20480, 128, (1, 1), 2240, 2240, 1, 48),
    _t2("ptdp-175b-384", False, 96, 12288, 96, (8, 12), 1536, 384, 1, 153),
    _t2("ptdp-175b-768", False, 96, 12288, 96, (8, 12), 1536, 768, 1, 149),
    _t2("ptdp-175b-1536", False, 96, 12288, 96, (8, 12), 1536, 1536, 1, 141),
    _t2("ptdp-530b-560", False, 105, 20480, 128, (8, 35), 2240, 560, 1, 171),
    _t2("ptdp-530b-1120", False, 105, 20480, 128, (8, 35), 2240, 1120, 1, 167),
    _t2("ptdp-530b-2240", False, 105, 20480, 128, (8, 35), 2240, 2240, 1, 159),
    # Korthikanti et al. 2022: data-parallel size 1; "full" = full recomputation with
    # tensor parallelism, "selective" = sequence parallelism + selective recomputation.
    _k("22b", 48, 6144, 64, 1, 8, 4, 4, 1, "full", 1.42),
    _k("22b", 48, 6144, 64, 1, 8, 4, 4, 1, "selective", 1.10),
    _k("175b", 96, 12288, 96, 8, 64, 64, 1, 3, "full", 18.13),
    _k("175b", 96, 12288, 96, 8, 64, 64, 1, 3, "selective", 13.75),
    _k("530b", 105, 20480, 128, 35, 280, 280, 1, 3, "full", 49.05),
    _k("530b", 105, 20480, 128, 35, 280, 280, 1, 3, "selective", 37.83),
    _k("1t", 128, 25600, 160, 64, 512, 512, 1, 1, "full", 94.42),
    _k("1t", 128, 25600, 160, 64, 512, 512, 1, 1, "selective", 71.49),
    # BLOOM-176B on Jean Zay: 384 A100-80GB, one replica = 48 GPUs (TP 4 x PP 12), DP 8,
    # global batch 2048 sequences of 2048, "training throughput: about 150 TFLOPs".
    Row(id="bloom-176b", source=_BLOOM, where="model page 'engineering side'; paper §3.4",
        layers=70, hidden=14336, heads=112, seq=2048, vocab=250880, gpus=384, tp=4, pp=12,
        global_batch=2048, micro_batch=2, cluster="jeanzay-a100", tflops_per_gpu=150),
)
"""Every published row (see the module docstring for sources and the unstated-field rule)."""
