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

USGS_FILE = "usgs_earthquakes_2020-08-21_2020-09-21.csv"
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
      latitude, longitude, depth, magnitude: (n,) float64 arrays.
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
