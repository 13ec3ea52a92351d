"""Named synthetic curve families, each stream with its true curve, noise and noise-free points."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .curves import cubic_curve, helix_curve, make_cubic_stream, make_helix_stream, make_table2_stream, table2_curve
from .routes import (_rotation, _rounded_rectangle_at, make_commute_stream, make_drifting_curve_stream,
                     make_loop_stream, make_route_stream, random_route)

__all__ = ["CurveStream", "CURVE_FAMILIES", "curve_family"]


class CurveStream(NamedTuple):
    """A synthetic curve stream with its truth (`curve_family`).

    Attributes:
      points: (n, d) the stream, in arrival order.
      curve: (m, d) the true curve as a polyline (densely sampled where it is
        smooth; closed curves repeat their first vertex): at the end of the
        stream for a source that moves.
      noise: the per-coordinate standard deviation of the noise, σ.
      clean: (n, d) the noise-free point that generated each point, so that
        ``((points - clean)[t0:] ** 2).sum()`` is the noise energy.
    """

    points: np.ndarray
    curve: np.ndarray
    noise: float
    clean: np.ndarray


def _dense(fn, lo, hi, m=2001):
    return fn(np.linspace(lo, hi, m))


def _loop_curve(shape, m=2001, **kw):
    if shape == "circle":
        r = kw.get("radius", 1.0)
        a = np.linspace(0.0, 2 * np.pi, m)
        return np.stack([r * np.cos(a), r * np.sin(a)], 1)
    w, h, c = kw.get("width", 4.0), kw.get("height", 2.0), kw.get("corner", 0.5)
    perim = 2 * (w - 2 * c) + 2 * (h - 2 * c) + 2 * np.pi * c
    return _rounded_rectangle_at(np.linspace(0.0, perim, m), w, h, c)


def _drift_curve(shift=(0.0, 3.0), rotation=0.0, amplitude=(1.0, 1.0), m=2001):
    u = np.linspace(0.0, 2 * np.pi, m)
    centre = np.array([np.pi, 0.0])
    local = np.stack([u, amplitude[1] * np.sin(u)], 1) - centre
    return local @ _rotation(rotation).T + centre + np.asarray(shift, np.float64)


def _with_clean(gen, seed, curve, noise, **kw):
    pts = gen(seed=seed, noise=noise, **kw)
    clean_kw = dict(kw, noise=0.0)
    if "pass_offset" in kw:
        clean_kw["pass_offset"] = 0.0
    return CurveStream(pts, curve, float(noise), gen(seed=seed, **clean_kw))


def _route_family(n_legs, ordered, heavy, passes=None, pass_offset=0.0, noise=0.1):
    def make(seed, n):
        route = random_route(n_legs, np.random.default_rng(seed))
        if passes is None:
            return _with_clean(make_route_stream, seed, route, noise, n=n, n_legs=n_legs, ordered=ordered,
                               heavy_tailed=heavy)
        return _with_clean(make_commute_stream, seed, route, noise, n=n, n_legs=n_legs, n_passes=passes,
                           ordered=ordered, heavy_tailed=heavy, pass_offset=pass_offset)
    return make


CURVE_FAMILIES = {
    # stationary, points i.i.d. along the curve
    "cubic": lambda seed, n: CurveStream(*_cubic_parts(seed, n)),
    "table2": lambda seed, n: _with_clean(make_table2_stream, seed, _dense(table2_curve, 0.0, 2 * np.pi), 0.0575, n=n),
    "helix": lambda seed, n: _with_clean(make_helix_stream, seed, _dense(helix_curve, 0.0, 3 * np.pi), 0.05, n=n),
    "circle": lambda seed, n: _with_clean(make_loop_stream, seed, _loop_curve("circle", radius=3.0), 0.077, n=n,
                                          ordered=False, radius=3.0),
    # a route driven once: in order or shuffled, Gaussian or heavy-tailed noise
    "route": _route_family(5, True, True),
    "route_shuffled": _route_family(5, False, True),
    "long_route": _route_family(14, True, False),
    "long_route_shuffled": _route_family(14, False, False),
    # a route driven there and back, many times
    "commute": _route_family(8, True, False, passes=12),
    "commute_t3": _route_family(8, True, True, passes=12),
    "commute_shuffled": _route_family(8, False, False, passes=12),
    # closed curves travelled in order
    "loop": lambda seed, n: _with_clean(make_loop_stream, seed, _loop_curve("rounded_rectangle"), 0.05, n=n,
                                        shape="rounded_rectangle", n_laps=1.5),
    "circle_in_order": lambda seed, n: _with_clean(make_loop_stream, seed, _loop_curve("circle"), 0.05, n=n),
    # a source that moves (the curve is the last round's)
    "drift": lambda seed, n: _with_clean(make_drifting_curve_stream, seed, _drift_curve(), 0.1, n=n),
    "drift_rotating": lambda seed, n: _with_clean(make_drifting_curve_stream, seed,
                                                  _drift_curve((2.0, 0.0), np.pi / 4), 0.1, n=n, shift=(2.0, 0.0),
                                                  rotation=np.pi / 4),
}
"""Named synthetic curve families: name -> ``f(seed, n) -> CurveStream`` (see `curve_family`)."""


def _cubic_parts(seed, n):
    rng_pts = make_cubic_stream(n, seed=seed)
    x = rng_pts[:, 0]
    return rng_pts, _dense(lambda u: np.stack([u, cubic_curve(u)], 1), 0.0, 10.0), 0.094, np.stack(
        [x, cubic_curve(x)], 1)


def curve_family(name: str, seed=0, n: int = 1000) -> CurveStream:
    """One stream of a named synthetic curve family, with its true curve and noise.

    Families (`CURVE_FAMILIES`): ``cubic``, ``table2`` (6-D), ``helix`` (3-D),
    ``circle`` (radius 3), points i.i.d. along the curve; ``route`` (5 legs,
    Student-t noise) and ``long_route`` (14 legs, Gaussian) driven once in
    order, and their ``_shuffled`` versions; ``commute`` (an 8-leg route
    driven 12 times there and back, Gaussian), ``commute_t3`` (Student-t
    noise), ``commute_shuffled``; ``loop`` (a rounded rectangle, 1.5 laps in
    order) and ``circle_in_order`` (2 laps); ``drift`` (a sine arc drifting
    +3 in y) and ``drift_rotating`` (+2 in x, rotating 45°), whose curve is
    the last round's.

    Args:
      name: a key of `CURVE_FAMILIES`.
      seed: int seed.
      n: number of points.

    Returns:
      `CurveStream`.
    """
    if name not in CURVE_FAMILIES:
        raise ValueError(f"unknown curve family {name!r}; known: {sorted(CURVE_FAMILIES)}")
    return CURVE_FAMILIES[name](seed, n)
