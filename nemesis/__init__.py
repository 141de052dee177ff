"""Faults as data, always healed (nemesis/README.md)."""
import sys


def log(msg: str) -> None:
    """The nemesis's progress line on stderr (one definition for core, scheduler, recovery)."""
    print(f"[nemesis] {msg}", file=sys.stderr, flush=True)
