"""dPRO / ByteProfile spellings, as their users type them, rewritten into echo's.

dPRO (``dpro/arg_utils.py``, ``dpro/analyze.py``) takes ``--option CMD --path P[,P...]``,
underscore flags (``--step_num``, ``--sub_option``, ``--delay_ratio``), bare ``--sort`` and
``--xlsx`` switches and sub-options that pick a variant of a command. What echo can run is
rewritten to the echo command line; what it cannot raises :class:`DproSpellingError` with the
echo equivalent in one line (the CLI exits 2).
"""

from __future__ import annotations

from collections.abc import Sequence

from echo_sim.errors import EchoError

__all__ = ["DproSpellingError", "translate_dpro_argv"]


class DproSpellingError(EchoError):
    """A dPRO spelling with no runnable echo equivalent; the message names the equivalent."""


# dPRO --option values with no echo command of that name.
_OPTION_EQUIVALENT = {
    "mapping": "echo has no op-to-kernel mapping; a Kineto (PyTorch profiler) trace already "
               "attributes kernels to ops: `statistic KINETO.json`",
    "topo_sort": "echo rebuilds the dependency graph itself: `graph PATH -o dag.gml`",
    "timeline": "the timeline is `combine PATH` (one Perfetto file for every rank)",
    "optimize": "strategy search is `search PATH` (see `python -m echo_sim search --help`)",
}

# dPRO --option values that are an echo command with flags.
_OPTION_COMMAND = {
    # "Ignore partition id": ranks lined up by parallel role, not number
    "3dcompare": ["compare", "--by-role"],
}

# --option collect --sub_option X: echo command line, or None with an equivalent.
_COLLECT_SUB: dict[str, tuple[list[str] | None, str]] = {
    "combine": (["combine"], ""),
    "iter_time": (["collect"], ""),
    # "update operator traces based on the source files": dPRO's name2sta, re-derived
    "operator": (["export", "--to", "op-stats"], ""),
    "straggler": (["stragglers"], ""),
    "bottleneck": (["critical"], ""),
    "xlsx": (["statistic", "--xlsx"], ""),
    "visual_dag": (None, "draw the graph with `graph PATH --step N -o dag.svg`"),
    "gap": (None, "gaps before ops are the 'host delay' of `critical PATH` and of `replay`"),
    "query": (None, "look an operator up in `statistic PATH --head 0` (or --json)"),
    "tensor_size2avg": (None, "per-tensor sizes and times are in `statistic PATH --json` "
                              "(Comm ops) and `profile-comm`"),
}

# --option replay --sub_option X: replay's what-if flags stand in for dPRO's delays.
_REPLAY_SUB = {
    "smlt_delay_cmp": ("FW.*", "BW.*", "UPDATE.*"),
    "smlt_delay_comm": ("Comm.*",),
}
_REPLAY_SUB_OTHER = {
    "bottleneck": (["critical"], ""),
    "theory": (None, "echo's model of an ideal run is `simulate PATH` (same layout)"),
    "compare": (None, "replay each variant with --scale and compare the --output files with "
                      "`compare`"),
    "map_delay": (None, "delay one op with `replay PATH --scale 'NAME=FACTOR'`"),
}


# dPRO flags that change nothing echo does (logging, progress, its own collection knobs):
# dropped with a note. Switches, then flags with a value.
_IGNORED_SWITCHES = ("--clean", "--pretty", "--progress", "--debug_traces",
                     "--disable_revise", "--update_infi_para", "--del_queue")
# ... except where an echo command has them: replay --del-queue / --pretty
_KEPT_SWITCHES = {"replay": ("--del_queue", "--pretty")}
_IGNORED_VALUED = ("--logging_level", "--comm_backend", "--platform", "--trace_level",
                   "--nccl_algo")


def _drop_ignored(argv: list[str], notes: list[str] | None, option: str) -> None:
    dropped: list[str] = []
    for flag in _IGNORED_VALUED:
        if _pop_value(argv, flag) is not None:
            dropped.append(flag)
    for flag in _IGNORED_SWITCHES:
        if flag in _KEPT_SWITCHES.get(option, ()):
            continue
        while flag in argv:
            argv.remove(flag)
            dropped.append(flag)
    if dropped and notes is not None:
        notes.append(f"ignoring dPRO's {', '.join(sorted(set(dropped)))} (nothing to set in "
                     "echo)")


def _pop_value(argv: list[str], flag: str) -> str | None:
    """Remove ``flag VALUE`` (or ``flag=VALUE``) from argv; the value, or None if absent."""
    for i, a in enumerate(argv):
        if a == flag:
            if i + 1 >= len(argv):
                raise EchoError(f"{flag} needs a value")
            value = argv[i + 1]
            del argv[i:i + 2]
            return value
        if a.startswith(flag + "="):
            del argv[i]
            return a.split("=", 1)[1]
    return None


def _paths(argv: list[str]) -> list[str]:
    """Remove ``--path P [P ...]`` (each may be comma-separated); the paths."""
    if "--path" not in argv:
        return []
    j = argv.index("--path")
    k = j + 1
    out: list[str] = []
    while k < len(argv) and not argv[k].startswith("--"):
        out.extend(p for p in argv[k].split(",") if p)
        k += 1
    del argv[j:k]
    return out


def _underscores(argv: list[str]) -> list[str]:
    """``--step_num`` → ``--step-num`` for every long flag (values are left alone)."""
    out: list[str] = []
    for a in argv:
        if a.startswith("--") and "_" in a:
            name, eq, value = a.partition("=")
            a = name.replace("_", "-") + eq + value
        out.append(a)
    return out


def translate_dpro_argv(argv: Sequence[str], notes: list[str] | None = None) -> list[str]:
    """dPRO's command line as echo's (unchanged when it is already echo's).

    ``--option CMD --path P[,P]`` → ``CMD P [P]``; ``--option collect --sub_option iter_time``
    → ``collect``; ``--option replay --sub_option smlt_delay_comm --delay_ratio 1.2`` →
    ``replay --scale 'Comm.*=1.2'``; ``--option 3dcompare --path A,B`` → ``compare A B
    --by-role``; ``--type`` and dPRO options echo cannot run raise
    :class:`DproSpellingError` naming the echo equivalent. dPRO's logging and collection
    switches are dropped, with a line appended to ``notes``.
    """
    args = list(argv)
    if any(a == "--type" or a.startswith("--type=") for a in args):
        raise DproSpellingError(
            "--type is not needed: echo detects the trace format from the files (echo, "
            "ByteProfile/dPRO, Kineto, TrioSim); drop --type")
    sub = _pop_value(args, "--sub_option")
    if sub is None:
        sub = _pop_value(args, "--sub-option")
    option = _pop_value(args, "--option")
    if option is None:
        if sub is not None:
            raise DproSpellingError(f"--sub_option {sub} needs dPRO's --option; in echo the "
                                    "variant is its own command (python -m echo_sim --help)")
        return _underscores(args)
    if option in _OPTION_EQUIVALENT:
        raise DproSpellingError(f"--option {option}: {_OPTION_EQUIVALENT[option]}")
    _drop_ignored(args, notes, option)
    paths = _paths(args)
    rest = _underscores(args)
    command = _OPTION_COMMAND.get(option, [option.replace("_", "-")])
    if sub is not None:
        command, rest = _sub_option(option, sub, rest)
    return [*command[:1], *paths, *command[1:], *rest]


def _sub_option(option: str, sub: str, rest: list[str]) -> tuple[list[str], list[str]]:
    if option == "collect":
        table = _COLLECT_SUB
    elif option == "replay":
        if sub in _REPLAY_SUB:
            ratio = _pop_value(rest, "--delay-ratio") or "1.1"  # dPRO's default delay_ratio
            scale = [x for glob in _REPLAY_SUB[sub] for x in ("--scale", f"{glob}={ratio}")]
            return ["replay", *scale], rest
        table = _REPLAY_SUB_OTHER
    else:
        raise DproSpellingError(f"--sub_option {sub}: dPRO's --option {option} has no "
                                f"sub-options in echo; run `{option} PATH`")
    if sub.startswith("amp_data_clct"):
        raise DproSpellingError("--sub_option amp_data_clct: echo fits no AMP cost model; "
                                "per-op times are in `statistic PATH --json`")
    if sub not in table:
        raise DproSpellingError(f"--sub_option {sub} is not a dPRO {option} sub-option echo "
                                f"knows; known: {', '.join(sorted(table))}")
    command, equivalent = table[sub]
    if command is None:
        raise DproSpellingError(f"--option {option} --sub_option {sub}: {equivalent}")
    return command, rest
