"""Targets: the arch table, runtime targets (cuda, rocm, interpreter) and cross-compilation."""
from ..facts.archs import ARCHS, DEFAULT_ARCHS, Arch, arch, parse_archs
from .runtime import RUNTIME_TARGETS, TARGETS, Target, resolve, select_mode, target

__all__ = ["ARCHS", "DEFAULT_ARCHS", "Arch", "arch", "parse_archs", "RUNTIME_TARGETS", "TARGETS",
           "Target", "resolve", "select_mode", "target"]
