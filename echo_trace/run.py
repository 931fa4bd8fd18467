"""``python -m echo_trace.run [options] script.py args...`` — capture a plain python run.

Like ``TRACE_ON=1 python script.py args...`` without installing the ``.pth`` file: sets
``TRACE_ON=1`` (so child processes trace too), arms capture, then runs the script (or
``-m module``) as ``__main__``. Options, before the script, set the ``TRACE_*`` variables:
``--trace-dir DIR``, ``--start-step N``, ``--end-step N``, ``--trace-format {echo,byteprofile}``,
``--gzip``, ``--overwrite``, ``--kineto-raw``.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence

from echo_trace.config import TRACE_FORMATS

__all__ = ["main"]

USAGE = ("usage: python -m echo_trace.run [--trace-dir DIR] [--start-step N] [--end-step N] "
         "[--trace-format {echo,byteprofile}] [--gzip] [--overwrite] [--kineto-raw] "
         "(script.py | -m module) [args...]")

_VALUE_OPTS = {"--trace-dir": "TRACE_DIR", "--start-step": "TRACE_START_STEP",
               "--end-step": "TRACE_END_STEP", "--trace-format": "TRACE_FORMAT"}
_FLAG_OPTS = {"--gzip": "TRACE_GZIP", "--overwrite": "TRACE_OVERWRITE",
              "--kineto-raw": "TRACE_KINETO_RAW"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m echo_trace.run", usage=USAGE.removeprefix("usage: "),
        description="Capture a plain python run (like TRACE_ON=1 python script.py ...): arm "
                    "echo_trace capture, then run the script or module as __main__. The "
                    "options set the TRACE_* variables (child processes trace too).",
        epilog="Everything from the script (or -m module) on is the script's own command line.")
    p.add_argument("--trace-dir", metavar="DIR", help="root of the output (TRACE_DIR)")
    p.add_argument("--start-step", metavar="N", help="first step recorded (TRACE_START_STEP)")
    p.add_argument("--end-step", metavar="N", help="first step not recorded (TRACE_END_STEP)")
    p.add_argument("--trace-format", choices=TRACE_FORMATS,
                   help="echo (default), or byteprofile: also write ByteProfile's files "
                        "(bps_trace_*.json, arg_namesINpara_names.txt, ...) in each rank "
                        "directory (TRACE_FORMAT)")
    p.add_argument("--gzip", action="store_true", help="write trace.json.gz (TRACE_GZIP)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty rank directory (TRACE_OVERWRITE)")
    p.add_argument("--kineto-raw", action="store_true",
                   help="on GPUs also write kineto_raw.json.gz (TRACE_KINETO_RAW)")
    return p


def _split(args: list[str]) -> tuple[list[str], list[str]]:
    """(echo's options, the target: ``script.py args`` or ``-m module args``)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-m":
        name = args[i].partition("=")[0]
        i += 2 if name in _VALUE_OPTS and "=" not in args[i] else 1
    return args[:i], args[i:]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), arm capture, run the target; exit code."""
    opts_argv, args = _split(list(sys.argv[1:] if argv is None else argv))
    parser = _parser()
    try:
        opts = parser.parse_args(opts_argv)
    except SystemExit as e:  # --help (0) or a bad option (2: argparse said why)
        return int(e.code or 0)
    env = {var: str(getattr(opts, opt[2:].replace("-", "_")))
           for opt, var in _VALUE_OPTS.items()
           if getattr(opts, opt[2:].replace("-", "_")) is not None}
    env.update({var: "1" for opt, var in _FLAG_OPTS.items()
                if getattr(opts, opt[2:].replace("-", "_"))})
    if not args or (args[0] == "-m" and len(args) < 2):
        parser.print_usage(sys.stderr)
        print("echo_trace.run: error: give the script (or -m module) to run", file=sys.stderr)
        return 2
    os.environ.update(env)
    os.environ["TRACE_ON"] = "1"
    from echo_trace._autostart import maybe_start

    maybe_start()
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        script = args[0]
        if not os.path.isfile(script):
            print(f"echo_trace.run: {script}: no such file", file=sys.stderr)
            return 2
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
