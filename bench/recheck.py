"""Check runs again and compare the figures with their stored check.json (checkers/recheck.py,
also `mqchaos recheck`): a change to the checker must give the same figures on real histories
as the checker that wrote them.

    python -m bench.recheck [results/ ...]     (default results/)

Exit 0: all identical; 1: some differ (each difference printed); 2: nothing to compare."""
from __future__ import annotations

import argparse
import sys

from checkers.recheck import recheck
from harness.util import entry_point


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", default=["results"])
    args = ap.parse_args(argv)
    return recheck(args.paths)


if __name__ == "__main__":
    with entry_point():
        sys.exit(main())
