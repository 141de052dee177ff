"""The fault kinds by family, each module one family: its planning, its action, its
evidence and its ``TYPES`` (and ``CHOREOGRAPHIES``), which ``nemesis.faults`` assembles into
the one registry. An operation family names the capability it needs
(``harness.brokers.capabilities``) and asks the cluster for that ability alone."""
