"""Traces that split where Python reads tensor data.

A trace cut into segments at its reads (``segments``), and a call that runs them
one after another, going on in the path traced for each value read or tracing a
new continuation for it (``continuation``).
"""
