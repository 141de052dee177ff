"""Workload clients (Jepsen's `client`): each opens a connection, invokes
operations, records every attempt / delivery in the history, and closes.

One thread per client; all share the run clock and stop on one event.
"""
