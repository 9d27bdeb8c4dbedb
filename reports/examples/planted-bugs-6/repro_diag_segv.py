"""Reproducer for the SIGSEGV of the first trial run (see README, "portcheck faults").

The same planted bug as p6_bug_int4_high_nibble_no_sign_extend, but with the launcher of the first
trial run, which did not refuse a K that is not a multiple of the group size G. The search only
draws K = G * n; after the failure, the diagnosis's reduction-length rerun (K/2) makes an input
with K = 16 < G = 32, whose scale tensor has 0 columns, and the interpreter's load from it kills
the worker. The record then says SIGSEGV "on the recorded input" (a pre-shrink input, whose replay
fails cleanly), and the real failure is not reported.

    PYTHONPATH=$PWD portcheck run --target interpreter --cases repro_diag_segv \
        --kernel p6x_bug_int4_unvalidated --no-time --jobs 1 --shrink-time 20 --out <new dir>
"""
import triton

import portcheck
import probe6 as P


def _launch_unvalidated(args, outs):
    P._plain(args)
    x, w, s, y = args["x"], args["w"], args["scales"], outs["y"]
    P._need_contiguous(x=x, w=w, scales=s)
    M, K = x.shape
    N = w.shape[0]
    P.w4a16_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 32))](
        x, w, s, y, M, N, K, args["G"], x.stride(0), w.stride(0), s.stride(0), y.stride(0),
        BM=16, BN=32, BK=64, BUG=1)


portcheck.register(portcheck.Case(
    name="p6x_bug_int4_unvalidated", family="probe6x", launch=_launch_unvalidated,
    description="planted bug: int4 high nibble not sign-extended; launcher does not validate K % G",
    **P._W4))
