"""Issue 17, a diagnostic: which step of a check compiles what its warm-up did not. On PYTHONPATH
with TRACE_COMPILES=DIR, every process of a `portcheck run` appends to DIR/<pid>.jsonl: each
Triton compile (kernel, cache hit or not, the thread, its seconds), each example a check evaluates
(the case and its spec) and each warm-up's start and end, each check's start and end. compiles.py reads them.
Since the twenty-ninth session every event carries the process's CPU seconds so far (its children's,
ptxas and the host compiler, included once they end), and the file
also holds each process's start and exit (its command line), its Session's making and
its CUDA context's (torch.cuda._lazy_init) and each C module Triton builds with the host compiler
(triton.runtime.build._build: its driver utilities, a launcher per kernel signature), for
../../twenty-ninth-session/timeline.py."""
import os

if os.environ.get("TRACE_COMPILES"):
    import builtins
    import json
    import sys
    import threading
    import time

    _path = os.path.join(os.environ["TRACE_COMPILES"], f"{os.getpid()}.jsonl")
    _real_import = builtins.__import__
    _done = []

    def _log(**fields):
        with open(_path, "a") as f:
            f.write(json.dumps({"t": round(time.time(), 4), "cpu": round(sum(os.times()[:4]), 2), **fields},
                               default=str) + "\n")

    import atexit
    atexit.register(lambda: _log(ev="exit"))
    with open("/proc/self/cmdline", "rb") as _f:
        _log(ev="start", cmd=_f.read().replace(b"\0", b" ").decode(errors="replace").strip())

    def _wrapped(owner, name, begin, once=lambda: True):
        inner = getattr(owner, name)

        def traced(*args, **kwargs):
            if not once():
                return inner(*args, **kwargs)
            _log(ev=begin)
            try:
                return inner(*args, **kwargs)
            finally:
                _log(ev=begin + "-end")
        setattr(owner, name, traced)

    def _install(runner, precompile):
        from triton import knobs
        import torch.cuda
        _wrapped(torch.cuda, "_lazy_init", "cuda-init", once=lambda: not torch.cuda.is_initialized())
        import triton.runtime.build as build
        cc = build._build

        def traced_cc(name, *args, **kwargs):
            begin = time.time()
            try:
                return cc(name, *args, **kwargs)
            finally:
                _log(ev="cc", name=name, s=round(time.time() - begin, 3), thread=threading.current_thread().name)
        build._build = traced_cc

        def listener(*, src, metadata, metadata_group, times, cache_hit):
            _log(ev="compile", kernel=metadata.get("name"), hash=metadata.get("hash"), hit=cache_hit, thread=threading.current_thread().name,
                 us=getattr(times, "total", None) if not isinstance(times, dict) else times.get("total"))
        knobs.compilation.listener = listener
        evaluate = runner.evaluate

        def traced(case, target_name, spec, *args, **kwargs):
            _log(ev="eval", case=case.name, spec=spec)
            return evaluate(case, target_name, spec, *args, **kwargs)
        runner.evaluate = traced
        ahead = precompile.ahead

        def traced_ahead(jobs, n_threads):
            _log(ev="warmup", jobs=len(jobs), threads=n_threads)
            try:
                return ahead(jobs, n_threads)
            finally:
                _log(ev="warmup-end")
        precompile.ahead = traced_ahead
        check = runner.check

        def traced_check(case, target_name, arch, dtype, **kwargs):
            _log(ev="check", case=case.name, dtype=dtype, pole=kwargs.get("pole"))
            try:
                return check(case, target_name, arch, dtype, **kwargs)
            finally:
                _log(ev="check-end", case=case.name, dtype=dtype)
        runner.check = traced_check

    def _hooked(name, *args, **kwargs):
        module = _real_import(name, *args, **kwargs)
        session = sys.modules.get("portcheck.session")
        if session is not None and hasattr(session, "Session") and not hasattr(session.Session, "_traced"):
            session.Session._traced = True
            _wrapped(session.Session, "__init__", "session")
        if not _done:
            runner, pre = sys.modules.get("portcheck.runner"), sys.modules.get("portcheck.precompile")
            if runner is not None and pre is not None and hasattr(runner, "time_case") and hasattr(pre, "ahead"):
                _done.append(True)
                try:
                    _install(runner, pre)
                except Exception as exc:   # a diagnostic never stops the run
                    _log(ev="trace-failed", error=repr(exc))
        return module

    builtins.__import__ = _hooked
