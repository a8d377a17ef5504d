"""``python -m mpiflow info``: what mpiflow runs on (printed by rank 0 only)."""

from __future__ import annotations

import argparse
import sys

from . import env
from .info import collect, format_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mpiflow", description=__doc__)
    parser.add_argument("command", choices=["info"], help="what to do")
    parser.parse_args(argv)
    if env.get_rank() == 0:
        print(format_report(collect()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
