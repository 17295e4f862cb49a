"""Small dense solves that write into preallocated arrays (no allocation in a control tick).

numpy's public ``np.linalg.solve`` always allocates its result and wraps the LAPACK call in an
error-state context (about 3 us for a 6x6 system). The gufuncs underneath accept ``out=``; we use
them when this numpy has them and fall back to the public call (which allocates) otherwise.
Callers only pass symmetric positive definite (damped) matrices, so the LAPACK call cannot hit
a singular matrix; NaN inputs give NaN outputs, which the controllers catch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_solve_vec: Any
_solve_mat: Any
try:  # private but stable since numpy 1.8; checked by tests/test_impedance.py
    from numpy.linalg import _umath_linalg as _gufuncs

    _solve_vec = _gufuncs.solve1  # (m,m),(m)->(m)
    _solve_mat = _gufuncs.solve  # (m,m),(m,n)->(m,n)
except (ImportError, AttributeError):  # pragma: no cover - depends on the numpy build
    _solve_vec = _solve_mat = None


def solve_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Solve ``a @ x = b`` for x into ``out``; a (m, m), b and out (m,) or (m, n)."""
    fn = _solve_vec if b.ndim == 1 else _solve_mat
    if fn is None:  # pragma: no cover
        np.copyto(out, np.linalg.solve(a, b))
        return out
    return fn(a, b, out=out)
