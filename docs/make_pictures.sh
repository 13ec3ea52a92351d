#!/usr/bin/env bash
# Redraws the start page's three pictures with the command line's defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
jaxstream curve --out docs/_static/curve.png
jaxstream cluster --out docs/_static/cluster.png
jaxstream embed --out docs/_static/embed.png
