"""Regenerate portcheck/data/unit-seconds.json, the claim order of a machine with no history of its
own (portcheck.workers.History), from runs of the default matrix: e.g. the H200 cold runs of
reports/examples/speed-h200 (plain) and as-arch-h200 (`--as-arch all`, whose units are keyed by
arch), and a serial interpreter run (`--jobs 1`). The units of the runs given replace theirs in
the file; the rest of it stays.

    python3 tools/ship_unit_seconds.py reports/examples/speed-h200/cold-results.jsonl reports/<interpreter run>
"""
import json
import sys
from pathlib import Path

from portcheck import results, workers

data = {}
shipped = json.loads(workers.SHIPPED.read_text()) if workers.SHIPPED.exists() else {}
for arg in sys.argv[1:]:
    path = Path(arg) / "results.jsonl" if Path(arg).is_dir() else Path(arg)
    for r in results.read(path):
        if r.get("kind") == "runtime" and r.get("phases"):
            as_arch = r.get("evidence") == "as-arch"
            scope = workers.history_scope(r["target"], r["as_arch"]["local"] if as_arch else r["arch"])
            key = workers.unit_key(r["case"], r["dtype"], r["arch"] if as_arch else None)
            data.setdefault(scope, {})[key] = round(sum(r["phases"].values()), 1)
if not data:
    sys.exit("ship_unit_seconds: no runtime records with phases in the runs given")
for scope, seconds in data.items():
    shipped[scope] = {**shipped.get(scope, {}), **seconds}
workers.SHIPPED.write_text(json.dumps(shipped, indent=1, sort_keys=True) + "\n")
print(f"wrote {workers.SHIPPED}: " + ", ".join(f"{k} ({len(v)} units)" for k, v in data.items()))
