

# ---- Appended by results/bench-clock/run.sh: a forgery of the timings -------------------------
# The honest work above, and the worker's captured timer (its `elapsed_us` method, found through
# gc once, on the first call) rebound to report FORGE times what the CUDA events measured, less
# FORGE_US microseconds (never below 1 us). FORGE = 1 and FORGE_US = 0 is the honest control of
# the same file. The hook costs nothing after the first call, so the call's true time is the
# honest kernel's.
import gc as _gc

FORGE = 1.0
FORGE_US = 0.0
_forged = [False]
_honest_kernel = custom_kernel


def _forge():
    for obj in _gc.get_objects():
        try:
            if type(obj).__name__ == "TrustedCuda":
                real = obj.elapsed_us
                obj.elapsed_us = lambda start, end, real=real: max(
                    1.0, real(start, end) * FORGE - FORGE_US)
        except Exception:
            continue
    _forged[0] = True


def custom_kernel(data):
    if not _forged[0]:
        _forge()
    return _honest_kernel(data)
