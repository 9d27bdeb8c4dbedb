"""float64 references, one module per kernel family, written without the kernels' code."""
