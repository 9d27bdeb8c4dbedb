"""Regenerate portcheck/data/unit-seconds.json, the claim order of a machine with no history of its
own (portcheck.workers.History), from runs of the default matrix: one run per target, e.g. the
H200 cold run of reports/examples/speed-h200 and a serial interpreter run (`--jobs 1`).

    python3 tools/ship_unit_seconds.py reports/examples/speed-h200/cold-results.jsonl reports/<interpreter run>
"""
import json
import sys
from pathlib import Path

from portcheck import results, workers

data = {}
for arg in sys.argv[1:]:
    path = Path(arg) / "results.jsonl" if Path(arg).is_dir() else Path(arg)
    for r in results.read(path):
        if r.get("kind") == "runtime" and r.get("phases") and r.get("evidence") != "as-arch":
            scope = workers.history_scope(r["target"], r["arch"])
            data.setdefault(scope, {})[workers.unit_key(r["case"], r["dtype"])] = round(sum(r["phases"].values()), 1)
if not data:
    sys.exit("ship_unit_seconds: no runtime records with phases in the runs given")
workers.SHIPPED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
print(f"wrote {workers.SHIPPED}: " + ", ".join(f"{k} ({len(v)} units)" for k, v in data.items()))
