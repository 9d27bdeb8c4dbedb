# where matmul_fp8_out fp8e4nv's 60 s go on the H200, in process
import cProfile, pstats, time, io, os, sys
import hypothesis
from portcheck import cases, runner
from portcheck.strategies import register_profiles
from portcheck.targets.runtime import TARGETS
register_profiles()
s = hypothesis.settings.get_profile("ci")
case = cases.get("matmul_fp8_out")
arch = TARGETS["cuda"].arch()
prof = cProfile.Profile()
t = time.time()
prof.enable()
r = runner.check(case, "cuda", arch, "fp8e4nv", settings=s, max_elements=4194304, seed=0)
prof.disable()
print("verdict", r.verdict, "wall", round(time.time() - t, 1), "phases", r.phases)
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(45)
pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
open(os.path.join(os.environ["OUT"], "fp8-profile.txt"), "w").write(out.getvalue())
