"""Which units of the default run launch the same compiled kernel (issue 17: the halves of a run
each compile what they share): each unit's check examples (ci profile, seed 0, the sm_90a launch
configuration forced) launched on CPU tensors with every Triton launch noted, not run; a kernel is
its function, constexprs and argument dtypes. A partial view: launches through tensor descriptors
(attention) cannot be noted here and are left out, so attention's units show fewer kernels and
its two dtypes look alike; the long-row kernels are noted without their L2 prefetch (the local
device's feature); digests, far rows and the timed spec are not drawn. Runs on the CPU:

    TRITON_INTERPRET=1 python3 reports/examples/speed-h200/twentieth-session/shared_kernels.py
"""
import collections
import json
import time

import hypothesis

from portcheck import cases, precompile, runner, workers
from portcheck.compile.capture import recording
from portcheck.facts import device as fd
from portcheck.facts.archs import arch
from portcheck.session import case_seed
from portcheck.strategies import register_profiles

register_profiles()
settings = hypothesis.settings.get_profile("ci")
keys_of = {}
skipped = []
with fd.forced_arch(arch("sm_90a")):
    for c in cases.all_cases():
        for d in c.dtypes:
            if d in ("fp8e4b8", "fp8e5b16"):   # AMD's FNUZ formats: skipped on NVIDIA
                continue
            t = time.time()
            ks = set()
            try:
                specs = precompile.examples(c.inputs(d, 1 << 22), settings, case_seed(0, c.name, d))
            except Exception as e:   # noqa: BLE001
                skipped.append((c.name, d, "draw " + type(e).__name__))
                continue
            for s in specs:
                with recording(execute=False) as rec:
                    try:
                        with fd.drawing(s.get("config")):
                            args, _ = runner._inputs(c, "cpu", s, runner.CHECKS)
                            c.launch(args, runner._outputs(c, args, "cpu", runner.CHECKS.guards)[0])
                    except Exception as e:   # noqa: BLE001
                        skipped.append((c.name, d, f"{type(e).__name__}: {str(e)[:80]}"))
                for k, a, kw in rec.raw:
                    consts = {n: v for n, v in kw.items() if not hasattr(v, "data_ptr")}
                    sig = tuple(str(x.dtype) if hasattr(x, "dtype") else type(x).__name__ for x in a)
                    ks.add((k.fn.__module__ + "." + k.fn.__name__, json.dumps(consts, sort_keys=True, default=str), sig))
            keys_of[workers.unit_key(c.name, d)] = ks
            print(c.name, d, len(ks), round(time.time() - t, 1), flush=True)
units = sorted(keys_of)
owners = collections.defaultdict(set)
for u, ks in keys_of.items():
    for k in ks: owners[k].add(u)
shared = {k: us for k, us in owners.items() if len(us) > 1}
print("units", len(units), "keys", len(owners), "shared keys", len(shared))
for k, us in sorted(shared.items(), key=lambda kv: (-len(kv[1]), kv[0][0], sorted(kv[1]))):
    print(k[0], sorted(us))
print("examples not noted, by unit and reason:")
for (name, dtype, why), n in sorted(collections.Counter(skipped).items()):
    print(f"  {name} {dtype}: {n} x {why}")
