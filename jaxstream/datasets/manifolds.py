"""Surfaces for the embedding learners: the S-curve (the Swiss roll is
``jaxstream.embedding.datasets.make_swiss_roll``)."""
from __future__ import annotations

import numpy as np

__all__ = ["make_s_curve"]


def make_s_curve(n_samples: int = 100, *, noise: float = 0.0, random_state=None, sort_by_t: bool = False):
    """The S-curve data set, drawing the same numbers as scikit-learn's.

    For the same arguments this returns what
    ``sklearn.datasets.make_s_curve`` returns (no scikit-learn needed):
    t = 3π(U − 1/2), points (sin t, 2V, sign(t)(cos t − 1)) with U, V uniform
    on [0, 1), plus Gaussian noise, all drawn from a legacy
    ``numpy.random.RandomState``.

    Args:
      n_samples: number of points.
      noise: standard deviation of the Gaussian noise added to each coordinate.
      random_state: None (NumPy's global RandomState), an int seed, or a
        ``numpy.random.RandomState``.
      sort_by_t: return the points ordered by the curve parameter t (the
        landmark paper's stream order).

    Returns:
      ``(X, t)``: (n_samples, 3) float64 points and their (n_samples,) curve
      parameter.
    """
    if random_state is None:
        rs = np.random.mtrand._rand
    elif isinstance(random_state, np.random.RandomState):
        rs = random_state
    else:
        rs = np.random.RandomState(random_state)
    t = 3.0 * np.pi * (rs.uniform(size=(1, n_samples)) - 0.5)
    X = np.empty((n_samples, 3), dtype=np.float64)
    X[:, 0] = np.sin(t)
    X[:, 1] = 2.0 * rs.uniform(size=n_samples)
    X[:, 2] = np.sign(t) * (np.cos(t) - 1.0)
    X += noise * rs.standard_normal(size=(3, n_samples)).T
    t = t.reshape(n_samples)
    if sort_by_t:
        order = np.argsort(t, kind="stable")
        X, t = X[order], t[order]
    return X, t
