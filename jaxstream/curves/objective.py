"""slpc's objective: numeric parameters, the paper's constants, the noise price.

The paper's objective at round t is ``Σ_{s≤t} Δ(f, x_s) + (h(f) − z_f)/η_t``
with h(f) = c1·K + c2·ℓ + c3 and η_t from Theorem 2 (``penalty="theory"``).
It is in the data's units and measured from the origin, so the same stream
in other units gives another curve, and with fixed multipliers the curve
either never grows or interpolates some streams.

The default objective works in standardised units (centre = mean of the
initial points, one isotropic scale = their RMS distance to it) and prices
complexity against the noise level σ̂² the history holds:

    Σ_w min(Δ(f, x), cap) + σ̂²·( h_scale·d·log(n)·K(f) + length_scale·n·ℓ(f)/s − z_scale·z_f )

with s the data's current spread (`tracking.extent`). The K term is BIC's
price of d free coordinates per vertex. The length term charges every point
σ̂²·length_scale per spread of line: a second pass of the line through a
band of points (a fold) gains a fraction of σ̂² on each point near it and
does not pay, while extending the line into data gains a squared distance on
every point it reaches. σ̂² is the scatter along the line
(`history.noise_level`), so a vertex is added only when it explains
structure, not noise. Every term is a squared distance: the objective is
equivariant by construction.

One point's loss is capped at κ·max(d − 1, 1)·σ̂² (κ = ``outlier_scale``,
`loss_cap`): noise Gaussian near the curve plus a flat background of
outliers, so that a stretch of curve must be paid for by several points it
brings close, not by one outlier or one lone event.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array


class Params(NamedTuple):
    """Numeric hyper-parameters of slpc (vmappable, differentiable leaves).

    Lengths are in *standardised* units (the data centred on the mean of the
    initial points and divided by their RMS distance to it), so the defaults
    mean the same thing for every stream. Zero for `R` or `L` means
    "automatic": resolved every round from the points the objective holds
    (`jaxstream.curves.tracking.extent`), so that they follow a stream that
    leaves the region of its first points.

    Attributes:
      delta: lattice spacing δ (standardised units; > 0).
      R: radius parameter of the theory (the standardised stream lies in
        B(0, √d·R)); ≥ 0. Auto (0): the largest norm of the stored points / √d.
        Only enters ``penalty="theory"`` and the automatic L.
      L: largest length of a line (standardised units); ≥ 0. Auto (0):
        max(0.1·p·d·R, 2·ℓ(f̂)) (the current line always feasible).
      h_scale: multiplier on the segment price (noise pricing: in units of
        σ̂²·d·log n; theory: on h(f)); > 0.
      length_scale: multiplier on the length price, σ̂²·n per unit of
        length measured in the data's current spread (noise pricing only);
        ≥ 0.
      eta_scale: multiplier on η_t (``penalty="theory"`` only); > 0.
      z_scale: multiplier on the Exp(1) perturbations (0: deterministic
        follow-the-penalised-leader); ≥ 0.
      epsilon: exploration probability per round, in [0, 1].
      outlier_scale: κ, the objective's loss of a point is capped at
        κ·max(d − 1, 1)·σ̂² (noise pricing; inf: the plain squared distance);
        > 0. See the module docstring.
      memory: τ, the forgetting time scale in rounds: a point of age a weighs
        exp(−a/τ) in the objective (`jaxstream.curves.tracking`). NaN
        (default): automatic, unlimited until the stream is seen to drift;
        inf: never forget (the paper's objective); a number ≥ 1: fixed.
    """

    delta: Array
    R: Array
    L: Array
    h_scale: Array
    length_scale: Array
    eta_scale: Array
    z_scale: Array
    epsilon: Array
    outlier_scale: Array
    memory: Array


# How the defaults were chosen: docs/internals/slpc.md, section "Defaults".
DEFAULT_H_SCALE = 0.5
DEFAULT_LENGTH_SCALE = 0.3
DEFAULT_DELTA = 0.01
DEFAULT_OUTLIER_SCALE = 36.0


# Wide signature: one keyword per hyper-parameter of `Params`.
def default_params(*, delta=DEFAULT_DELTA, R=0.0, L=0.0, h_scale=DEFAULT_H_SCALE,
                   length_scale=DEFAULT_LENGTH_SCALE, eta_scale=1.0, z_scale=1.0, epsilon=0.05,
                   outlier_scale=DEFAULT_OUTLIER_SCALE, memory=float("nan"), dtype=None) -> Params:
    """Default numeric parameters (all lengths in standardised units).

    With ``penalty="theory"`` use ``h_scale=1, eta_scale=1`` for the paper's
    constants.
    """
    dtype = dtype or jnp.zeros(()).dtype
    a = lambda v: jnp.asarray(v, dtype)
    return Params(a(delta), a(R), a(L), a(h_scale), a(length_scale), a(eta_scale), a(z_scale), a(epsilon),
                  a(outlier_scale), a(memory))


class Constants(NamedTuple):
    """The theory's constants (Lemma 3 and Theorem 2 of the paper)."""

    c0: Array
    c1: Array
    c2: Array
    c3: Array


def theoretical_constants(p: int, d: int, delta, R) -> Constants:
    """c0 = d(2R+δ)², c1 = ln(8 p e V_d) + 3 d^{3/2} − d, c2 = ln2/(√d δ) + d/δ,
    c3 = d ln(√d (2R+δ)/δ), with V_d = π^{d/2}/Γ(d/2+1)."""
    delta = jnp.asarray(delta)
    R = jnp.asarray(R, delta.dtype)
    log_vd = (d / 2) * math.log(math.pi) - math.lgamma(d / 2 + 1)
    c1 = math.log(8 * p * math.e) + log_vd + 3 * d ** 1.5 - d
    c2 = math.log(2) / (math.sqrt(d) * delta) + d / delta
    c3 = d * jnp.log(math.sqrt(d) * (2 * R + delta) / delta)
    c0 = d * (2 * R + delta) ** 2
    return Constants(c0, jnp.asarray(c1, delta.dtype), c2, c3)


def penalty(n_segments, length, p: int, d: int, params: Params) -> Array:
    """h(f) = c1·K(f) + c2·ℓ(f) + c3 (theoretical constants, before h_scale)."""
    c = theoretical_constants(p, d, params.delta, params.R)
    return c.c1 * n_segments + c.c2 * length + c.c3


def learning_rate(t, p: int, d: int, params: Params) -> Array:
    """η_t = eta_scale · sqrt((c1·p + c2·L + c3) / (c0·(e−1)·t)) (Theorem 2)."""
    c = theoretical_constants(p, d, params.delta, params.R)
    t = jnp.maximum(jnp.asarray(t, params.delta.dtype), 1.0)
    return params.eta_scale * jnp.sqrt((c.c1 * p + c.c2 * params.L + c.c3) / (c.c0 * (math.e - 1) * t))


def noise_price(n_segments, length, z, sigma2, n, d: int, params: Params) -> Array:
    """σ̂²·(h_scale·d·log(n)·K + length_scale·n·ℓ − z_scale·z): the default price.

    Args:
      n_segments, length, z: (C,) per candidate (length in the unit the
        length price is measured in; see `price`).
      sigma2: the per-coordinate residual variance σ̂² (scalar).
      n: number of points the objective stands for (scalar).
      d: dimension.
      params: resolved `Params`.
    """
    logn = jnp.log(jnp.maximum(jnp.asarray(n, sigma2.dtype), 2.0))
    n = jnp.asarray(n, sigma2.dtype)
    return sigma2 * (params.h_scale * d * logn * n_segments + params.length_scale * n * length
                     - params.z_scale * z)


def theory_price(n_segments, length, z, t, p: int, d: int, params: Params) -> Array:
    """(h_scale·h(f) − z_scale·z)/η_t: the paper's price (``penalty="theory"``)."""
    h = penalty(n_segments, length, p, d, params)
    return (params.h_scale * h - params.z_scale * z) / learning_rate(t, p, d, params)


# Wide signature: the penalty's terms, each a traced array of the round.
def price(penalty: str, n_segments, length, z, sigma2, n, p: int, d: int, params: Params, spread=1.0) -> Array:
    """The price minus the perturbation of candidate lines: `noise_price` for
    ``penalty="noise"`` (lengths in units of `spread`, the data's current spread),
    `theory_price` (with t = n) for ``"theory"``."""
    if penalty == "noise":
        return noise_price(n_segments, length / spread, z, sigma2, n, d, params)
    return theory_price(n_segments, length, z, n, p, d, params)


def loss_cap(sigma2, d: int, params: Params, penalty: str) -> Array:
    """The largest loss one point adds to the round's objective:
    κ·max(d − 1, 1)·σ̂² (κ = ``outlier_scale``; no cap with the theory price).

    The objective's loss of a point is min(Δ(f, x), cap): the negative
    log-likelihood, up to constants, of noise that is Gaussian near the curve
    with a flat background of outliers far from it. With the plain squared
    distance one isolated point at distance D pays for any segment cheaper
    than D², so the curve runs chords across empty regions to single events
    (the seismic stream); capped, a new stretch of curve must be paid for by
    several points that it brings within the noise band. Points near the
    curve (residuals ≈ σ̂²·χ²_{d−1}) are not affected. The reported loss
    (`Info.loss`) is the plain squared distance.
    """
    if penalty != "noise":
        return jnp.asarray(jnp.inf, sigma2.dtype)
    # σ̂² floored at the lattice resolution δ² (the line cannot tell noise
    # below it from the curve): on noise-free or repeated points σ̂² is 0 and
    # a cap of 0 would make every candidate tie at 0 — the line would freeze.
    # κ = inf is no cap (inf·0 would be NaN).
    cap = params.outlier_scale * max(d - 1, 1) * jnp.maximum(sigma2, params.delta ** 2)
    return jnp.where(jnp.isinf(params.outlier_scale), jnp.inf, cap)
