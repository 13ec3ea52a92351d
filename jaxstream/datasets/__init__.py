"""Data: the papers' synthetic streams and the real data the package ships.

Generators take a NumPy seed (or Generator) and return NumPy arrays in
arrival order, so that the same data feed the JAX learners and the NumPy
references of the tests. Grouped by family, one module each:

- ``curves``: the slpc paper's cubic and Table 2 streams, a helix, distances to a curve.
- ``routes``: curves travelled in order: routes, commutes, loops, a drifting sine arc.
- ``families``: the named curve families with their true curves (`curve_family`).
- ``clusters``: the PACBO four groups, drifting groups, the ten-group ramp, growing groups.
- ``manifolds``: the S-curve of the landmark learners.
- ``baselines``: reference losses (nearest past point, the last-points oracle).
- ``real``: the shipped USGS earthquakes and ferry trace, a CSV reader, km projection.

Every public name is re-exported here: use ``jaxstream.datasets.X``.
"""
from __future__ import annotations

from .baselines import last_points_oracle_loss, nearest_past_point_loss
from .clusters import (PACBO_MEANS, make_drifting_clusters_stream, make_four_groups_stream, make_growing_groups_stream,
                       make_ramp_clusters_stream)
from .curves import (cubic_curve, curve_sqdist, helix_curve, make_cubic_stream, make_helix_stream, make_table2_stream,
                     table2_curve, true_curve_sqdist)
from .families import CURVE_FAMILIES, CurveStream, curve_family
from .manifolds import make_s_curve
from .real import (EARTH_RADIUS_KM, FERRY_TERMINALS, SEISMIC_BOX, TRACES, USGS_FILE, Earthquakes, ferry_lane,
                   load_csv_points, load_earthquakes, load_trace, lonlat_to_local_km, seismic_stream)
from .routes import (make_commute_stream, make_drifting_curve_stream, make_loop_stream, make_route_stream,
                     random_route, rounded_rectangle_sqdist, sine_arc_sqdist)

__all__ = [
    "USGS_FILE", "SEISMIC_BOX", "cubic_curve", "make_cubic_stream", "true_curve_sqdist",
    "curve_sqdist", "table2_curve", "make_table2_stream", "helix_curve", "make_helix_stream",
    "Earthquakes", "load_earthquakes", "seismic_stream", "load_csv_points", "make_s_curve",
    "PACBO_MEANS", "random_route", "make_route_stream", "make_commute_stream",
    "rounded_rectangle_sqdist", "make_loop_stream", "sine_arc_sqdist", "make_drifting_curve_stream",
    "make_four_groups_stream", "make_drifting_clusters_stream", "make_ramp_clusters_stream",
    "make_growing_groups_stream",
    "nearest_past_point_loss", "last_points_oracle_loss", "TRACES", "EARTH_RADIUS_KM",
    "lonlat_to_local_km", "load_trace", "CurveStream", "CURVE_FAMILIES", "curve_family",
    "FERRY_TERMINALS", "ferry_lane",
]
