#!/bin/bash
# The prepared GPU check for a lent device machine (see benchmarks/README.md, GPU sections):
#   bash benchmarks/gpu_check.sh [tests|throughput|pacbo|ab|all]   (default: all)
# 'ab' times an older commit against this one (ab_speed.py) when $OLD_DIR/jaxstream_old exists:
#   mkdir -p .gpu/old && git archive OLD jaxstream | tar -x -C .gpu/old && mv .gpu/old/jaxstream .gpu/old/jaxstream_old
# (.gpu is not tracked; carry it to the device machine).
# Writes its logs under $OUT (or ./gpu_out). Each part has its own time limit (T_TESTS=330,
# 150/150/70 s for the slpc/pacbo/landmark_mds tables, T_PACBO=60, T_AB=120 seconds) so that one slow part cannot take the
# whole lease; 'all' needs about 13 minutes, more than one device call: run 'tests' in one call and
# the others in a second.
set -u
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
part=${1:-all}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
  python3 -c "import jax, optax, chex, numpy; print('jax', jax.__version__, 'optax', optax.__version__, 'chex', chex.__version__, 'numpy', numpy.__version__, jax.devices())"
} 2>&1 | tee "$OUT/env.txt"
if [[ $part == tests || $part == all ]]; then
  # SIGINT at the limit: pytest still prints the failures it has seen
  workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n ${WORKERS:-14}")
  timeout -s INT "${T_TESTS:-330}" python3 -m pytest -p no:cacheprovider $workers -rfE tests/ > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.txt" | tail -25
fi
if [[ $part == throughput || $part == all ]]; then
  # --cell-seconds 2000: a cell's time is estimated from the last cell's rate, which on a GPU
  # overestimates batched cells ~100x (PACBO B = 256: "~250 s" for a cell that took 1-2 s).
  # Warm-up: PACBO 64 rounds (one stream's rounds are slow), the others the default 256, as the
  # first lease's table (a landmark buffer still filling at 64 makes a cell's cost depend on T).
  for L in slpc:150:256 pacbo:150:64 landmark_mds:70:256; do
    IFS=: read -r name limit warm <<< "$L"
    timeout "$limit" python3 benchmarks/throughput.py --part table --min-steps 4 --repeats 2 \
      --forced-host-devices 0 --cell-seconds 2000 --max-state-gb 24 --updates-per-cell 65536 --warmup "$warm" \
      --learners "$name" --batches 1,256,4096,32768 2>&1 | tee "$OUT/throughput_$name.txt"
  done
fi
if [[ $part == pacbo || $part == all ]]; then
  timeout "${T_PACBO:-60}" python3 benchmarks/throughput.py --part table --min-steps 4 --repeats 3 \
    --forced-host-devices 0 --cell-seconds 60 --learners pacbo --batches 1 --warmup 64 2>&1 | tee "$OUT/pacbo_one.txt"
fi
OLD_DIR=${OLD_DIR:-.gpu/old}
if [[ ($part == ab || $part == all) && -d $OLD_DIR/jaxstream_old ]]; then
  PYTHONPATH=$PYTHONPATH:$OLD_DIR timeout "${T_AB:-120}" python3 benchmarks/ab_speed.py --reps 3 --T 1000 200 1000 \
    2>&1 | tee "$OUT/ab_speed.txt"
fi
date -u
