"""Fills in the `as_arch` field of the 40 records that the H200 run of 2026-12-01 wrote without
it: FNUZ cases skipped by an override returned before runner.check built the field (fixed in
the commit that adds this file; tests/harness/test_as_arch.py::
test_an_override_skip_under_as_arch_is_a_valid_record). The values are those
portcheck.as_arch.record gives such a record: it skips before any launch, so no notes and no
skipped configurations. Nothing else in any record is touched.

    python3 repair_override_skips.py RAW_RESULTS.jsonl > as-arch-results.jsonl
"""
import json
import sys

from portcheck.as_arch import groups, parse

group_of = {a.name: [b.name for b in g] for g in groups(parse("all")) for a in g}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("evidence") == "as-arch" and "local" not in r.get("as_arch", {}):
        assert r["verdict"] == "skip" and r["message"].startswith("skipped by override"), r
        stands_for = group_of[r["arch"]]
        r["as_arch"] = {"arch": r["arch"], "checked_as": stands_for[0], "stands_for": stands_for,
                        "local": r["provenance"]["arch"], "notes": [], "skipped": []}
    print(json.dumps(r, sort_keys=True))
