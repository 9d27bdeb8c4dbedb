"""Autotune configurations pruned per arch from compile facts, and the `triton.autotune` hook that
reads them.

`portcheck prune` cross-compiles every launch a family declares on every arch and writes
configs/pruned/<family>.json: per arch, each launch with the configuration it runs (its constexprs
and AMD options, num_warps, num_stages), whether it compiled clean and, if not, why (over shared
memory by N bytes, N bytes of spills, occupancy under the threshold, emulated fp8, ...). The file
is committed data: a kernel loads it at import and its autotuner times only what compiled clean
on the arch it runs on:

    triton.autotune(configs=..., key=[...],
                    prune_configs_by=prune_configs_by("matmul", dtype_of=..., then=own_prune))

A triton.Config is an entry's configuration when its kwargs, num_warps and num_stages are the
entry's; it is kept when its launches the family declares for the arch (and dtype) compiled
clean: those that pass the same arguments as the launch at hand where there are such (a
configuration that spills only with the bias + gelu epilogue is dropped for that epilogue
alone), else all of them. Where the file covers no launch of the arch and dtype (the
interpreter, an arch prune has not seen), every configuration is kept.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

PRUNED_DIR = Path(__file__).with_name("configs") / "pruned"


def pruned_file(family: str, directory: Path = PRUNED_DIR) -> Path:
    return Path(directory) / f"{family}.json"


@lru_cache(maxsize=None)
def load(family: str, directory: Path = PRUNED_DIR) -> dict:
    """The family's pruned lists ({} when it has none)."""
    path = pruned_file(family, directory)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def entries_for(family: str, arch: str, dtype: str | None = None, directory: Path = PRUNED_DIR) -> list[dict]:
    """The launches the lists hold for an arch name (and dtype)."""
    found = (load(family, directory).get("archs") or {}).get(arch, [])
    return [e for e in found if dtype is None or e["dtype"] == dtype]


def is_entry_of(config, entry: dict) -> bool:
    """Whether a triton.Config launches the entry's configuration (its kwargs are among the
    entry's constexprs and options; num_stages None in an entry is the backend's default)."""
    params = entry["params"]
    return (config.num_warps == entry["num_warps"]
            and entry.get("num_stages") in (None, config.num_stages)
            and all(k in params and params[k] == v for k, v in config.kwargs.items()))


def _agrees(entry: dict, launch: dict) -> bool:
    """Whether the entry's launch passes the same values as this one wherever both name one (an
    epilogue variant, say: HAS_BIAS, ACTIVATION)."""
    return all(launch[k] == v for k, v in entry["params"].items() if k in launch)


def configs_for(family: str, arch: str, configs, dtype: str | None = None,
                directory: Path = PRUNED_DIR, launch: dict | None = None) -> list:
    """The configs (triton.Config) that compiled clean on `arch`; all of them where the lists hold
    no launch of the arch and dtype. A config is judged by its entries that agree with `launch`
    (the launch's scalar arguments) where it has such entries, else by all of its entries."""
    entries = entries_for(family, arch, dtype, directory)
    if not entries:
        return list(configs)
    kept = []
    for config in configs:
        mine = [e for e in entries if is_entry_of(config, e)]
        closest = [e for e in mine if _agrees(e, launch or {})] or mine
        if closest and all(e["kept"] for e in closest):
            kept.append(config)
    return kept


def prune_configs_by(family: str, dtype_of=None, then=None, directory: Path = PRUNED_DIR) -> dict:
    """`prune_configs_by` for triton.autotune: early_config_prune(configs, named_args, **kwargs)
    (the same call in triton 3.6 and 3.9) keeps what configs_for keeps on the active arch, then
    applies `then` (the kernel's own pruning, same signature) to those. `dtype_of(named_args)`
    gives the launch's portcheck dtype name when the lists differ per dtype."""
    def early_config_prune(configs, named_args, **kwargs):
        from ..facts.device import current_arch
        arch = current_arch()
        launch = {k: v for k, v in {**named_args, **kwargs}.items()
                  if v is None or isinstance(v, (bool, int, float, str))}
        kept = configs_for(family, arch.name, configs, dtype_of(named_args) if dtype_of else None,
                           directory, launch)
        if not kept:
            raise ValueError(f"no {family} configuration compiled clean on {arch.name} "
                             f"({pruned_file(family, directory)}); see `portcheck prune`")
        return then(kept, named_args, **kwargs) if then else kept
    return {"early_config_prune": early_config_prune}
