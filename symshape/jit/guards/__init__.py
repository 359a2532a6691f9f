"""What every call checks before a trace runs.

The generated prologue that accepts or rejects a call (``prologue``), the guards
on the Python state a trace read (``state``) and on the globals and closure
variables it read (``globals_guard``), arguments that are Python objects
(``object_inputs``), modules and their state (``module_inputs``), and the strides of non-contiguous tensor inputs (``layouts``).
"""
