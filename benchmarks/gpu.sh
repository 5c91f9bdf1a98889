#!/usr/bin/env bash
# benchmarks/gpu.py on a machine with a GPU, in one command (see gpu.py's docstring):
#
#   bash benchmarks/gpu.sh OUT_DIR [ROBOTS_DIR] [EARLIER_SRC]
#
# OUT_DIR/after: this checkout's precision outputs and results.json; OUT_DIR/before: the
# precision outputs of the dense_armor under EARLIER_SRC (a `git archive REV src`), measured side
# by side with this checkout's. Then `python benchmarks/gpu.py report OUT_DIR/after CPU_DIR
# --before OUT_DIR/before` on the machine that has the CPU results. PYTHON picks the interpreter;
# PYTHONPATH is kept (where mujoco-mjx may be).
set -o pipefail
OUT=$(realpath "$1")
ROBOTS=${2:+--robots $(realpath "$2")}
EARLIER=${3:+$(realpath "$3")}
PY=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cd "$ROOT/benchmarks" || exit 1
$PY -c "import jax, equinox, chex; print('jax', jax.__version__, 'equinox', equinox.__version__, 'chex', chex.__version__, jax.devices())"
# Both precision runs share the GPU, so neither takes JAX's default 75 % of its memory.
if [ -n "$EARLIER" ]; then
  XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=$EARLIER:$PYTHONPATH $PY gpu.py measure $ROBOTS --out "$OUT/before" \
    --precision-only > "$OUT/before.log" 2>&1 &
fi
XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=$ROOT/src:$PYTHONPATH $PY gpu.py measure $ROBOTS --out "$OUT/after" --precision-only
wait
[ -n "$EARLIER" ] && tail -n 3 "$OUT/before.log"
# Throughput, MJX and sharding with JAX's defaults; later arguments go to `gpu.py measure`.
PYTHONPATH=$ROOT/src:$PYTHONPATH $PY gpu.py measure $ROBOTS --out "$OUT/after" --skip-precision "${@:4}" 2>&1 | tee "$OUT/log.txt"
