"""Faults as data, always healed (nemesis/README.md). Each module logs to its own
``logging.getLogger(__name__)`` (shown as ``[nemesis]``: harness.util.setup_logging)."""
