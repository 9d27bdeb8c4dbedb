"""Accuracy of Triton's float32 math functions per target: exhaustive on a GPU (all 2^32 inputs),
a stratified sample on the interpreter, the instruction each lowers to per arch, and the vendors'
documented bounds beside the measurement."""
