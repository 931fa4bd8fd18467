"""``python -m benchmarks.validation`` runs :mod:`benchmarks.validation.run`."""

import sys

from benchmarks.validation.run import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
