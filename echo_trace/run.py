"""``python -m echo_trace.run [options] script.py args...`` — capture a plain python run.

Like ``TRACE_ON=1 python script.py args...`` without installing the ``.pth`` file: sets
``TRACE_ON=1`` (so child processes trace too), arms capture, then runs the script (or
``-m module``) as ``__main__``. Options, before the script, set the ``TRACE_*`` variables:
``--trace-dir DIR``, ``--start-step N``, ``--end-step N``, ``--gzip``, ``--overwrite``,
``--kineto-raw``.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

__all__ = ["main"]

USAGE = ("usage: python -m echo_trace.run [--trace-dir DIR] [--start-step N] [--end-step N] "
         "[--gzip] [--overwrite] [--kineto-raw] (script.py | -m module) [args...]")

_VALUE_OPTS = {"--trace-dir": "TRACE_DIR", "--start-step": "TRACE_START_STEP",
               "--end-step": "TRACE_END_STEP"}
_FLAG_OPTS = {"--gzip": "TRACE_GZIP", "--overwrite": "TRACE_OVERWRITE",
              "--kineto-raw": "TRACE_KINETO_RAW"}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), arm capture, run the target; exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    env: dict[str, str] = {}
    while args and args[0].startswith("-") and args[0] != "-m":
        opt = args.pop(0)
        name, _, inline = opt.partition("=")
        if name in ("-h", "--help"):
            print(USAGE)
            return 0
        if name in _FLAG_OPTS:
            env[_FLAG_OPTS[name]] = "1"
        elif name in _VALUE_OPTS:
            if not inline:
                if not args:
                    print(f"echo_trace.run: {name} needs a value\n{USAGE}", file=sys.stderr)
                    return 2
                inline = args.pop(0)
            env[_VALUE_OPTS[name]] = inline
        else:
            print(f"echo_trace.run: unknown option {opt!r}; valid: "
                  f"{', '.join([*_VALUE_OPTS, *_FLAG_OPTS])}\n{USAGE}", file=sys.stderr)
            return 2
    if not args or (args[0] == "-m" and len(args) < 2):
        print(USAGE, file=sys.stderr)
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
