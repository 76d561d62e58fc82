"""The tolerance for a float32 log-likelihood computed on two paths whose kernels differ.

A continuation's log-likelihood is a sum over its tokens, each through every layer, so two
paths that block their matrix products differently disagree by a part of its size. Measured:
our padded batches vs lm-eval's batch size 1 on one CPU, up to 6.1e-5 absolute; MKL's AVX2
path vs AVX-512 (``MKL_ENABLE_INSTRUCTIONS=AVX2``), up to 1.0e-5 of the size (4.4e-4 at -44);
two torchrun ranks (1 thread, own padding) vs one process (2 threads) on CI, 1.5e-5 of the
size (2.5e-4 at -16.4). A frozen lm-eval fixture compared on another machine can meet the
last two at once (2.5e-5 of the size): ``LOGLIK_ABS + LOGLIK_REL * |x|`` leaves 4x room over
that, while a real fault (a token missing or shifted, a bf16 rounding, a wrong prompt) moves a
log-likelihood by 1e-2 or more.
"""

LOGLIK_ABS = 1e-4
LOGLIK_REL = 1e-4


def loglik_slack(reference):
    """The allowed |difference| from ``reference`` (a number or a numpy array)."""
    return LOGLIK_ABS + LOGLIK_REL * abs(reference)


def assert_tree_close(a, b, rel: float, abs_: float, path: str = "") -> None:
    """Equal nested dicts/lists; floats within ``max(rel * max(|a|, |b|), abs_)``, all else exactly."""
    import math

    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=rel, abs_tol=abs_), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_tree_close(a[k], b[k], rel, abs_, f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_tree_close(x, y, rel, abs_, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"
