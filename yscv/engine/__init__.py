"""The engine: the arena graph and everything that walks it.

``graph`` (storage, the append and its fast paths, accessors; the Graph
class), ``leaves`` (variables, constants, parameters, buffers), the backward
``schedule`` and its runners (``walk`` serial, ``walk_parallel`` threads,
``walk_recorded`` create_graph), ``namespace`` (a rule's two interpreters:
arrays and the graph; Op.VJP), ``recompute`` (activation checkpointing:
release and replay), ``grad_mode`` (no_grad), ``clipping``, ``introspect``.
The op table it dispatches on is yscv/registry.py, the node record
yscv/node.py (the ground floor every floor reads)."""
