"""Chakra execution traces (ASTRA-sim's input) of a workload graph, without the chakra package.

Schema: MLCommons Chakra ``schema/protobuf/et_def.proto`` (package ``ChakraProtoMsg``). A
``.et`` file is a sequence of length-prefixed protobuf messages (a varint byte count, then
the message): first a ``GlobalMetadata``, then one ``Node`` per operator, in an order that
respects dependencies. One file per rank: ``<prefix>.<rank>.et`` (what ASTRA-sim's
``--workload-configuration=<dir>/<prefix>`` expects). The protobuf wire format is written
here directly (varints, length-delimited fields; proto3 packs repeated integers), so no
protobuf runtime is needed; ``<prefix>.<rank>.json`` holds the same nodes as JSON (the form
chakra's jsonizer prints) for reading by eye.

Fields used (numbers from et_def.proto): ``Node`` id=1, name=2, type=3, ctrl_deps=4,
data_deps=5, start_time_micros=6, duration_micros=7, attr=10; ``AttributeProto`` name=1,
int64_val=9, uint64_val=13, bool_val=27, string_val=29; ``GlobalMetadata`` version=1,
attr=2. Node attributes ASTRA-sim's feeder reads: ``is_cpu_op``, ``num_ops`` (FLOPs),
``tensor_size`` (bytes), ``comm_type`` (``CollectiveCommType``), ``comm_size`` (bytes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["COLLECTIVE_TYPES", "NODE_TYPES", "SCHEMA_VERSION", "ChakraNode", "encode_node",
           "encode_varint", "length_prefixed", "write_chakra"]

SCHEMA_VERSION = "0.0.4"
NODE_TYPES = {"COMP_NODE": 4, "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7,
              "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3}
COLLECTIVE_TYPES = {"all_reduce": 0, "reduce": 1, "all_gather": 2, "gather": 3, "scatter": 4,
                    "broadcast": 5, "all_to_all": 6, "reduce_scatter": 7, "barrier": 9}

_VARINT, _I64, _LEN = 0, 1, 2


@dataclass
class ChakraNode:
    """One Chakra node; ``attrs`` values: bool, int (int64), ``("u", n)`` (uint64) or str."""

    id: int
    name: str
    type: str
    data_deps: list[int] = field(default_factory=list)
    ctrl_deps: list[int] = field(default_factory=list)
    duration_micros: int = 0
    start_time_micros: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        attrs = [{"name": k, **_attr_json(v)} for k, v in self.attrs.items()]
        return {"id": self.id, "name": self.name, "type": self.type,
                "dataDeps": self.data_deps, "ctrlDeps": self.ctrl_deps,
                "startTimeMicros": self.start_time_micros,
                "durationMicros": self.duration_micros, "attr": attrs}


def _attr_json(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolVal": v}
    if isinstance(v, tuple):
        return {"uint64Val": int(v[1])}
    if isinstance(v, int):
        return {"int64Val": v}
    return {"stringVal": str(v)}


def encode_varint(n: int) -> bytes:
    """Base-128 varint; negative ints as their 64-bit two's complement (protobuf int64)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field_no: int, wire: int) -> bytes:
    return encode_varint((field_no << 3) | wire)


def _len_field(field_no: int, payload: bytes) -> bytes:
    return _key(field_no, _LEN) + encode_varint(len(payload)) + payload


def _int_field(field_no: int, n: int) -> bytes:
    return _key(field_no, _VARINT) + encode_varint(n) if n else b""


def _packed(field_no: int, values: Iterable[int]) -> bytes:
    body = b"".join(encode_varint(v) for v in values)
    return _len_field(field_no, body) if body else b""


def _attr(name: str, v: Any) -> bytes:
    body = _len_field(1, name.encode())
    if isinstance(v, bool):
        body += _key(27, _VARINT) + encode_varint(int(v))
    elif isinstance(v, tuple):
        body += _key(13, _VARINT) + encode_varint(int(v[1]))
    elif isinstance(v, int):
        body += _key(9, _VARINT) + encode_varint(v)
    else:
        body += _len_field(29, str(v).encode())
    return body


def encode_node(node: ChakraNode) -> bytes:
    """The ``Node`` message bytes (no length prefix)."""
    out = _int_field(1, node.id) + _len_field(2, node.name.encode())
    out += _int_field(3, NODE_TYPES[node.type])
    out += _packed(4, node.ctrl_deps) + _packed(5, node.data_deps)
    out += _int_field(6, node.start_time_micros) + _int_field(7, node.duration_micros)
    for k, v in node.attrs.items():
        out += _len_field(10, _attr(k, v))
    return out


def _encode_metadata(attrs: dict[str, Any]) -> bytes:
    out = _len_field(1, SCHEMA_VERSION.encode())
    for k, v in attrs.items():
        out += _len_field(2, _attr(k, v))
    return out


def length_prefixed(msg: bytes) -> bytes:
    """How chakra's ``encodeMessage`` frames a message in a ``.et`` file."""
    return encode_varint(len(msg)) + msg


def write_chakra(out_dir: str | os.PathLike[str], nodes_by_rank: dict[int, list[ChakraNode]],
                 *, prefix: str = "et", metadata: dict[str, Any] | None = None,
                 ) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` (and ``.json``) per rank; returns the ``.et`` paths."""
    from echo_trace.writer import write_atomic

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    meta = dict(metadata or {})
    paths: list[Path] = []
    for rank, nodes in sorted(nodes_by_rank.items()):
        body = bytearray(length_prefixed(_encode_metadata(meta)))
        for node in nodes:
            body += length_prefixed(encode_node(node))
        path = d / f"{prefix}.{rank}.et"
        write_atomic(path, bytes(body))
        doc = {"globalMetadata": {"version": SCHEMA_VERSION,
                                  "attr": [{"name": k, **_attr_json(v)} for k, v in meta.items()]},
               "nodes": [n.to_json() for n in nodes]}
        write_atomic(d / f"{prefix}.{rank}.json", json.dumps(doc, indent=1).encode())
        paths.append(path)
    return paths
