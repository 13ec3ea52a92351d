"""Quantiles of the χ² and normal distributions that the learners' noise and drift tests use.

One convention: degrees of freedom first, then the probability. `chi2_upper` is traced (PACBO's
drift test, provisional centres and split guard, whose levels are parameters); `chi2_lower_wh`
and `normal_ppf` are Python floats computed when a round is traced (slpc's noise scale, whose
defaults were calibrated with the Wilson–Hilferty form: the exact median of χ²_2 is 1.3 % lower).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaincc, gammaln, ndtri

__all__ = ["chi2_upper", "chi2_lower_wh", "normal_ppf"]

Array = jax.Array


def chi2_upper(df: int, tail) -> Array:
    """Upper quantile of χ²_df at tail probability `tail`; +inf at tail 0.

    Closed forms for df = 1 (z² at tail/2) and df = 2 (−2·log tail); for
    df ≥ 3 Newton's method on the regularised incomplete gamma function from
    the Wilson–Hilferty approximation.

    Args:
      df: degrees of freedom (static).
      tail: scalar tail probability in [0, 1) (traced).

    Returns:
      Scalar q with P(χ²_df > q) ≈ tail.
    """
    tail = jnp.asarray(tail)
    safe = jnp.where(tail > 0, tail, 0.5)
    if df == 1:
        q = ndtri(safe / 2.0) ** 2             # (−z)²: no 1 − tail rounding
    elif df == 2:
        q = -2.0 * jnp.log(safe)
    else:
        a = 2.0 / (9.0 * df)
        q = df * jnp.maximum(1.0 - a - ndtri(safe) * jnp.sqrt(a), 0.5) ** 3
        # Three Newton steps on P(χ²_df > q) = tail (Wilson–Hilferty starts within a few %).
        h = df / 2.0
        for _ in range(3):
            f = gammaincc(h, q / 2.0) - safe
            dens = jnp.exp((h - 1.0) * jnp.log(q / 2.0) - q / 2.0 - gammaln(h)) / 2.0
            q = jnp.maximum(q + f / dens, 1e-3)
    return jnp.where(tail > 0, q, jnp.inf)


def normal_ppf(p: float) -> float:
    """Inverse standard normal CDF by bisection on math.erf (a Python float, at trace time)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def chi2_lower_wh(df: int, q: float) -> float:
    """q-quantile of χ²_df, P(χ²_df ≤ x) = q, by Wilson–Hilferty (exact for df = 1; a Python float)."""
    if df == 1:
        return float(np.square(normal_ppf(0.5 + q / 2)))
    zq = normal_ppf(q)
    return df * (1 - 2 / (9 * df) + zq * math.sqrt(2 / (9 * df))) ** 3
