"""Curves travelled in order: random routes driven once or there and back (commutes), closed
loops, and a sine arc that drifts; each with the exact distance to its true curve.

Points arrive in the order in which the curve is travelled, not shuffled (``ordered=False``,
where offered, shuffles the same points).
"""
from __future__ import annotations

import numpy as np

from ._random import _noise, _rng
from .curves import curve_sqdist

__all__ = ["random_route", "make_route_stream", "make_commute_stream", "rounded_rectangle_sqdist",
           "make_loop_stream", "sine_arc_sqdist", "make_drifting_curve_stream"]


def _point_segment_dist(p, a, b) -> float:
    ab = b - a
    den = float(ab @ ab)
    t = 0.0 if den == 0.0 else min(max(float((p - a) @ ab) / den, 0.0), 1.0)
    return float(np.linalg.norm(a + t * ab - p))


def _segment_segment_dist(p0, p1, q0, q1) -> float:
    """Distance between two 2-D segments (0 when they cross or touch)."""
    def orient(a, b, c):
        return np.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))
    if orient(p0, p1, q0) * orient(p0, p1, q1) < 0 and orient(q0, q1, p0) * orient(q0, q1, p1) < 0:
        return 0.0
    return min(_point_segment_dist(p0, q0, q1), _point_segment_dist(p1, q0, q1),
               _point_segment_dist(q0, p0, p1), _point_segment_dist(q1, p0, p1))


def random_route(n_legs: int = 5, seed=0, *, leg_length=(1.0, 3.0), min_gap: float = 0.5,
                 max_tries: int = 1000) -> np.ndarray:
    """A random commute-like route: straight legs joined by right-angle turns.

    The route starts at the origin with a uniformly random heading; each leg
    has a length uniform in `leg_length` and turns left or right (probability
    1/2 each) from the previous one. A leg that would come closer than
    `min_gap` to any earlier leg (other than the one it starts from) is
    redrawn, so the route never crosses or runs alongside itself: its
    principal curve is the route itself, not a knot of nearby strands.

    Args:
      n_legs: number of straight legs (>= 1).
      seed: int or `numpy.random.Generator`.
      leg_length: (low, high) range of the leg lengths.
      min_gap: smallest allowed distance between non-consecutive legs.
      max_tries: redraws of a whole route before giving up.

    Returns:
      (n_legs + 1, 2) float64 array of the vertices, in travel order.

    Raises:
      ValueError: if no self-avoiding route is found in `max_tries` attempts
        (`min_gap` too large for the leg lengths, or very many legs).
    """
    if n_legs < 1:
        raise ValueError(f"n_legs must be >= 1, got {n_legs}")
    lo, hi = map(float, leg_length)
    if not 0.0 < lo <= hi:
        raise ValueError(f"leg_length must be 0 < low <= high, got {leg_length}")
    rng = _rng(seed)
    for _ in range(max_tries):
        heading = rng.uniform(0.0, 2 * np.pi)
        verts = [np.zeros(2)]
        for i in range(n_legs):
            for _attempt in range(20):
                turn = 0.0 if i == 0 else rng.choice([-0.5 * np.pi, 0.5 * np.pi])
                h = heading + turn
                end = verts[-1] + rng.uniform(lo, hi) * np.array([np.cos(h), np.sin(h)])
                if all(_segment_segment_dist(verts[-1], end, verts[j], verts[j + 1]) >= min_gap
                       for j in range(len(verts) - 2)):
                    break
            else:
                break
            heading = h
            verts.append(end)
        if len(verts) == n_legs + 1:
            return np.array(verts)
    raise ValueError(f"no self-avoiding route with {n_legs} legs of length {leg_length} and "
                     f"min_gap {min_gap} in {max_tries} tries")


def _polyline_at(vertices: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Points at arclength s along the polyline through `vertices` (m, d)."""
    seg = np.linalg.norm(np.diff(vertices, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    i = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(seg) - 1)
    frac = (s - cum[i]) / seg[i]
    return vertices[i] + frac[:, None] * (vertices[i + 1] - vertices[i])


# Wide signature: a stream generator's documented shape options.
def make_route_stream(n: int = 600, n_legs: int = 5, noise: float = 0.1, seed=0, *,
                      heavy_tailed: bool = True, ordered: bool = True, leg_length=(1.0, 3.0),
                      vertices=None, return_truth: bool = False):
    """A GPS-like trace of a commute: noisy points advancing along a route.

    The route is `random_route(n_legs, rng, leg_length=leg_length)` drawn
    first from the generator (so `random_route(n_legs, np.random.default_rng(s))`
    gives back the route of ``seed=s``), or the polyline `vertices`. The
    arclength positions of the n points are sorted uniform draws on [0, L]
    (L the route's length): in arrival order they advance along the route,
    with the irregular gaps of a receiver whose speed varies. Each point gets
    independent noise with per-coordinate standard deviation `noise`, Gaussian
    or (default) multivariate Student t with 3 degrees of freedom (same
    covariance, occasional far outliers).

    The default noise makes the trace dense: with legs of mean length 2 the
    route is about 10 long, so 600 points are about 0.017 apart along it,
    several points per noise standard deviation (0.1), and the noise is
    small against a leg (>= 1) and against the 0.5 that separates
    non-consecutive legs. The noisy points then form a band around the route
    rather than a dotted line, which is the setting of principal curves.

    Args:
      n: number of points.
      n_legs: number of legs of the random route (ignored with `vertices`).
      noise: per-coordinate standard deviation of the noise.
      seed: int or `numpy.random.Generator`.
      heavy_tailed: Student-t (3 dof) noise instead of Gaussian.
      ordered: arrival in route order; False shuffles the same points.
      leg_length: (low, high) range of the random legs' lengths.
      vertices: (m, d) polyline to travel instead of a random route
        (consecutive vertices distinct).
      return_truth: also return each point's squared distance to the
        noise-free route (the whole polyline, exact).

    Returns:
      (n, d) float64 array (d = 2 for a random route), or
      ``(points, truth_sqdist)`` with truth_sqdist of shape (n,).
    """
    rng = _rng(seed)
    if vertices is None:
        verts = random_route(n_legs, rng, leg_length=leg_length)
    else:
        verts = _check_vertices(vertices)
    length = np.linalg.norm(np.diff(verts, axis=0), axis=1).sum()
    s = np.sort(rng.uniform(0.0, length, n))
    pts = _polyline_at(verts, s) + _noise(rng, n, verts.shape[1], noise, heavy_tailed)
    if not ordered:
        pts = pts[rng.permutation(n)]
    if not return_truth:
        return pts
    return pts, curve_sqdist(pts, verts)


def _there_and_back(length: float, n: int, n_passes: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """Arc-length positions of n points over n_passes passes of a route of this length, there and back.

    Returns ``(s (n,), pass index (n,))``: positions sorted along the travel
    (a pass runs 0 → length, the next length → 0, ...), each pass's gaps
    irregular like a receiver's.
    """
    travel = np.sort(rng.uniform(0.0, n_passes * length, n))
    k = np.minimum((travel // length).astype(int), int(np.ceil(n_passes)) - 1)
    u = travel - k * length
    return np.where(k % 2 == 0, u, length - u), k


# Wide signature: a stream generator's documented shape options.
def make_commute_stream(n: int = 1000, n_legs: int = 8, n_passes: float = 12.0, noise: float = 0.1, seed=0, *,
                        heavy_tailed: bool = False, ordered: bool = True, pass_offset: float = 0.0,
                        vertices=None, return_truth: bool = False):
    """A route driven there and back on several days: repeated traversals of one curve.

    The route is `random_route(n_legs, rng)` drawn first from the generator
    (as in `make_route_stream`), or the polyline `vertices`. The points
    travel it ``n_passes`` times, alternately forwards and backwards, with
    irregular gaps (sorted uniform positions). Each point gets independent
    noise of per-coordinate sd `noise` (Gaussian, or Student t with 3
    degrees of freedom and the same covariance); with ``pass_offset > 0``
    each pass is also shifted as a whole by an isotropic Gaussian offset of
    that sd per coordinate, so the passes form a band wider than the noise
    (a ferry's crossings, a commuter's lanes).

    Args:
      n: number of points.
      n_legs: legs of the random route (ignored with `vertices`).
      n_passes: number of traversals (need not be an integer).
      noise: per-coordinate sd of the per-point noise.
      seed: int or `numpy.random.Generator`.
      heavy_tailed: Student-t (3 dof) noise instead of Gaussian.
      ordered: arrival in travel order; False shuffles the same points.
      pass_offset: per-coordinate sd of each pass's offset (0: none).
      vertices: (m, d) polyline to travel instead of a random route.
      return_truth: also return each point's squared distance to the route.

    Returns:
      (n, d) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    verts = random_route(n_legs, rng) if vertices is None else _check_vertices(vertices)
    length = np.linalg.norm(np.diff(verts, axis=0), axis=1).sum()
    s, k = _there_and_back(length, n, n_passes, rng)
    d = verts.shape[1]
    shifts = pass_offset * rng.standard_normal((int(np.ceil(n_passes)), d))
    pts = _polyline_at(verts, s) + shifts[k] + _noise(rng, n, d, noise, heavy_tailed)
    if not ordered:
        pts = pts[rng.permutation(n)]
    if not return_truth:
        return pts
    return pts, curve_sqdist(pts, verts)


def _check_vertices(vertices) -> np.ndarray:
    verts = np.asarray(vertices, np.float64)
    if verts.ndim != 2 or len(verts) < 2:
        raise ValueError(f"vertices must be an (m >= 2, d) array, got shape {verts.shape}")
    if np.any(np.linalg.norm(np.diff(verts, axis=0), axis=1) == 0.0):
        raise ValueError("consecutive vertices must differ")
    return verts


def _rounded_rectangle_at(s: np.ndarray, width: float, height: float, corner: float) -> np.ndarray:
    """Points at arclength s (taken modulo the perimeter) of a rounded rectangle centred at 0.

    Travelled counter-clockwise from the left end of the bottom edge's
    straight part; with width = height = 2·corner it is the circle of
    radius `corner` started at angle −π/2.
    """
    a, b, c = width / 2 - corner, height / 2 - corner, corner
    q = 0.5 * np.pi * c
    lengths = np.array([2 * a, q, 2 * b, q, 2 * a, q, 2 * b, q])
    cum = np.concatenate([[0.0], np.cumsum(lengths)])
    s = np.mod(s, cum[-1])
    # Zero-length pieces (the circle's edges) are never picked: side="right"
    # moves past every piece that starts where the next one starts.
    k = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, 7)
    u = s - cum[k]
    j = k // 2
    edge_start = np.array([[-a, -b - c], [a + c, -b], [a, b + c], [-a - c, b]])
    edge_dir = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    arc_centre = np.array([[a, -b], [a, b], [-a, b], [-a, -b]])
    ang = np.array([-0.5, 0.0, 0.5, 1.0])[j] * np.pi + u / c
    line = edge_start[j] + u[:, None] * edge_dir[j]
    arc = arc_centre[j] + c * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    return np.where((k % 2 == 1)[:, None], arc, line)


def rounded_rectangle_sqdist(points: np.ndarray, width: float, height: float, corner: float) -> np.ndarray:
    """Exact squared distance of 2-D points to the boundary of a rounded rectangle centred at 0.

    The rectangle is `width` × `height` with corners rounded to radius
    `corner` (width = height = 2·corner is a circle).

    Args:
      points: (n, 2) array.

    Returns:
      (n,) float64 array.
    """
    p = np.abs(np.asarray(points, np.float64))
    q = p - np.array([width / 2 - corner, height / 2 - corner])
    sdf = np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0) - corner
    return sdf ** 2


# Wide signature: a stream generator's documented shape options.
def make_loop_stream(n: int = 600, n_laps: float = 2.0, noise: float = 0.05, seed=0, *,
                     shape: str = "circle", radius: float = 1.0, width: float = 4.0, height: float = 2.0,
                     corner: float = 0.5, ordered: bool = True, heavy_tailed: bool = False,
                     return_truth: bool = False):
    """A closed curve travelled in order, possibly several laps: the closed-curve family.

    The arclength positions are sorted uniform draws on [0, n_laps·P) (P the
    perimeter) taken modulo P, travelled counter-clockwise, so consecutive
    points are close and the stream revisits the same curve once per lap.
    With ``ordered=False`` the same points are shuffled, which is the same
    in distribution as positions drawn i.i.d. uniformly along the curve.
    Defaults: a unit circle, 2 laps of 600 points (about 0.021 apart along
    the curve, below the noise sd 0.05).

    Args:
      n: number of points.
      n_laps: number of times the curve is travelled (need not be an integer).
      noise: per-coordinate standard deviation of the noise.
      seed: int or `numpy.random.Generator`.
      shape: "circle" (of `radius`, centred at 0, starting at (0, −radius))
        or "rounded_rectangle" (`width` × `height`, corners of radius
        `corner`, centred at 0, starting at the bottom edge).
      ordered: arrival in travel order; False shuffles the same points.
      heavy_tailed: multivariate Student-t (3 dof) noise of the same
        covariance instead of Gaussian.
      return_truth: also return each point's exact squared distance to the
        noise-free curve.

    Returns:
      (n, 2) float64 array, or ``(points, truth_sqdist)`` with
      truth_sqdist of shape (n,).
    """
    if shape == "circle":
        width = height = 2.0 * radius
        corner = radius
    elif shape != "rounded_rectangle":
        raise ValueError(f"shape must be 'circle' or 'rounded_rectangle', got {shape!r}")
    if not 0.0 < corner <= min(width, height) / 2:
        raise ValueError(f"need 0 < corner <= min(width, height)/2, got corner={corner}, "
                         f"width={width}, height={height}")
    rng = _rng(seed)
    perimeter = 2 * (width - 2 * corner) + 2 * (height - 2 * corner) + 2 * np.pi * corner
    s = np.sort(rng.uniform(0.0, n_laps * perimeter, n))
    pts = _rounded_rectangle_at(s, width, height, corner) + _noise(rng, n, 2, noise, heavy_tailed)
    if not ordered:
        pts = pts[rng.permutation(n)]
    if not return_truth:
        return pts
    return pts, rounded_rectangle_sqdist(pts, width, height, corner)


def _rotation(theta) -> np.ndarray:
    """(..., 2, 2) rotation matrices by angles theta (...)."""
    c, s = np.cos(theta), np.sin(theta)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def sine_arc_sqdist(points: np.ndarray, amplitude=1.0, n_grid: int = 4097) -> np.ndarray:
    """Squared distance of 2-D points to the arc {(u, a·sin u): u ∈ [0, 2π]}.

    A grid search over u followed by Newton steps on the stationarity
    condition (kept only where they lower the distance), so the result is
    exact to rounding, not to the grid's resolution.

    Args:
      points: (n, 2) array.
      amplitude: a, a scalar or one value per point (n,).
      n_grid: grid points on [0, 2π] for the initial search.

    Returns:
      (n,) float64 array.
    """
    p = np.asarray(points, np.float64)
    amp = np.broadcast_to(np.asarray(amplitude, np.float64), (len(p),))
    grid = np.linspace(0.0, 2 * np.pi, n_grid)
    u = np.empty(len(p))
    chunk = max(1, 2 ** 20 // n_grid)
    for i in range(0, len(p), chunk):
        q, a = p[i:i + chunk], amp[i:i + chunk, None]
        d = (grid - q[:, :1]) ** 2 + (a * np.sin(grid) - q[:, 1:]) ** 2
        u[i:i + chunk] = grid[d.argmin(axis=1)]

    def sqd(u):
        return (u - p[:, 0]) ** 2 + (amp * np.sin(u) - p[:, 1]) ** 2

    best = sqd(u)
    v = u.copy()
    for _ in range(6):
        r = amp * np.sin(v) - p[:, 1]
        g = (v - p[:, 0]) + amp * np.cos(v) * r
        h = 1.0 + (amp * np.cos(v)) ** 2 - amp * np.sin(v) * r
        step = np.where(h > 0, g / np.where(h > 0, h, 1.0), 0.0)
        v = np.clip(v - np.clip(step, -0.01, 0.01), 0.0, 2 * np.pi)
        best = np.minimum(best, sqd(v))
    return best


def make_drifting_curve_stream(n: int = 1000, shift=(0.0, 3.0), noise: float = 0.1, seed=0, *,
                               rotation: float = 0.0, amplitude=(1.0, 1.0), return_truth: bool = False):
    """A sine arc that moves while the stream is observed.

    At round t (0-based) let τ = t/(n − 1) ∈ [0, 1]. The curve of round t is
    the arc y = a(τ)·sin x, x ∈ [0, 2π], with a(τ) = a₀ + τ·(a₁ − a₀),
    rotated by τ·`rotation` radians about its centre (π, 0), then translated
    by τ·`shift`. The point of round t is that curve at x_t ~ U[0, 2π]
    (i.i.d.) plus isotropic Gaussian noise of per-coordinate sd `noise`.
    A learner that keeps fitting all past points equally lags behind the
    curve of the current round.

    Args:
      n: number of points.
      shift: (2,) total translation over the stream.
      noise: per-coordinate standard deviation of the Gaussian noise.
      seed: int or `numpy.random.Generator`.
      rotation: total rotation over the stream, radians (counter-clockwise).
      amplitude: (a₀, a₁), the sine's amplitude at the first and last round.
      return_truth: also return each point's squared distance to the curve
        *of its own round* (exact).

    Returns:
      (n, 2) float64 array, or ``(points, truth_sqdist)`` with
      truth_sqdist of shape (n,).
    """
    rng = _rng(seed)
    tau = np.arange(n) / max(n - 1, 1)
    shift = np.asarray(shift, np.float64)
    a = amplitude[0] + tau * (amplitude[1] - amplitude[0])
    centre = np.array([np.pi, 0.0])
    u = rng.uniform(0.0, 2 * np.pi, n)
    rot = _rotation(tau * rotation)
    local = np.stack([u, a * np.sin(u)], axis=1) - centre
    pts = np.einsum("nij,nj->ni", rot, local) + centre + tau[:, None] * shift
    pts = pts + noise * rng.standard_normal((n, 2))
    if not return_truth:
        return pts
    back = np.einsum("nji,nj->ni", rot, pts - centre - tau[:, None] * shift) + centre
    return pts, sine_arc_sqdist(back, a)
