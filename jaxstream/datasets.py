"""Data: the papers' synthetic streams and the real data the package ships.

Generators take a NumPy seed (or Generator) and return NumPy arrays in
arrival order, so that the same data feed the JAX learners and the NumPy
references of the tests.
"""
from __future__ import annotations

import csv
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = [
    "USGS_FILE", "SEISMIC_BOX", "cubic_curve", "make_cubic_stream", "true_curve_sqdist",
    "curve_sqdist", "table2_curve", "make_table2_stream", "helix_curve", "make_helix_stream",
    "Earthquakes", "load_earthquakes", "seismic_stream", "load_csv_points", "make_s_curve",
    "PACBO_MEANS", "random_route", "make_route_stream", "make_commute_stream",
    "rounded_rectangle_sqdist", "make_loop_stream", "sine_arc_sqdist", "make_drifting_curve_stream",
    "make_four_groups_stream", "make_drifting_clusters_stream", "make_ramp_clusters_stream",
    "nearest_past_point_loss", "last_points_oracle_loss", "TRACES", "EARTH_RADIUS_KM",
    "lonlat_to_local_km", "load_trace", "CurveStream", "CURVE_FAMILIES", "curve_family",
    "FERRY_TERMINALS", "ferry_lane",
]

#: The shipped USGS catalogue (in ``jaxstream/data``) that `load_earthquakes` reads.
USGS_FILE = "usgs_earthquakes_2020-08-21_2020-09-21.csv"
#: The slpc paper's longitude/latitude box (degrees), the default of `seismic_stream`.
SEISMIC_BOX = dict(lon_min=130.0, lon_max=180.0, lat_min=-70.0, lat_max=30.0)


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def cubic_curve(x) -> np.ndarray:
    """The slpc paper's generating curve y = 0.05·(x − 5)³."""
    return 0.05 * (np.asarray(x) - 5.0) ** 3


def make_cubic_stream(n: int = 500, noise: float = 0.094, seed=0, *, return_truth: bool = False):
    """The slpc paper's synthetic stream.

    x ~ U[0, 10] in arrival order, y = 0.05·(x − 5)³ + N(0, noise²). With the
    default noise the squared distance of 500 points to the true curve sums
    to about 2.48, the paper's ground-truth loss.

    Args:
      n: number of points.
      noise: standard deviation of the Gaussian noise on y.
      seed: int or `numpy.random.Generator`.
      return_truth: also return the squared distance of each point to the
        true curve (computed on a fine polyline of the curve).

    Returns:
      (n, 2) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    x = rng.uniform(0.0, 10.0, n)
    y = cubic_curve(x) + noise * rng.standard_normal(n)
    pts = np.stack([x, y], axis=1)
    if not return_truth:
        return pts
    return pts, true_curve_sqdist(pts)


def true_curve_sqdist(points: np.ndarray, n_grid: int = 20001) -> np.ndarray:
    """Squared distance of points to the cubic curve on [0, 10] (fine polyline)."""
    gx = np.linspace(0.0, 10.0, n_grid)
    curve = np.stack([gx, cubic_curve(gx)], axis=1)
    a, b = curve[:-1], curve[1:]
    out = np.empty(len(points))
    ab = b - a
    denom = (ab * ab).sum(1)
    for i, p in enumerate(points):
        # Only segments near p in x matter; restrict for speed.
        lo = max(int((p[0] - 2.0) / 10.0 * (n_grid - 1)), 0)
        hi = min(int((p[0] + 2.0) / 10.0 * (n_grid - 1)) + 1, n_grid - 1)
        aa, bb, dd = a[lo:hi], ab[lo:hi], denom[lo:hi]
        t = np.clip(((p - aa) * bb).sum(1) / dd, 0.0, 1.0)
        out[i] = (((aa + t[:, None] * bb) - p) ** 2).sum(1).min()
    return out


def curve_sqdist(points: np.ndarray, curve: np.ndarray, chunk: int = 64) -> np.ndarray:
    """Squared distance of points (n, d) to a finely sampled curve (m, d) seen as a polyline."""
    points = np.asarray(points, np.float64)
    a, b = curve[:-1], curve[1:]
    ab = b - a
    denom = np.maximum((ab * ab).sum(1), 1e-300)
    out = np.empty(len(points))
    for i in range(0, len(points), chunk):
        p = points[i:i + chunk, None, :]
        t = np.clip(((p - a) * ab).sum(-1) / denom, 0.0, 1.0)
        out[i:i + chunk] = (((a + t[..., None] * ab) - p) ** 2).sum(-1).min(1)
    return out


def table2_curve(t) -> np.ndarray:
    """The slpc paper's Table 2 curve in R^6: (0.5t·cos t, 0.5t·sin t, 0.5t, −t, t, 2·ln(t+1))."""
    t = np.asarray(t, np.float64)
    return np.stack([0.5 * t * np.cos(t), 0.5 * t * np.sin(t), 0.5 * t, -t, t, 2 * np.log(t + 1)], -1)


def make_table2_stream(n: int = 200, noise: float = 0.0575, seed=0, *, return_truth: bool = False):
    """The slpc paper's second synthetic stream (Table 2), 6-D.

    n/2 equidistant values of t in [0, 2π], each used twice (the paper: 100
    values for 200 points), in random arrival order, Gaussian noise of sd
    `noise` on every coordinate (the default makes the ground truth, the
    squared distance of 200 points to the true curve, about 3.29).

    Returns:
      (n, 6) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    t = np.repeat(np.linspace(0.0, 2 * np.pi, (n + 1) // 2), 2)[:n]
    t = t[rng.permutation(n)]
    pts = table2_curve(t) + noise * rng.standard_normal((n, 6))
    if not return_truth:
        return pts
    return pts, curve_sqdist(pts, table2_curve(np.linspace(0.0, 2 * np.pi, 20001)))


def helix_curve(t, radius: float = 1.0, rise: float = 0.3) -> np.ndarray:
    """Helix (radius·cos t, radius·sin t, rise·t) in R^3."""
    t = np.asarray(t, np.float64)
    return np.stack([radius * np.cos(t), radius * np.sin(t), rise * t], -1)


def make_helix_stream(n: int = 400, turns: float = 1.5, noise: float = 0.05, seed=0, *,
                      return_truth: bool = False):
    """A noisy 3-D helix: t ~ U[0, 2π·turns] in arrival order, radius 1, rise
    0.3 per radian, Gaussian noise of sd `noise` on every coordinate.

    Returns:
      (n, 3) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    t = rng.uniform(0.0, 2 * np.pi * turns, n)
    pts = helix_curve(t) + noise * rng.standard_normal((n, 3))
    if not return_truth:
        return pts
    return pts, curve_sqdist(pts, helix_curve(np.linspace(0.0, 2 * np.pi * turns, 20001)))


class Earthquakes(NamedTuple):
    """The shipped USGS catalogue (chronological order).

    Attributes:
      time: (n,) ISO-8601 strings.
      latitude: (n,) float64 degrees.
      longitude: (n,) float64 degrees.
      depth: (n,) float64 km.
      magnitude: (n,) float64.
    """

    time: np.ndarray
    latitude: np.ndarray
    longitude: np.ndarray
    depth: np.ndarray
    magnitude: np.ndarray


def load_earthquakes(path=None) -> Earthquakes:
    """Load a USGS FDSN CSV catalogue (the shipped month by default).

    Args:
      path: a CSV file with the USGS columns time, latitude, longitude, depth,
        mag; None for the shipped catalogue (2020-08-21 to 2020-09-21, 1,666
        events of magnitude >= 2.5).

    Returns:
      `Earthquakes`, sorted by time (oldest first).
    """
    if path is None:
        fh = resources.files("jaxstream").joinpath("data").joinpath(USGS_FILE).open("r", encoding="utf-8")
    else:
        fh = open(path, "r", encoding="utf-8")
    with fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ValueError(f"no events in {path or USGS_FILE}")
    missing = {"time", "latitude", "longitude", "depth", "mag"} - set(rows[0])
    if missing:
        raise ValueError(f"{path} lacks the USGS columns {sorted(missing)}")
    rows.sort(key=lambda r: r["time"])
    col = lambda k: np.array([float(r[k]) if r[k] != "" else np.nan for r in rows])
    return Earthquakes(np.array([r["time"] for r in rows]), col("latitude"), col("longitude"),
                       col("depth"), col("mag"))


def seismic_stream(path=None, *, lon_min=130.0, lon_max=180.0, lat_min=-70.0, lat_max=30.0) -> np.ndarray:
    """Epicentres (longitude, latitude) inside the slpc paper's box, in time order.

    With the shipped catalogue this is the 194 events in 130°E–180°E,
    70°S–30°N.

    Returns:
      (n, 2) float64 array of (longitude, latitude).
    """
    q = load_earthquakes(path)
    keep = ((q.longitude >= lon_min) & (q.longitude <= lon_max)
            & (q.latitude >= lat_min) & (q.latitude <= lat_max))
    return np.stack([q.longitude[keep], q.latitude[keep]], axis=1)


def load_csv_points(path, columns=None) -> np.ndarray:
    """Read a numeric CSV (with a header row) as an (n, d) array.

    Args:
      path: CSV file.
      columns: names of the columns to use; None for every column whose values
        all parse as numbers.

    Raises:
      ValueError: if no numeric column is found or a named column is missing.
    """
    with open(path, "r", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ValueError(f"{path} has no data rows")
    names = list(rows[0])
    if columns is None:
        def numeric(name):
            try:
                [float(r[name]) for r in rows]
                return True
            except (TypeError, ValueError):
                return False
        columns = [n for n in names if numeric(n)]
        if not columns:
            raise ValueError(f"{path} has no numeric column")
    else:
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"{path} lacks the columns {missing}; it has {names}")
    return np.array([[float(r[c]) for c in columns] for r in rows])


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


# ---------------------------------------------------------------------------
# Streams that move: points arrive in the order in which a curve is travelled
# or in which the groups drift, not shuffled.
# ---------------------------------------------------------------------------

PACBO_MEANS = np.array([[0.0, 0.0], [-4.0, -1.0], [0.0, 7.0], [5.0, 2.0]])
"""The PACBO slides' four group means (0,0), (−4,−1), (0,7), (5,2)."""


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


def _cluster_stream(rng, labels, means_t, sd, return_truth):
    n = len(labels)
    pts = means_t[np.arange(n), labels] + sd * rng.standard_normal((n, means_t.shape[-1]))
    return (pts, labels, means_t) if return_truth else pts


def _balanced_labels(rng, n: int, k: int) -> np.ndarray:
    """Labels 0..k−1, ⌈n/k⌉ or ⌊n/k⌋ of each (the first n mod k groups get one more), in random order."""
    return (np.arange(n) % k)[rng.permutation(n)]


def make_four_groups_stream(n: int = 200, seed=0, *, balanced: bool = True, return_truth: bool = False):
    """The PACBO slides' first stream: four unit-variance Gaussian groups in 2-D.

    Means (0,0), (−4,−1), (0,7), (5,2) (`PACBO_MEANS`), identity covariance.
    With ``balanced=True`` exactly n/4 points come from each group (when 4
    divides n; otherwise the first n mod 4 groups get one more) in a random
    order; with ``balanced=False`` each label is drawn i.i.d. uniformly (the
    command line's default cluster data, same draws).

    Args:
      n: number of points.
      seed: int or `numpy.random.Generator`.
      balanced: equal group sizes instead of i.i.d. labels.
      return_truth: also return the labels and the means.

    Returns:
      (n, 2) float64 array, or ``(points, labels, means_t)`` with labels
      (n,) int and means_t (n, 4, 2) the group means at each round (constant
      here; the same layout as the drifting streams').
    """
    rng = _rng(seed)
    labels = _balanced_labels(rng, n, 4) if balanced else rng.integers(0, 4, n)
    means_t = np.broadcast_to(PACBO_MEANS, (n, 4, 2))
    return _cluster_stream(rng, labels, means_t, 1.0, return_truth)


def make_drifting_clusters_stream(n: int = 400, means=None, shift=(20.0, 0.0), seed=0, *, sd: float = 1.0,
                                  return_truth: bool = False):
    """Gaussian groups whose means all move linearly while the stream is observed.

    At round t (0-based, τ = t/(n − 1)) group j has mean means[j] + τ·shift;
    the labels are balanced (n/k per group) in random order, and the point of
    round t is drawn from its group's mean of round t with covariance sd²·I.
    With the defaults the four PACBO groups (9 wide in x) travel 20 to the
    right, so a summary that weighs all past points equally smears each
    group along its path.

    Args:
      n: number of points.
      means: (k, d) initial means; None for `PACBO_MEANS`.
      shift: (d,) total displacement of every mean over the stream (a number:
        the same along every axis), or (k, d) one per group (zero rows: groups
        that stand still).
      seed: int or `numpy.random.Generator`.
      sd: per-coordinate standard deviation within a group.
      return_truth: also return the labels and the moving means.

    Returns:
      (n, d) float64 array, or ``(points, labels, means_t)`` with labels
      (n,) int and means_t (n, k, d) every group's mean at round t
      (``means_t[np.arange(n), labels]`` is each point's generating centre).
    """
    rng = _rng(seed)
    means = PACBO_MEANS if means is None else np.asarray(means, np.float64)
    shift = np.asarray(shift, np.float64)
    if shift.ndim == 0:  # one number: the same displacement along every axis
        shift = np.full(means.shape[1:], float(shift))
    if shift.ndim > 2 or shift.shape[-1:] != means.shape[1:] or (shift.ndim == 2 and len(shift) != len(means)):
        raise ValueError(f"shift must have shape (d,) or (k, d) = {means.shape}; got {shift.shape}")
    tau = np.arange(n) / max(n - 1, 1)
    means_t = means[None] + tau[:, None, None] * np.broadcast_to(shift, means.shape)[None]
    labels = _balanced_labels(rng, n, len(means))
    return _cluster_stream(rng, labels, means_t, sd, return_truth)


def make_ramp_clusters_stream(n: int = 200, n_groups: int = 10, block: int = 20, radius: float = 10.0, seed=0, *,
                              sd: float = 1.0, return_truth: bool = False):
    """The PACBO slides' "ramp": a new group every `block` points.

    Group j (0-based) has mean radius·(cos 2πj/k, sin 2πj/k), k = `n_groups`
    (neighbours 2·radius·sin(π/k) apart: 6.2 with the defaults). Rounds
    j·block … (j+1)·block − 1 all come from group j, the newest one, so the
    number of groups seen grows by one per block until k; rounds after
    k·block draw their group uniformly among the k.

    Args:
      n: number of points.
      n_groups: k, the number of groups.
      block: points per group before the next one appears.
      radius: radius of the circle of the means.
      seed: int or `numpy.random.Generator`.
      sd: per-coordinate standard deviation within a group.
      return_truth: also return the labels and the means.

    Returns:
      (n, 2) float64 array, or ``(points, labels, means_t)`` with labels
      (n,) int (``labels[:t+1].max() + 1`` groups seen by round t) and
      means_t (n, k, 2) the means (constant; groups not yet seen included).
    """
    rng = _rng(seed)
    ang = 2 * np.pi * np.arange(n_groups) / n_groups
    means = radius * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    t = np.arange(n)
    labels = np.minimum(t // block, n_groups - 1)
    late = t >= n_groups * block
    labels[late] = rng.integers(0, n_groups, int(late.sum()))
    return _cluster_stream(rng, labels, np.broadcast_to(means, (n, n_groups, 2)), sd, return_truth)


# ---------------------------------------------------------------------------
# Reference predictors for the moving streams
# ---------------------------------------------------------------------------

def nearest_past_point_loss(xs, t0: int = 20, *, max_block_elems: int = 2 ** 22) -> np.ndarray:
    """Per-round loss of predicting each point by its nearest past point.

    For every round t ≥ t0 (0-based), min over s < t of ‖x_t − x_s‖². This is
    what a summary that memorises the stream would pay; on a dense ordered
    trace it is small (about the squared gap between consecutive points plus
    twice the noise variance), which is why a learner's prequential loss
    should be read against it and against the noise energy.

    Rows are processed in blocks of at most `max_block_elems` distances, so
    memory stays bounded for streams of 10⁴–10⁵ points (two blocks of
    32 MiB at the default: a peak of about 62 MiB for n = 10⁴, in 0.5 s);
    the time is O(n²·d).

    Args:
      xs: (n, d) points in arrival order.
      t0: first scored round (>= 1: round 0 has no past).
      max_block_elems: largest number of pairwise distances held at once.

    Returns:
      (n − t0,) float64 array; entry i is the loss of round t0 + i.
    """
    xs = np.asarray(xs, np.float64)
    if xs.ndim != 2:
        raise ValueError(f"xs must be (n, d), got shape {xs.shape}")
    n = len(xs)
    if not 1 <= t0 <= n:
        raise ValueError(f"need 1 <= t0 <= n = {n}, got t0={t0}")
    out = np.empty(n - t0)
    a = t0
    while a < n:
        rows = max(1, min(n - a, max_block_elems // max(n, 1)))
        b = a + rows
        d2 = np.zeros((rows, b))
        for k in range(xs.shape[1]):
            d2 += (xs[a:b, k, None] - xs[None, :b, k]) ** 2
        # Only strictly earlier points count: mask s >= t.
        d2[np.arange(b)[None, :] >= np.arange(a, b)[:, None]] = np.inf
        out[a - t0:b - t0] = d2.min(axis=1)
        a = b
    return out


def last_points_oracle_loss(xs, labels, window: int = 10, t0: int = 1, *, new_group: str = "nearest") -> np.ndarray:
    """Per-round loss of the PACBO "last points" oracle that knows the labels.

    Round t (0-based) is predicted by the mean of the last `window` points of
    x_t's own group seen before t (fewer if the group has fewer), and pays the
    squared distance ‖x_t − prediction‖². A moving group is tracked with a lag
    of about window/2 points, a fixed one with the error of a window-point
    mean.

    A group's first point has no past point of its own group. With
    ``new_group="nearest"`` it is predicted by the nearest of the other
    groups' predictions at that round (what a clusterer pays before it opens
    a cell for the new group); with ``new_group="nan"`` its loss is NaN, to
    be excluded. The stream's very first point has no prediction at all and
    is NaN either way (t0 >= 1 skips it).

    Args:
      xs: (n, d) points in arrival order.
      labels: (n,) integer group labels.
      window: number of a group's latest points averaged (>= 1).
      t0: first round returned (0 <= t0 <= n).
      new_group: "nearest" or "nan", the policy for a group's first point.

    Returns:
      (n − t0,) float64 array; entry i is the loss of round t0 + i.
    """
    xs = np.asarray(xs, np.float64)
    labels = np.asarray(labels)
    n = len(xs)
    if xs.ndim != 2 or labels.shape != (n,):
        raise ValueError(f"need xs (n, d) and labels (n,), got {xs.shape} and {labels.shape}")
    if window < 1 or not 0 <= t0 <= n:
        raise ValueError(f"need window >= 1 and 0 <= t0 <= n, got window={window}, t0={t0}")
    if new_group not in ("nearest", "nan"):
        raise ValueError(f"new_group must be 'nearest' or 'nan', got {new_group!r}")
    out = np.full(n, np.nan)
    members = {}
    for g in np.unique(labels):
        idx = np.flatnonzero(labels == g)
        pts = xs[idx]
        cs = np.concatenate([np.zeros((1, xs.shape[1])), np.cumsum(pts, axis=0)])
        j = np.arange(1, len(idx))
        lo = np.maximum(j - window, 0)
        pred = (cs[j] - cs[lo]) / (j - lo)[:, None]
        out[idx[1:]] = ((pts[1:] - pred) ** 2).sum(axis=1)
        members[g] = idx
    if new_group == "nearest":
        for g, idx in members.items():
            f = idx[0]
            preds = []
            for h, jdx in members.items():
                c = int(np.searchsorted(jdx, f))
                if h != g and c > 0:
                    preds.append(xs[jdx[max(c - window, 0):c]].mean(axis=0))
            if preds:
                out[f] = ((xs[f] - np.array(preds)) ** 2).sum(axis=1).min()
    return out[t0:]


# ---------------------------------------------------------------------------
# Shipped real trajectories
# ---------------------------------------------------------------------------

TRACES = {"staten_island_ferry": "ais_staten_island_ferry_2020-12.csv"}
"""Shipped trajectories: name -> CSV file in ``jaxstream/data`` (see its README.md for provenance)."""

#: The Earth's mean radius (km), for projecting longitude/latitude to kilometres.
EARTH_RADIUS_KM = 6371.0088


def lonlat_to_local_km(lon, lat, lon0=None, lat0=None) -> np.ndarray:
    """Equirectangular projection of degrees to kilometres around a reference point.

    x = R·cos(lat0)·(lon − lon0), y = R·(lat − lat0), angles in radians,
    R = 6371.0088 km (the mean Earth radius). Over a few tens of kilometres
    at mid latitudes the distortion is below 1 %: enough to give the
    learners isotropic metric coordinates.

    Args:
      lon, lat: (n,) degrees.
      lon0, lat0: reference point in degrees; None for the mean of lon / lat.

    Returns:
      (n, 2) float64 array of (x east, y north) in km.
    """
    lon = np.asarray(lon, np.float64)
    lat = np.asarray(lat, np.float64)
    lon0 = lon.mean() if lon0 is None else lon0
    lat0 = lat.mean() if lat0 is None else lat0
    k = np.pi / 180.0 * EARTH_RADIUS_KM
    return np.stack([k * np.cos(np.radians(lat0)) * (lon - lon0), k * (lat - lat0)], axis=1)


def load_trace(name: str = "staten_island_ferry", *, lonlat: bool = False, return_time: bool = False):
    """A shipped real trajectory, in time order.

    ``"staten_island_ferry"``: 3,729 AIS position reports of the Staten
    Island Ferry *Andrew J. Barberi* (MMSI 367000150), 2020-12-01 08:11 to
    2020-12-05 21:04 UTC, about one report a minute while it shuttles the
    8 km between St. George and Whitehall terminals (plus dock time and one
    trip to the south), so the stream sweeps the same curve back and forth
    dozens of times. Source: the tracktable-data package (BSD-2-Clause);
    see ``jaxstream/data/README.md``.

    Args:
      name: a key of `TRACES`.
      lonlat: return (longitude, latitude) in degrees instead of local
        kilometres.
      return_time: also return the time of each point.

    Returns:
      (n, 2) float64 array: (x east, y north) in km from
      `lonlat_to_local_km` around the trace's mean position, or (lon, lat)
      in degrees with ``lonlat=True``; with ``return_time``,
      ``(points, times)`` with times (n,) ``datetime64[s]`` (UTC).
    """
    if name not in TRACES:
        raise ValueError(f"unknown trace {name!r}; shipped: {sorted(TRACES)}")
    with resources.files("jaxstream").joinpath("data").joinpath(TRACES[name]).open("r", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    time = np.array([r["time"] for r in rows], dtype="datetime64[s]")
    order = np.argsort(time, kind="stable")
    lon = np.array([float(r["lon"]) for r in rows])[order]
    lat = np.array([float(r["lat"]) for r in rows])[order]
    pts = np.stack([lon, lat], axis=1) if lonlat else lonlat_to_local_km(lon, lat)
    return (pts, time[order]) if return_time else pts


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


FERRY_TERMINALS = {"St. George": (-74.0736, 40.6437), "Whitehall": (-74.0132, 40.7013)}
"""(longitude, latitude) of the Staten Island Ferry's terminals: the reference lane is the straight line between them."""


def ferry_lane() -> np.ndarray:
    """(2, 2) the straight pier-to-pier line of the ferry, in the local km of `load_trace`."""
    lonlat = load_trace(lonlat=True)
    lon0, lat0 = lonlat[:, 0].mean(), lonlat[:, 1].mean()
    ends = np.array(list(FERRY_TERMINALS.values()))
    return lonlat_to_local_km(ends[:, 0], ends[:, 1], lon0, lat0)
