"""Small example models and synthetic data for echo's demos, tests and benchmarks.

* :class:`GPT` — a GPT-style decoder with Megatron-like child names
  (``blocks.<i>.attn.qkv``, ``blocks.<i>.attn.proj``, ``blocks.<i>.mlp.fc1``,
  ``blocks.<i>.mlp.fc2``) so tensor-parallel plans and pipeline splits can name them.
  ``blocks`` is an ``nn.ModuleDict`` keyed ``"0"``, ``"1"``, ... so a pipeline stage that
  keeps only some blocks still names them by their global index.
* :class:`SmallCNN` — conv / batch-norm / in-place ReLU / pooling / linear.
* :func:`token_batch`, :func:`image_batch` — deterministic synthetic batches with a
  learnable structure (so the loss falls within a few steps).

Default sizes make one training step take a few tens of milliseconds on one CPU thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "GPT",
    "MLP",
    "Block",
    "CNNConfig",
    "CausalSelfAttention",
    "GPTConfig",
    "SmallCNN",
    "image_batch",
    "make_gpt",
    "stage_bounds",
    "token_batch",
]


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """Shape of :class:`GPT`. ``hidden`` must divide by ``heads``."""

    vocab_size: int = 256
    seq_len: int = 64
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    mlp_ratio: int = 4

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "hidden", "layers", "heads", "mlp_ratio"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig.{name}={getattr(self, name)} must be >= 1")
        if self.hidden % self.heads:
            raise ValueError(f"GPTConfig.hidden={self.hidden} must divide by heads={self.heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True, kw_only=True)
class CNNConfig:
    """Shape of :class:`SmallCNN`: square ``image_size`` RGB-like images, ``num_classes`` labels."""

    in_channels: int = 3
    image_size: int = 32
    width: int = 32
    num_classes: int = 10

    def __post_init__(self) -> None:
        for name in ("in_channels", "image_size", "width", "num_classes"):
            if getattr(self, name) < 1:
                raise ValueError(f"CNNConfig.{name}={getattr(self, name)} must be >= 1")
        if self.image_size % 4:
            raise ValueError(f"CNNConfig.image_size={self.image_size} must divide by 4 "
                             "(two 2x2 poolings)")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused ``qkv`` projection.

    ``qkv`` output features are laid out ``[head, (q|k|v), head_dim]`` (Megatron's layout), so
    a column-wise shard of ``qkv`` holds whole heads with their q, k and v; the number of
    heads on this rank is read from the output width, which makes the same code run both
    unsharded and under a tensor-parallel plan (``qkv`` colwise, ``proj`` rowwise).
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        # selective recomputation (Korthikanti et al. 2022, §4.2): the attention core's
        # scores and probabilities are dropped after forward and rebuilt in backward
        self.recompute_core = False

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(mask(q·kᵀ / sqrt(d))) · v over ``(b, heads, t, head_dim)`` tensors."""
        t = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return scores.softmax(dim=-1) @ v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        qkv = self.qkv(x)
        local_heads = qkv.shape[-1] // (3 * self.head_dim)
        qkv = qkv.view(b, t, local_heads, 3, self.head_dim).permute(3, 0, 2, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each (b, heads, t, head_dim)
        if self.recompute_core:
            from torch.utils.checkpoint import checkpoint

            y = checkpoint(self.core, q, k, v, use_reentrant=False)
        else:
            y = self.core(q, k, v)  # (b, heads, t, head_dim)
        y = y.transpose(1, 2).reshape(b, t, local_heads * self.head_dim)
        return self.proj(y)


class MLP(nn.Module):
    """``fc1`` (hidden → ratio·hidden), GELU, ``fc2`` (back to hidden)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden, cfg.mlp_ratio * cfg.hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(cfg.mlp_ratio * cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """GPT-style decoder: ``tok_emb`` + ``pos_emb`` → ``blocks`` → ``ln_f`` → ``head``.

    Input: token ids ``(batch, seq)`` (``int64``); output: logits ``(batch, seq, vocab)``.
    A pipeline stage is the same class with some children set to ``None`` (see
    :meth:`keep_stage`): a stage without ``tok_emb`` takes hidden states
    ``(batch, seq, hidden)`` instead of token ids, and one without ``head`` returns them.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb: nn.Embedding | None = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.pos_emb: nn.Embedding | None = nn.Embedding(cfg.seq_len, cfg.hidden)
        self.blocks = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.layers)})
        self.ln_f: nn.LayerNorm | None = nn.LayerNorm(cfg.hidden)
        self.head: nn.Linear | None = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        self.apply(_init_weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tok_emb is not None and self.pos_emb is not None:
            pos = torch.arange(x.shape[1], device=x.device)
            x = self.tok_emb(x) + self.pos_emb(pos)
        for block in self.blocks.values():
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        if self.head is not None:
            x = self.head(x)
        return x

    def keep_stage(self, stage: int, num_stages: int) -> GPT:
        """Drop everything but pipeline stage ``stage`` of ``num_stages`` (in place; returns self).

        Blocks are split into contiguous runs as evenly as possible; stage 0 keeps the
        embeddings, the last stage keeps ``ln_f`` and ``head``.
        """
        if not 0 <= stage < num_stages or num_stages > self.cfg.layers:
            raise ValueError(f"stage {stage} of {num_stages} is invalid for "
                             f"{self.cfg.layers} layers (need 0 <= stage < stages <= layers)")
        lo, hi = stage_bounds(self.cfg.layers, stage, num_stages)
        for key in list(self.blocks.keys()):
            if not lo <= int(key) < hi:
                del self.blocks[key]
        if stage != 0:
            self.tok_emb = None
            self.pos_emb = None
        if stage != num_stages - 1:
            self.ln_f = None
            self.head = None
        return self


def stage_bounds(layers: int, stage: int, num_stages: int) -> tuple[int, int]:
    """Block range ``[lo, hi)`` of ``stage``: the first ``layers % num_stages`` stages get one more."""
    base, extra = divmod(layers, num_stages)
    lo = stage * base + min(stage, extra)
    return lo, lo + base + (1 if stage < extra else 0)


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Embedding):
        nn.init.normal_(m.weight, std=0.02)


class SmallCNN(nn.Module):
    """Two conv blocks (conv 3x3 → batch-norm → in-place ReLU → 2x2 max-pool), then ``fc``."""

    def __init__(self, cfg: CNNConfig) -> None:
        super().__init__()
        self.cfg = cfg
        w = cfg.width
        self.conv1 = nn.Conv2d(cfg.in_channels, w, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu1 = nn.ReLU(inplace=True)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(w, 2 * w, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * w)
        self.relu2 = nn.ReLU(inplace=True)
        self.pool2 = nn.AdaptiveAvgPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(2 * w * 4, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
        return self.fc(self.flatten(x))


def make_gpt(batch_size: int, seq_len: int = 64) -> tuple[
        GPT, Callable[[], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]:
    """The ``module:callable`` form ``python -m echo_trace.profile --model-source local`` calls
    (``--model examples.models:make_gpt``): the default :class:`GPT` at ``seq_len``, a maker
    of one micro-batch of token ids, and the language-model loss of its logits."""
    cfg = GPTConfig(seq_len=seq_len)
    state = {"step": 0}
    targets: dict[str, torch.Tensor] = {}

    def make_batch() -> torch.Tensor:
        x, y = token_batch(cfg, batch_size, seed=0, step=state["step"])
        state["step"] += 1
        targets["y"] = y
        return x

    def loss_fn(logits: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.flatten(0, 1),
                                           targets["y"].to(logits.device).flatten())

    return GPT(cfg), make_batch, loss_fn


def _generator(*keys: int) -> torch.Generator:
    """A CPU generator seeded from integer keys (seed, step, rank, ...): same keys, same data."""
    seed = 0
    for k in keys:
        seed = (seed * 1_000_003 + k + 1) % (2**63 - 1)
    return torch.Generator().manual_seed(seed)


def token_batch(cfg: GPTConfig, batch: int, *, seed: int, step: int, index: int = 0,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic language-model batch ``(inputs, targets)``, both ``(batch, seq_len)`` int64.

    Tokens follow a fixed random successor table (chosen by ``seed`` only) 90% of the time
    and are uniform otherwise, so a model can learn them; the batch itself depends on
    (``seed``, ``step``, ``index``), where ``index`` numbers the micro-batches of one global
    batch. ``targets`` are ``inputs`` shifted by one.
    """
    succ = torch.randperm(cfg.vocab_size, generator=_generator(seed))
    g = _generator(seed, step, index)
    n = cfg.seq_len + 1
    seq = torch.empty(batch, n, dtype=torch.long)
    seq[:, 0] = torch.randint(cfg.vocab_size, (batch,), generator=g)
    noise = torch.randint(cfg.vocab_size, (batch, n), generator=g)
    jump = torch.rand(batch, n, generator=g) < 0.1
    for t in range(1, n):
        seq[:, t] = torch.where(jump[:, t], noise[:, t], succ[seq[:, t - 1]])
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def image_batch(cfg: CNNConfig, batch: int, *, seed: int, step: int, index: int = 0,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic classification batch: images ``(batch, C, H, W)`` float32, labels ``(batch,)``.

    Each class has a fixed, blocky random template (4x4 random cells scaled up to the image
    size, chosen by ``seed``); an image is its class's template plus unit Gaussian noise,
    so the classes are learnable in a few steps. Keys as in :func:`token_batch`.
    """
    coarse = torch.randn(cfg.num_classes, cfg.in_channels, 4, 4, generator=_generator(seed))
    templates = F.interpolate(coarse, size=(cfg.image_size, cfg.image_size), mode="nearest")
    g = _generator(seed, step, index)
    labels = torch.randint(cfg.num_classes, (batch,), generator=g)
    noise = torch.randn((batch, *templates.shape[1:]), generator=g)
    return templates[labels] + noise, labels
