"""Launch configurations are data: portcheck/kernels/configs/<kernel>.toml, one table per arch
config family (facts.archs.Arch.config_family), so adding an arch is a row in the arch table plus
its tables here, and a retune is a data change. TOML rather than Python: the data can carry its
comments (what was measured, what spilled) and is read and checked by one loader."""
from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from ..facts.archs import ARCHS, INTERPRETER, Arch

CONFIG_DIR = Path(__file__).with_name("configs")
AMD_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")   # passed through to the compiler


def config_file(kernel: str) -> Path:
    return CONFIG_DIR / f"{kernel}.toml"


@lru_cache(maxsize=None)
def load(kernel: str) -> dict:
    """The raw tables of configs/<kernel>.toml."""
    return tomllib.loads(config_file(kernel).read_text(encoding="utf-8"))


def families() -> tuple[str, ...]:
    """Every config family a kernel keyed by family must cover: the arch table's and the interpreter's."""
    return tuple(dict.fromkeys([INTERPRETER.config_family, *(a.config_family for a in ARCHS.values())]))


def family_table(kernel: str, arch: Arch) -> dict:
    """The table configs/<kernel>.toml holds for an arch's config family; a family it lacks is an
    error that names the file."""
    data = load(kernel)
    if arch.config_family not in data:
        raise ValueError(f"{config_file(kernel)} has no [{arch.config_family}] table (for {arch.name})")
    return data[arch.config_family]


def amd_options(entry: dict) -> dict:
    """The AMD compiler options of one entry, in the order AMD_OPTIONS lists them."""
    return {k: entry[k] for k in AMD_OPTIONS if k in entry}
