"""``python -m echo_trace.gpu.recording RANK_DIR OUT_DIR``: the command line of the replay."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from echo_trace.gpu.recording.replay import RAW_FILE, RecordingError, write_replay

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see :mod:`echo_trace.gpu.recording`); exit 0, or 2 with one line on
    stderr."""
    p = argparse.ArgumentParser(
        prog="python -m echo_trace.gpu.recording",
        description="Replay a GPU capture window offline: run echo_trace's live chain "
                    "(profiler adapter -> attribution -> events -> writer) on the "
                    f"{RAW_FILE} in RANK_DIR and write the rank directory echo_trace "
                    "would write today into OUT_DIR.")
    p.add_argument("rank_dir", metavar="RANK_DIR",
                   help=f"a rank directory holding {RAW_FILE} and meta.json "
                        "(written with TRACE_KINETO_RAW=1)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="where to write the replayed rank "
                   "directory (must be missing or empty unless --force)")
    p.add_argument("--no-gzip", action="store_true", help="write trace.json, not trace.json.gz")
    p.add_argument("--force", action="store_true", help="replace a non-empty OUT_DIR")
    args = p.parse_args(argv)
    try:
        where = write_replay(args.rank_dir, args.out_dir, gzip_trace=not args.no_gzip,
                             overwrite=args.force)
    except RecordingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or args.out_dir}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"echo_trace: replayed {args.rank_dir} into {where}")
    return 0
