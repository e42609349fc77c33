"""The kernel floor's drivers: how yscv computes what ops/ and backward/ ask.

``ops/<category>`` (forwards) and ``backward/<category>`` (backward rules)
read like the math and never import each other; what both need -- operand
layouts and lifting, chunking into regions, the GEMM choice, read-only
kernel inputs, size tiers -- lives here, next to the jitted kernels
(``yscv/kernels``) it drives. Settings come from `yscv.runtime`.
"""
