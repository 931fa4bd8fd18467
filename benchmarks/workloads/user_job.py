"""A user's own training script, written the way a user writes one (not ``examples/``):
a ``torch.nn.TransformerEncoder`` language model, plain ``DistributedDataParallel`` (or
FSDP2's ``fully_shard`` per layer), the loss outside any module, traced with
``echo_trace.capture``. Nothing in echo was tuned on it.

Options a real job has: ``--fsdp``; ``--accum K`` micro-batches per optimizer step (DDP's
``no_sync`` on all but the last); ``--sleep-ms MS`` before each micro-batch (a data loader
the step waits for); ``--autocast`` (bf16 on CPU); ``--clip`` (gradient norm clipping).
``--straggle N`` gives rank 0 a module that does ``N`` extra 192 x 192 matrix products in
its forward (rank 0 only): a straggler, which every other rank waits for in its
collectives. Run under torchrun (gloo on CPU)::

    OMP_NUM_THREADS=1 torchrun --nproc_per_node 2 benchmarks/workloads/user_job.py \\
        --trace-dir out [--steps 17] [--straggle 120] [--fsdp] [--accum 2] ...

Used by ``benchmarks/self_reproduction.py`` (the ``user-*`` cases) and
``tests/test_self_reproduction.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--trace-dir", required=True, help="echo_trace output directory")
    ap.add_argument("--steps", type=int, default=17, help="optimizer steps (default 17)")
    ap.add_argument("--trace-start", type=int, default=2,
                    help="first traced step (default 2)")
    ap.add_argument("--trace-end", type=int, default=None,
                    help="first step not traced (default: steps - 1)")
    ap.add_argument("--layers", type=int, default=2, help="encoder layers (default 2)")
    ap.add_argument("--d-model", type=int, default=128, help="model width (default 128)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    ap.add_argument("--seq", type=int, default=64, help="tokens per sequence (default 64)")
    ap.add_argument("--straggle", type=int, default=0,
                    help="extra 192 x 192 matrix products in rank 0's forward (default 0)")
    ap.add_argument("--fsdp", action="store_true",
                    help="FSDP2: fully_shard each encoder layer and the model (default DDP)")
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches per optimizer step (default 1)")
    ap.add_argument("--sleep-ms", type=float, default=0.0,
                    help="host sleep before each micro-batch, a data loader (default 0)")
    ap.add_argument("--autocast", action="store_true", help="bf16 autocast on CPU")
    ap.add_argument("--clip", action="store_true", help="clip the gradients' norm to 1")
    a = ap.parse_args(argv)
    if a.accum < 1 or a.sleep_ms < 0 or a.straggle < 0:
        ap.error("--accum >= 1, --sleep-ms >= 0, --straggle >= 0")

    import contextlib
    import gc
    import time

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import echo_trace

    dist.init_process_group("gloo")
    rank = dist.get_rank()

    class Straggle(torch.nn.Module):
        """``reps`` extra matrix products (no parameters, nothing for backward)."""

        def __init__(self, reps: int) -> None:
            super().__init__()
            self.reps = reps
            self.register_buffer("w", torch.randn(192, 192) / 192**0.5, persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.w
            for _ in range(self.reps):
                y = torch.tanh(y @ self.w)
            return x + 0 * y.sum()

    vocab = 1000
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(a.d_model, nhead=4, dim_feedforward=4 * a.d_model,
                                             batch_first=True)
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, a.d_model),
        torch.nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False),
        Straggle(a.straggle if rank == 0 else 0),
        torch.nn.Linear(a.d_model, vocab))
    if a.fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in model[1].layers:
            fully_shard(block)
        job: torch.nn.Module = fully_shard(model)
    else:
        job = DDP(model, broadcast_buffers=False)
    opt = torch.optim.AdamW(job.parameters(), lr=1e-3)
    end = a.trace_end if a.trace_end is not None else a.steps - 1
    gen = torch.Generator().manual_seed(rank)
    with echo_trace.capture(out_dir=a.trace_dir, start_step=a.trace_start, end_step=end):
        for _ in range(a.steps):
            for k in range(a.accum):
                if a.sleep_ms:
                    time.sleep(a.sleep_ms / 1e3)
                x = torch.randint(0, vocab, (a.batch, a.seq), generator=gen)
                last = k == a.accum - 1
                sync = (contextlib.nullcontext() if last or a.fsdp
                        else job.no_sync())  # type: ignore[operator]
                with sync, torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
                    logits = job(x)
                    loss = torch.nn.functional.cross_entropy(
                        logits.float().reshape(-1, vocab), x.reshape(-1)) / a.accum
                loss.backward()
            if a.clip:
                torch.nn.utils.clip_grad_norm_(job.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
    # shut down in order, as a careful script does: a straggler's peer that tore gloo down
    # first aborted the straggler at exit ("terminate called without an active exception")
    # in about 1 run in 20, after every file was written; the DDP reducer and FSDP state
    # hold process-group work, so they go before the group
    dist.barrier()
    del job, opt
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
