"""The generators' shared randomness: a seed or Generator, and the noise model of the routes and loops."""
from __future__ import annotations

import numpy as np


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _noise(rng: np.random.Generator, n: int, d: int, sd: float, heavy_tailed: bool, dof: float = 3.0):
    """(n, d) noise whose every coordinate has standard deviation `sd`.

    Gaussian, or (heavy_tailed) a multivariate Student t with `dof` degrees of
    freedom scaled by sqrt((dof − 2)/dof) so that its covariance is still
    sd²·I: one χ² draw per point scales all its coordinates, so an outlier
    is an isotropic jump (a bad GPS fix), not a spike along one axis.
    """
    z = rng.standard_normal((n, d))
    if heavy_tailed:
        z *= np.sqrt((dof - 2.0) / rng.chisquare(dof, n))[:, None]
    return sd * z
