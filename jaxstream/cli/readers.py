"""Reading the user's data (``--csv FILE``): a CSV file or a ``.npy`` array, checked.

A bad file (missing or empty, unknown columns, text in a numeric column, a row with more
cells than the header, NaN/inf values) or a stream too short for its command raises
`InputError`, which the command line reports in one line on stderr with exit status 2.
"""
from __future__ import annotations

import csv
import math
import os
import sys

import numpy as np

#: Exit status of the command line for bad data or options (argparse's own usage errors give 2 too).
EXIT_BAD_INPUT = 2


class InputError(ValueError):
    """Bad data or options given on the command line (reported in one line, exit 2)."""


def _parse_float(text: str):
    """float(text), NaN for an empty cell, None for text that is not a number."""
    text = text.strip()
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def read_csv_points(path: str, columns=None) -> tuple[np.ndarray, list]:
    """Read the numeric columns of a CSV file.

    Args:
      path: CSV file; the rows are the stream in file order. The first line
        is a header row unless all its cells are numbers (then the columns
        are named 0, 1, ... and the first line is data).
      columns: names of the columns to use, or None for every column whose
        first non-empty value is a number (then a later cell that is not a
        number is an error, not a reason to drop the column).

    Returns:
      ``(points (n, d) float64, column names)``; empty cells and "nan"/"inf"
      become NaN/inf (the caller decides what to do with such rows).

    Raises:
      InputError: empty file, no data rows, unknown columns, no numeric
        column, text in a numeric column, a row with too few cells for the
        columns used, or a row with more cells than the header (empty
        trailing cells, as a trailing comma gives, are allowed).
    """
    with open(path, "r", encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            raise InputError(f"{path} is empty (expected a header row and data rows)")
        header = [h.strip() for h in header]
        rows, lines = [], []
        if all(h != "" and _parse_float(h) is not None for h in header):
            # No header row (every cell of the first line is a number): columns are named 0, 1, ...
            rows, lines = [header], [1]
            header = [str(j) for j in range(len(header))]
        for row in reader:
            if not row or all(c.strip() == "" for c in row):
                continue
            rows.append(row)
            lines.append(reader.line_num)
    if not rows:
        raise InputError(f"{path} has a header but no data rows")
    if columns is None:
        use = []
        for j, name in enumerate(header):
            first = next((r[j] for r in rows if j < len(r) and r[j].strip() != ""), None)
            if first is not None and _parse_float(first) is not None:
                use.append(j)
        if not use:
            raise InputError(f"{path} has no numeric column (columns: {', '.join(header)})")
        if len(use) < len(header):
            left = [header[j] for j in range(len(header)) if j not in use]
            print(f"using the numeric columns {', '.join(header[j] for j in use)}; left out "
                  f"{', '.join(map(repr, left))} (pick columns with --columns)", file=sys.stderr)
    else:
        missing = [c for c in columns if c not in header]
        if missing:
            raise InputError(f"{path} has no column {', '.join(map(repr, missing))}; "
                             f"its columns are: {', '.join(header)}")
        use = [header.index(c) for c in columns]
    out = np.empty((len(rows), len(use)))
    for i, (row, line) in enumerate(zip(rows, lines)):
        if len(row) < len(header) and max(use) >= len(row):
            raise InputError(f"{path} line {line} has {len(row)} cells; the header has {len(header)}")
        extra = [c.strip() for c in row[len(header):] if c.strip() != ""]
        if extra:  # a value without a column: the row is misaligned or the header is short
            raise InputError(f"{path} line {line} has {len(row)} cells; the header has {len(header)} (extra value "
                             f"{extra[0]!r}): fix the row or add a column to the header")
        for k, j in enumerate(use):
            v = _parse_float(row[j])
            if v is None:
                raise InputError(f"{path} line {line}, column {header[j]!r}: {row[j].strip()!r} is not a number")
            out[i, k] = v
    return out, [header[j] for j in use]


def read_npy_points(path: str, columns=None) -> tuple[np.ndarray, list]:
    """Read a numeric ``.npy`` array of shape (n, d) (or (n,) as one column).

    Args:
      columns: column indices to keep (as strings or ints), or None for all.
    """
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as e:
        raise InputError(f"{path} is not a plain numeric .npy array ({str(e).splitlines()[0]})") from None
    except (OSError, EOFError) as e:
        raise InputError(f"{path} could not be read as .npy ({e})") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path} is an .npz archive; save one array with np.save")
    if arr.dtype.kind not in "biuf":
        raise InputError(f"{path} holds {arr.dtype} values; expected numbers")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise InputError(f"{path} holds an array of shape {arr.shape}; expected (n, d)")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{path} is empty (shape {arr.shape})")
    names = [str(j) for j in range(arr.shape[1])]
    if columns is not None:
        try:
            idx = [int(c) for c in columns]
        except ValueError:
            raise InputError(f"--columns for a .npy file are column indices 0..{arr.shape[1] - 1}; "
                             f"got {' '.join(columns)}") from None
        bad = [j for j in idx if not -arr.shape[1] <= j < arr.shape[1]]
        if bad:
            raise InputError(f"{path} has {arr.shape[1]} columns; no column {bad[0]}")
        arr, names = arr[:, idx], [names[j] for j in idx]
    return arr.astype(np.float64), names


def read_points(path: str, columns=None, *, drop_nonfinite: bool = False) -> tuple[np.ndarray, list]:
    """Read a CSV or ``.npy`` file (told apart by its first bytes) as (n, d).

    Rows with NaN/inf/missing values raise `InputError` unless
    ``drop_nonfinite`` (then they are dropped and reported on stderr).
    """
    if os.path.isdir(path):
        raise InputError(f"{path} is a directory, not a data file")
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        xs, names = read_npy_points(path, columns)
    elif magic == b"":
        raise InputError(f"{path} is empty")
    else:
        try:
            xs, names = read_csv_points(path, columns)
        except UnicodeDecodeError:
            raise InputError(f"{path} is neither a UTF-8 CSV file nor a .npy array") from None
    bad = ~np.isfinite(xs).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        col = names[int(np.flatnonzero(~np.isfinite(xs[first]))[0])]
        if not drop_nonfinite:
            raise InputError(f"{path}: {int(bad.sum())} row(s) have missing, NaN or inf values (first: data "
                             f"row {first + 1}, column {col!r}); fix them or pass --drop-nonfinite")
        xs = xs[~bad]
        if xs.shape[0] == 0:
            raise InputError(f"{path}: no row is left after dropping non-finite rows")
        print(f"dropped {int(bad.sum())} row(s) with missing, NaN or inf values", file=sys.stderr)
    return xs, names


def working_precision(xs: np.ndarray) -> np.ndarray:
    """The points in the learners' dtype: float64 with --float64, else float32, where a finite
    value beyond float32's range is an `InputError` (the cast would turn it into inf)."""
    import jax
    if jax.config.jax_enable_x64:
        return xs.astype(np.float64)
    big = np.isfinite(xs) & (np.abs(xs) > np.finfo(np.float32).max)
    if big.any():
        row = int(np.flatnonzero(big.any(axis=1))[0])
        raise InputError(f"{int(big.sum())} value(s) are beyond the float32 range (|x| > 3.4e38; first in data "
                         f"row {row + 1}); rescale the data or pass --float64")
    return xs.astype(np.float32)


def _load(args, default):
    """(points, description, column names) from --csv or the default data."""
    if args.csv:
        xs, names = read_points(args.csv, args.columns, drop_nonfinite=args.drop_nonfinite)
        return xs, args.csv, names
    if args.columns:
        raise InputError("--columns needs --csv FILE")
    return default(args)


def _need_rows(xs, n, what):
    if xs.shape[0] < n:
        raise InputError(f"the stream has {xs.shape[0]} point(s); {what} needs at least {n}")
