"""Kernel families: one module each, holding the Triton source, its launcher and its Case(s).

Modules here never import portcheck.targets: a launcher learns what it needs (warp size, the
arch row) from portcheck.facts.device, and compile variants receive the arch they are built for.
"""
