#!/usr/bin/env python3
"""What guard bands cost on the interpreter: CPU seconds of runner.check with and without them.

    python3 tools/guard_cost.py [--rounds 3] [--examples 12]

Eight cases of different shapes (row kernels, matmul, a cache write, rope, quant, attention), one
launch per example (the determinism check's second launch is a separate cost), guards off and on
in interleaved rounds (order reversed every other round; the first round warms the caches and is
not counted). Process CPU time, not wall time, so other load on the machine matters less.
"""
import argparse
import os
import time

os.environ["TRITON_INTERPRET"] = "1"

from portcheck.targets.runtime import INTERPRETER_ARCH, select_mode  # noqa: E402

select_mode("interpreter")

import hypothesis  # noqa: E402

from portcheck import cases, runner  # noqa: E402

CASES = [("softmax", "fp32"), ("layernorm", "fp16"), ("rmsnorm", "bf16"), ("matmul", "fp16"),
         ("kv_cache_write", "bf16"), ("rope", "fp32"), ("quant_int8_per_token", "fp16"), ("attention", "fp16")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--examples", type=int, default=12)
    opts = parser.parse_args()
    settings = hypothesis.settings(max_examples=opts.examples, derandomize=True, deadline=None, database=None,
                                   phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])
    total = {False: 0.0, True: 0.0}
    for name, dtype in CASES:
        case = cases.get(name)
        for r in range(opts.rounds):
            for guarded in ((False, True) if r % 2 == 0 else (True, False)):
                start = time.process_time()
                result = runner.check(case, "interpreter", INTERPRETER_ARCH, dtype, settings=settings,
                                      max_elements=16384, seed=0, checks=runner.Checks(guards=guarded, launches=1))
                assert result.verdict == "pass", (name, dtype, result.message)
                if r:
                    total[guarded] += time.process_time() - start
    print(f"CPU seconds over {len(CASES)} cases x {opts.rounds - 1} rounds x {opts.examples} examples: "
          f"without guards {total[False]:.2f}, with guards {total[True]:.2f}: "
          f"{(total[True] / total[False] - 1) * 100:+.1f}%")


if __name__ == "__main__":
    main()
