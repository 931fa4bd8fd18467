"""The Lightning callback with the real Lightning Trainer on CPU, gradient accumulation on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="module")
def pl() -> Any:
    """Lightning, imported when a test of this module runs, not at collection: its import
    costs about 10 s of CPU, which every pytest worker would pay."""
    return pytest.importorskip("pytorch_lightning", reason="lightning is not installed "
                               "(pip install 'echo-sim[lightning]')")


def test_lightning_callback_records_steps_and_batches(tmp_path: Path, pl: Any) -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from echo_sim.load import load_trace
    from echo_sim.trace.validate import validate
    from integrations.lightning import EchoTraceCallback

    class Regressor(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                           torch.nn.Linear(16, 1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    cb = EchoTraceCallback(out_dir=tmp_path / "trace", start_step=1, end_step=4)
    trainer = pl.Trainer(max_steps=5, accumulate_grad_batches=2, accelerator="cpu",
                         devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[cb])
    trainer.fit(Regressor(), DataLoader(ds, batch_size=4))

    trace = load_trace(tmp_path / "trace")
    assert [v for v in validate(trace) if v.fatal] == []
    assert trace.steps == [1, 2, 3]
    meta = json.loads((tmp_path / "trace" / "0_0" / "meta.json").read_text())
    assert meta["training"] == {"framework": "lightning", "micro_batch_size": 4,
                                "gradient_accumulation_steps": 2, "data_parallel_size": 1,
                                "global_batch_size": 8}
    ev = trace.events
    fc = trace.names.index("FW.net.0")
    for step in trace.steps:  # two micro-batches per optimizer step
        assert int(((ev.name == fc) & (ev.step == step)).sum()) == 2
    # Lightning runs the forward and backward inside optimizer.step(closure): the UPDATE slice
    # starts when the closure returns and holds the optimizer only (it used to wrap the
    # second micro-batch: 55.9 % of the step)
    from echo_sim.trace.model import Cat

    for step in trace.steps:
        in_step = ev.step == step
        upd = in_step & (ev.cat == int(Cat.UPDATE))
        fwbw = in_step & np.isin(ev.cat, [int(Cat.FW), int(Cat.BW)])
        assert int(upd.sum()) == 1
        assert float(ev.ts_us[upd][0]) >= float((ev.ts_us[fwbw] + ev.dur_us[fwbw]).max()) - 1e-3
    from echo_sim.sim.simulate import SimConfig, simulate

    own = simulate(trace, SimConfig())
    assert (own.micro_batch, own.global_batch, own.micro_batches) == (4, 8, 2)
    assert any("from Lightning" in m for m in own.models)
