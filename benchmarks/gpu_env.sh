#!/usr/bin/env bash
# `make bench-gpu`: the GPU figures in one command on a machine that reaches no registry.
#
# 1. The kit (benchmarks/gpu_kit.py: wheels for CPython 3.12, the Whisper weights, the clips) is
#    joined from its parts, which earlier device calls left in $STAGE (or which lie in
#    .gpukit/parts here), each part checked against its sha256.
# 2. What the machine's Python lacks is installed from the kit's wheels into a folder of its own
#    (pip --no-index: nothing is fetched), only when it does not import already.
# 3. CTranslate2's PyPI wheel is built against CUDA 12 and opens libcublas.so.12 by name. A machine
#    with only CUDA 13's cuBLAS (PyTorch cu130's nvidia-cublas) gets that name pointing at
#    libcublas.so.13: CTranslate2 asks it for nine functions (cublasCreate_v2, cublasGemmEx,
#    cublasGemmStridedBatchedEx, ...) whose names and arguments CUDA 13 kept. The link used is
#    written into gpu.json (`device.cublas`), so the figures say what they ran on.
# 4. benchmarks/gpu.py --device cuda writes benchmarks/gpu.json (and $OUT/gpu.json where $OUT is set).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
case "$PY" in /*) ;; */*) PY="$PWD/$PY" ;; esac  # the parts are checked from $STAGE
STAGE=${GPUKIT_STAGE:-/tmp/avstack-gpukit}
DEVICE=${GPU_DEVICE:-cuda}
mkdir -p "$STAGE"

# 1. the parts: those still here join those earlier calls moved to $STAGE
for part in .gpukit/parts/p*/kit.tar.* .gpukit/parts/p*/parts.json; do
  [ -e "$part" ] && cp -f "$part" "$STAGE/"
done
if [ -f "$STAGE/parts.json" ] && [ ! -d "$STAGE/kit/data" ]; then
  (cd "$STAGE" && "$PY" - <<'EOF'
import hashlib, json, sys
parts = json.load(open("parts.json"))
bad = []
for p in parts:
    try:
        data = open(p["part"], "rb").read()
    except OSError:
        bad.append(f"{p['part']}: missing")
        continue
    if hashlib.sha256(data).hexdigest() != p["sha256"]:
        bad.append(f"{p['part']}: sha256 differs ({len(data)} of {p['bytes']} bytes)")
if bad:
    sys.exit("the kit is incomplete: " + "; ".join(bad))
print(f"kit: {len(parts)} parts, {sum(p['bytes'] for p in parts) >> 20} MiB, checked")
EOF
  )
  mkdir -p "$STAGE/kit"
  cat "$STAGE"/kit.tar.* | tar -x -C "$STAGE/kit"
fi
DATA=()
[ -d "$STAGE/kit/data" ] && DATA=(--data "$STAGE/kit/data")

# 2. the packages the machine lacks, from the kit's wheels
if ! "$PY" -c "import faster_whisper, ctranslate2, av, soundfile" 2>/dev/null; then
  [ -d "$STAGE/kit/wheels" ] || { echo "no kit and no faster-whisper here: run benchmarks/gpu_kit.py first" >&2; exit 2; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$STAGE/site" \
    "$STAGE"/kit/wheels/*.whl
  export PYTHONPATH="$STAGE/site${PYTHONPATH:+:$PYTHONPATH}"
fi

# 3. cuBLAS under the name CTranslate2 opens
if [ "$DEVICE" = cuda ] && ! "$PY" -c "import ctypes; ctypes.CDLL('libcublas.so.12')" 2>/dev/null; then
  found=$("$PY" - <<'EOF'
import glob, os, site, sys
roots = site.getsitepackages() + [p for p in sys.path if p.endswith("site-packages")]
hits = sorted({h for r in roots for h in glob.glob(os.path.join(r, "nvidia", "**", "libcublas.so.1[3-9]"), recursive=True)})
print(hits[0] if hits else "")
EOF
  )
  if [ -n "$found" ]; then
    mkdir -p "$STAGE/cublas12"
    ln -sf "$found" "$STAGE/cublas12/libcublas.so.12"
    export LD_LIBRARY_PATH="$STAGE/cublas12:$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "cuBLAS: libcublas.so.12 -> $found"
  fi
fi

OUTS=(--out benchmarks/gpu.json)
[ -n "${OUT:-}" ] && OUTS+=(--out "$OUT/gpu.json")
# CTranslate2's wheel carries no machine code for every GPU kind (an H200 compiles its PTX at the
# first call: about 20 s); the driver keeps the result in ~/.nv/ComputeCache, its default 256 MB
# too small to keep all of it between processes
export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
export PYTHONUNBUFFERED=1
exec "$PY" benchmarks/gpu.py --device "$DEVICE" "${DATA[@]}" "${OUTS[@]}" "$@"
