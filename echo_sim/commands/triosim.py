"""TrioSim's command line, as its users type it, rewritten into echo's ``simulate``.

TrioSim (``go run main.go``, Go's ``flag`` package: one or two dashes, ``-f v`` or
``-f=v``) takes ``-trace-dir D -case C -GPUnumber N -batch-size B -batch-size-sim S
-micro-batch-size M -bandwidth R -ptp-bandwidth R -capacity K -numRows R -numCols C
-interconnects I``. A command line holding ``-trace-dir`` and no echo command becomes::

    simulate D <layout of -case over N GPUs> --traced-micro-batch B --micro-batch S ...

``-case``: 0 one GPU (training), 1 ``--dp N --data-parallel ps`` (gradients through a
remote store), 2 ``--dp N`` (DDP), 3 ``--tp N``, 4 ``--pp N`` with micro-batches of M out of
a batch of S (``--micro-batch M --global-batch S``). ``-capacity K`` is ``--memory-limit
2^K`` bytes; the network flags keep their names (``simulate`` takes them). The rewritten
line is printed as a note, so users learn echo's spelling.
"""

from __future__ import annotations

from echo_sim.errors import EchoError

__all__ = ["TrioSimSpellingError", "translate_triosim_argv"]


class TrioSimSpellingError(EchoError):
    """A TrioSim command line echo cannot read; the message names the flag."""


_CASES = {"0": "training on one GPU", "1": "standard data parallel", "2": "DDP",
          "3": "tensor parallel", "4": "pipeline parallel"}
_VALUED = ("trace-dir", "case", "GPUnumber", "batch-size", "batch-size-sim",
           "micro-batch-size", "bandwidth", "ptp-bandwidth", "capacity", "numRows", "numCols",
           "interconnects")
_KEEP = ("bandwidth", "ptp-bandwidth", "numRows", "numCols", "interconnects")


def _flag(token: str) -> tuple[str, str | None] | None:
    """(TrioSim flag name, inline value) of ``-name`` / ``--name`` / ``-name=v``, else None."""
    if not token.startswith("-") or token in ("-", "--"):
        return None
    name, eq, value = token.lstrip("-").partition("=")
    return (name, value if eq else None) if name in _VALUED else None


def translate_triosim_argv(argv: list[str], notes: list[str] | None = None) -> list[str]:
    """``argv`` rewritten to ``simulate`` when it is a TrioSim command line, else unchanged.

    Raises :class:`TrioSimSpellingError` for a flag without its value or an unknown
    ``-case``. ``notes`` receives the rewritten line.
    """
    if not argv or not argv[0].startswith("-") or \
            not any((_flag(t) or ("",))[0] == "trace-dir" for t in argv):
        return argv
    given: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        parsed = _flag(argv[i])
        if parsed is None:
            rest.append(argv[i])
            i += 1
            continue
        name, value = parsed
        if value is None:
            if i + 1 >= len(argv):
                raise TrioSimSpellingError(f"TrioSim's -{name} needs a value")
            value = argv[i + 1]
            i += 1
        given[name] = value
        i += 1
    case = given.get("case", "0")
    if case not in _CASES:
        raise TrioSimSpellingError(f"TrioSim's -case {case!r} is unknown; valid: " + ", ".join(
            f"{k} ({v})" for k, v in _CASES.items()))
    gpus = given.get("GPUnumber", "8")
    out = ["simulate", given["trace-dir"]]
    out += {"0": [], "1": ["--dp", gpus, "--data-parallel", "ps"], "2": ["--dp", gpus],
            "3": ["--tp", gpus], "4": ["--pp", gpus]}[case]
    if "batch-size" in given:
        out += ["--traced-micro-batch", given["batch-size"]]
    sim_batch = given.get("batch-size-sim")
    if case == "4" and "micro-batch-size" in given:
        out += ["--micro-batch", given["micro-batch-size"]]
        if sim_batch or "batch-size" in given:
            out += ["--global-batch", sim_batch or given["batch-size"]]
    elif sim_batch is not None:
        out += ["--micro-batch", sim_batch]
    if "capacity" in given:
        cap = given["capacity"]
        if not cap.isdigit() or not 1 <= int(cap) <= 60:
            raise TrioSimSpellingError(f"TrioSim's -capacity {cap!r} is out of range; valid: "
                                       "1..60 (2^capacity bytes)")
        out += ["--memory-limit", str(1 << int(cap))]
    for name in _KEEP:
        if name in given:
            out += [f"-{name}", given[name]]
    out += rest
    if notes is not None:
        notes.append(f"TrioSim -case {case} ({_CASES[case]}) read as: python -m echo_sim "
                     + " ".join(out))
    return out
