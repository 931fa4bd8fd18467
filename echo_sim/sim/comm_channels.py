"""Communication channels of the replay: which ``Comm`` events wait for each other.

A channel is in-order: an operation on it starts no earlier than the previous one on it
completed (an NCCL communicator, a gloo context, a BytePS queue). Two ways to cut a rank's
communication into channels (:data:`COMM_QUEUES`):

* ``"group"`` (echo's default): one channel per (rank, process group) for collectives, one
  for a rank's sends and one for its receives. Collectives of different groups overlap;
  those of one group queue behind each other, as on one communicator.
* ``"op"`` (dPRO's ``--del_queue``: "include each partition and QueueType for communication
  traces"): one channel per (rank, channel kind, process group, operation name), so every
  communicated tensor or partition (``Comm.bucket0``, ``Comm.grad_fc``) and each collective
  type is its own queue. Operations of different names never wait for each other; a
  measured queueing wait then counts as transfer time (replayed transfer = completion −
  last member's issue).
"""

from __future__ import annotations

import numpy as np

from echo_sim.errors import ConfigError
from echo_sim.trace.model import COLLECTIVES, Trace

__all__ = ["COMM_QUEUES", "channel_keys", "channel_kinds", "channel_name"]

COMM_QUEUES: tuple[str, ...] = ("group", "op")
"""Valid ``comm_queues`` values (see the module doc)."""

_SEND, _RECV = COLLECTIVES.index("send"), COLLECTIVES.index("recv")
_KIND_NAMES = ("comm", "send", "recv")


def channel_kinds(trace: Trace, comm: np.ndarray) -> np.ndarray:
    """Channel kind of each Comm row on its rank: 0 collectives, 1 sends, 2 receives."""
    coll = trace.events.coll[comm]
    return np.where(coll == _SEND, 1, np.where(coll == _RECV, 2, 0))


def channel_keys(trace: Trace, comm: np.ndarray, comm_queues: str = "group") -> np.ndarray:
    """An int64 per Comm row naming its in-order channel (equal keys: one channel).

    ``"group"``: (rank, process group) for a collective of a known group, else (rank,
    send / recv / collective). ``"op"``: that key and the operation's name id.
    """
    if comm_queues not in COMM_QUEUES:
        raise ConfigError(f"comm_queues {comm_queues!r}: choose one of {', '.join(COMM_QUEUES)}")
    ev = trace.events
    rank = ev.rank[comm].astype(np.int64)
    kind = channel_kinds(trace, comm)
    grp = ev.group[comm].astype(np.int64)
    per_rank = 3 + max(len(trace.groups), 1)
    key = rank * per_rank + np.where((kind == 0) & (grp >= 0), 3 + grp, kind)
    if comm_queues == "op":
        key = key * (len(trace.names) + 1) + ev.name[comm].astype(np.int64)
    return key


def channel_name(trace: Trace, row: int, comm_queues: str = "group") -> str:
    """Resource name of the channel of Comm row ``row``: ``rank0/comm.g0``, ``rank0/send``;
    with ``"op"`` the operation's name follows (``rank0/comm.g0/Comm.bucket0``)."""
    ev = trace.events
    r, grp = int(ev.rank[row]), int(ev.group[row])
    kind = int(channel_kinds(trace, np.asarray([row]))[0])
    base = f"rank{r}/comm.g{grp}" if kind == 0 and grp >= 0 else f"rank{r}/{_KIND_NAMES[kind]}"
    return f"{base}/{trace.name_of(row)}" if comm_queues == "op" else base
