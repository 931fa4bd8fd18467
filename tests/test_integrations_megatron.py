"""The Megatron-core integration with real megatron-core on CPU: tensor parallel 2 over gloo.

megatron-core's GPTModel and pipeline schedules allocate on CUDA, so on a CPU host this test
drives what does run there: ``parallel_state``, the micro-batch calculator and the
tensor-parallel layers (``ColumnParallelLinear`` -> ``RowParallelLinear``), with a plain
micro-batch loop. Run under torchrun as ``python -m tests.test_integrations_megatron DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.harness import run_python, run_torchrun

pytest.importorskip("megatron.core", reason="megatron-core is not installed "
                    "(pip install --no-deps megatron-core)")
# after megatron.core: importing torch first trips setuptools' distutils shim in megatron
from tests.marks import without_cuda  # noqa: E402


def _worker(out: str) -> None:
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    from megatron.core.num_microbatches_calculator import (
        get_micro_batch_size,
        get_num_microbatches,
        init_num_microbatches_calculator,
    )
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.transformer_config import TransformerConfig

    from integrations.megatron import megatron_trace

    dist.init_process_group("gloo")
    ps.initialize_model_parallel(tensor_model_parallel_size=2)
    init_num_microbatches_calculator(dist.get_rank(), None, 8, 2,
                                     ps.get_data_parallel_world_size())
    torch.manual_seed(0)
    cfg = TransformerConfig(num_layers=1, hidden_size=32, num_attention_heads=2,
                            use_cpu_initialization=True, tensor_model_parallel_size=2)

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            init = torch.nn.init.xavier_normal_
            self.fc1 = ColumnParallelLinear(32, 128, config=cfg, init_method=init,
                                            gather_output=False)
            self.fc2 = RowParallelLinear(128, 32, config=cfg, init_method=init, bias=True,
                                         input_is_parallel=True, skip_bias_add=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h, _ = self.fc1(x)
            out, _ = self.fc2(torch.nn.functional.gelu(h))
            return out

    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with megatron_trace(out_dir=out, model=model, start_step=1, end_step=3) as tr:
        for _ in range(4):
            for _ in range(get_num_microbatches()):
                x = torch.randn(16, get_micro_batch_size(), 32)  # [seq, batch, hidden]
                (model(x).pow(2).mean() / get_num_microbatches()).backward()
            opt.step()
            opt.zero_grad()
            tr.step()


@pytest.mark.slow
def test_megatron_tensor_parallel_two_ranks(tmp_path: Path) -> None:
    from echo_sim.load import load_trace
    from echo_sim.trace.validate import validate

    res = run_torchrun(["-m", "tests.test_integrations_megatron", str(tmp_path)], nproc=2,
                       timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    trace = load_trace(tmp_path)
    assert [v for v in validate(trace) if v.fatal] == []
    assert sorted(trace.ranks) == [0, 1] and trace.steps == [1, 2]
    meta = json.loads((tmp_path / "0_1" / "meta.json").read_text())
    t = meta["training"]
    assert (t["framework"], t["micro_batch_size"], t["gradient_accumulation_steps"],
            t["data_parallel_size"], t["global_batch_size"], t["tensor_parallel_size"],
            t["pipeline_parallel_size"]) == ("megatron", 2, 4, 1, 8, 2, 1)
    assert t["collectives"]["all_reduce"]["count"] > 0  # RowParallelLinear's all-reduce
    ev = trace.events
    fc1 = trace.names.index("FW.fc1")
    for step in trace.steps:  # four micro-batches per iteration
        assert int(((ev.name == fc1) & (ev.step == step) & (ev.rank == 0)).sum()) == 4


@without_cuda
def test_profile_megatron_without_cuda_says_why(tmp_path: Path) -> None:
    res = run_python(["-m", "echo_trace.profile", "--framework", "megatron", "--model", "gpt",
                      "--tiny", "--path", str(tmp_path)])
    assert res.returncode == 2
    assert "--framework megatron needs CUDA" in res.stderr


if __name__ == "__main__":
    _worker(sys.argv[1])
