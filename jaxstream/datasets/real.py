"""The real data the package ships (``jaxstream/data``): the USGS earthquake catalogue and its
seismic stream, the Staten Island Ferry's AIS trace and its pier-to-pier lane, a generic numeric
CSV reader, and the longitude/latitude projection to kilometres."""
from __future__ import annotations

import csv
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = ["USGS_FILE", "SEISMIC_BOX", "Earthquakes", "load_earthquakes", "seismic_stream", "load_csv_points",
           "TRACES", "EARTH_RADIUS_KM", "lonlat_to_local_km", "load_trace", "FERRY_TERMINALS", "ferry_lane"]

#: The shipped USGS catalogue (in ``jaxstream/data``) that `load_earthquakes` reads.
USGS_FILE = "usgs_earthquakes_2020-08-21_2020-09-21.csv"
#: The slpc paper's longitude/latitude box (degrees), the default of `seismic_stream`.
SEISMIC_BOX = dict(lon_min=130.0, lon_max=180.0, lat_min=-70.0, lat_max=30.0)


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


FERRY_TERMINALS = {"St. George": (-74.0736, 40.6437), "Whitehall": (-74.0132, 40.7013)}
"""(longitude, latitude) of the Staten Island Ferry's terminals: the reference lane is the straight line between them."""


def ferry_lane() -> np.ndarray:
    """(2, 2) the straight pier-to-pier line of the ferry, in the local km of `load_trace`."""
    lonlat = load_trace(lonlat=True)
    lon0, lat0 = lonlat[:, 0].mean(), lonlat[:, 1].mean()
    ends = np.array(list(FERRY_TERMINALS.values()))
    return lonlat_to_local_km(ends[:, 0], ends[:, 1], lon0, lat0)
