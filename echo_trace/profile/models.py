"""Models for ``python -m echo_trace.profile``: a user's ``module:callable`` or a transformers config.

``--model-source local --model pkg.mod:make`` calls ``make(batch_size=B, seq_len=S)``; it
returns ``(model, make_batch)`` or ``(model, make_batch, loss_fn)``. ``make_batch()`` gives
one micro-batch: a tensor, a tuple of positional inputs or a dict of keyword inputs.
``loss_fn(output)`` gives the scalar to backpropagate; without it the output's ``loss``
(transformers models given ``labels``) or the mean of the output is used.

``--model-source huggingface --model NAME`` builds ``AutoModelForCausalLM.from_config`` (an
encoder-decoder family such as t5: ``AutoModelForSeq2SeqLM``, fed ``labels``; an
encoder-only one without a causal head: ``AutoModel``) with random weights and never
downloads. NAME is a transformers model type (``gpt2``, ``llama``, ``bert``, ``t5``...) or a
local directory holding ``config.json``. ``tiny=True`` shrinks the config (2 layers, hidden
64, 2 heads) for CI; ``overrides`` set any config attribute. The model's tensor-parallel
plan (transformers' ``model.tp_plan``), when its family has one, goes into meta.json's
``model.tp_plan``, which echo_sim's simulate and search then use.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TINY_OVERRIDES", "ModelBundle", "ProfileError", "build_model", "call_model",
           "hf_config", "loss_of", "parse_overrides", "to_device"]

#: Config attributes ``--tiny`` sets (transformers' ``attribute_map`` maps them onto each
#: family's own names, e.g. gpt2's ``n_layer``/``n_embd``/``n_head``).
TINY_OVERRIDES: dict[str, Any] = {"num_hidden_layers": 2, "hidden_size": 64,
                                  "num_attention_heads": 2, "intermediate_size": 256,
                                  "num_key_value_heads": 2, "vocab_size": 1024,
                                  "num_decoder_layers": 2, "d_ff": 256,
                                  "image_size": 64}  # a ViT's 16x16 patches: 16 tokens


class ProfileError(ValueError):
    """Bad input to the profiler: the message names the option and the valid choices."""


@dataclass
class ModelBundle:
    """A model ready to train and how to feed it (``info`` goes into meta.json's ``model``)."""

    model: Any
    make_batch: Callable[[], Any]
    loss_fn: Callable[[Any], Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)


def parse_overrides(text: str | None) -> dict[str, Any]:
    """``"n_layer=2,n_embd=64,use_cache=false"`` -> {"n_layer": 2, ...} (ints, floats, bools)."""
    out: dict[str, Any] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ProfileError(f"--config-overrides {item!r}: expected KEY=VALUE[,KEY=VALUE...]")
        out[key.strip()] = _parse_value(raw.strip())
    return out


def _parse_value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


def hf_config(name: str, *, tiny: bool = False, overrides: Mapping[str, Any] | None = None,
              seq_len: int | None = None) -> Any:
    """A transformers config for a model type or a local directory (never a download)."""
    try:
        from transformers import AutoConfig
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        raise ProfileError("--model-source huggingface needs transformers "
                           "(pip install 'echo-sim[huggingface]')") from None
    if os.path.isdir(name):
        cfg = AutoConfig.from_pretrained(name, local_files_only=True)
    elif name in CONFIG_MAPPING:
        cfg = AutoConfig.for_model(name)
    else:
        raise ProfileError(f"--model {name!r}: not a transformers model type nor a local "
                           f"directory with config.json (e.g. gpt2, llama, bert, mistral); "
                           f"weights are never downloaded")
    changes: dict[str, Any] = dict(TINY_OVERRIDES) if tiny else {}
    if tiny:  # keep only what this family has (attribute_map included)
        changes = {k: v for k, v in changes.items()
                   if hasattr(cfg, k) or k in getattr(cfg, "attribute_map", {})}
    changes.update(overrides or {})
    for key, value in changes.items():
        if not (hasattr(cfg, key) or key in getattr(cfg, "attribute_map", {})):
            raise ProfileError(f"--config-overrides {key}={value!r}: {type(cfg).__name__} has "
                               f"no attribute {key!r}")
        setattr(cfg, key, value)
    if seq_len is not None:
        for key in ("max_position_embeddings", "n_positions", "n_ctx"):
            if hasattr(cfg, key) and isinstance(getattr(cfg, key), int) \
                    and getattr(cfg, key) < seq_len:
                setattr(cfg, key, seq_len)
    return cfg


def _hf_bundle(name: str, batch_size: int, seq_len: int, *, tiny: bool,
               overrides: Mapping[str, Any] | None) -> ModelBundle:
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    cfg = hf_config(name, tiny=tiny, overrides=overrides, seq_len=seq_len)
    causal = True
    try:
        model = AutoModelForCausalLM.from_config(cfg)
    except ValueError:
        if getattr(cfg, "is_encoder_decoder", False):  # t5, bart...: labels give the decoder
            from transformers import AutoModelForSeq2SeqLM

            if getattr(cfg, "decoder_start_token_id", None) is None:  # shifts labels right
                cfg.decoder_start_token_id = getattr(cfg, "pad_token_id", None) or 0
            model = AutoModelForSeq2SeqLM.from_config(cfg)
        else:  # an encoder-only family: the bare model
            model = AutoModel.from_config(cfg)
            causal = False
    vocab = int(getattr(cfg, "vocab_size", 1000))
    gen = torch.Generator().manual_seed(0)
    # what the model's forward takes first: token ids, or images (ViT, DeiT, Swin...)
    vision = getattr(model, "main_input_name", "input_ids") == "pixel_values"
    side = int(getattr(cfg, "image_size", 224) or 224)
    channels = int(getattr(cfg, "num_channels", 3) or 3)

    def make_batch() -> dict[str, Any]:
        if vision:
            return {"pixel_values": torch.randn(batch_size, channels, side, side, generator=gen)}
        ids = torch.randint(0, vocab, (batch_size, seq_len), generator=gen)
        return {"input_ids": ids, "labels": ids} if causal else {"input_ids": ids}

    patch = getattr(cfg, "patch_size", None)
    # a vision model's tokens are its patches (and it has no vocabulary)
    tokens = seq_len if not vision else (
        (side // patch) ** 2 if isinstance(patch, int) and patch > 0 else None)
    info = {"name": name, "source": "huggingface", "family": getattr(cfg, "model_type", name),
            "layers": getattr(cfg, "num_hidden_layers", None),
            "hidden": getattr(cfg, "hidden_size", None),
            "heads": getattr(cfg, "num_attention_heads", None),
            "kv_heads": getattr(cfg, "num_key_value_heads", None), "seq": tokens,
            "vocab": None if vision else vocab, "image_size": side if vision else None,
            "micro_batch_size": batch_size,
            "params": sum(p.numel() for p in model.parameters())}
    info.update(_tp_plan_info(model, cfg))
    info = {k: v for k, v in info.items() if v is not None}
    return ModelBundle(model=model, make_batch=make_batch, info=info)


def _tp_plan_info(model: Any, cfg: Any) -> dict[str, Any]:
    """The tensor-parallel plan transformers keeps for this model (``model.tp_plan``: the
    config's ``base_model_tp_plan`` under the base model's prefix plus the head's), as
    meta.json's ``model.tp_plan``; {} for families without one (gpt2, bert, t5...)."""
    plan = getattr(model, "tp_plan", None)
    source = f"transformers {type(model).__name__}.tp_plan"
    if not isinstance(plan, Mapping) or not plan:
        plan = getattr(cfg, "base_model_tp_plan", None)
        source = f"transformers {type(cfg).__name__}.base_model_tp_plan"
    if not isinstance(plan, Mapping) or not plan:
        return {}
    return {"tp_plan": {str(k): str(v) for k, v in plan.items()}, "tp_plan_source": source}


def _local_bundle(spec: str, batch_size: int, seq_len: int) -> ModelBundle:
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise ProfileError(f"--model {spec!r}: with --model-source local, expected "
                           f"MODULE:CALLABLE (e.g. mypkg.models:make_model)")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ProfileError(f"--model {spec!r}: cannot import {mod_name!r} ({e})") from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ProfileError(f"--model {spec!r}: {mod_name} has no callable {attr!r}")
    got = fn(batch_size=batch_size, seq_len=seq_len)
    if not isinstance(got, tuple) or len(got) not in (2, 3) or not callable(got[1]):
        raise ProfileError(f"--model {spec!r}: {attr}() must return (model, make_batch) or "
                           f"(model, make_batch, loss_fn); got {type(got).__name__}")
    model, make_batch = got[0], got[1]
    loss_fn = got[2] if len(got) == 3 else None
    # no "seq": a local model may ignore seq_len (a CNN), and echo_sim reads model.seq as tokens
    info = {"name": spec, "source": "local", "micro_batch_size": batch_size,
            "params": sum(p.numel() for p in model.parameters())}
    return ModelBundle(model=model, make_batch=make_batch, loss_fn=loss_fn, info=info)


def build_model(name: str, source: str, *, batch_size: int, seq_len: int, tiny: bool = False,
                overrides: Mapping[str, Any] | None = None) -> ModelBundle:
    """The model and its batch maker for ``--model NAME --model-source SOURCE``."""
    if source == "huggingface":
        return _hf_bundle(name, batch_size, seq_len, tiny=tiny, overrides=overrides)
    if source == "local":
        return _local_bundle(name, batch_size, seq_len)
    raise ProfileError(f"--model-source {source!r}: expected local or huggingface")


def call_model(model: Any, batch: Any) -> Any:
    """``model(**batch)`` for a dict, ``model(*batch)`` for a tuple/list, else ``model(batch)``."""
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def loss_of(output: Any, loss_fn: Callable[[Any], Any] | None = None) -> Any:
    """The scalar to backpropagate: ``loss_fn(output)``, else ``output.loss``, else a mean."""
    if loss_fn is not None:
        return loss_fn(output)
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    if loss is not None:
        return loss
    if isinstance(output, Mapping):
        output = next(iter(output.values()))
    if isinstance(output, (tuple, list)):
        output = output[0]
    return output.float().mean()


def to_device(batch: Any, device: Any) -> Any:
    """``batch`` with every tensor moved to ``device`` (dicts, tuples and lists walked)."""
    if hasattr(batch, "to") and callable(batch.to):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
