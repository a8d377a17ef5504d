"""``python -m mpiflow info``: what mpiflow runs on and its settings; ``python -m mpiflow ops``:
the table of registered ops (dtypes, layout signatures, gradient); ``python -m mpiflow
settings``: the table of settings of docs/configuration.md. Printed by rank 0 only."""

from __future__ import annotations

import argparse
import sys

from . import env
from .core import settings
from .info import collect, format_report, mpiflow_settings
from .ops import registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mpiflow", description=__doc__)
    parser.add_argument("command", choices=["info", "ops", "settings"],
                        help="info: what mpiflow runs on; ops: the registered ops; settings: "
                             "the table of settings (markdown)")
    args = parser.parse_args(argv)
    if args.command == "ops":
        table = registry.format_table()  # pure: every rank may build it
        if env.get_rank() == 0:
            print(table)
        return 0
    if args.command == "settings":
        if env.get_rank() == 0:
            print(settings.markdown_table())
        return 0
    if env.get_rank() == 0:
        print(format_report(collect(), mpiflow_settings()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
