# Sourced by the GPU scripts: carried wheels onto PYTHONPATH, FlagGems from .fg/, shared caches.
# Run from the repo root of a CUDA machine with torch+triton, wheels of zlbench's missing deps in
# .whl/ and a FlagGems checkout (src/ benchmark/ pytest.ini) in .fg/. Results go under $OUT.
OUT=${OUT:-/tmp/zl_gpu_out}; mkdir -p "$OUT"
# FlagGems may come as .fgz/fg.tar.xz (tar cJf .fgz/fg.tar.xz .fg): 2 MB to carry instead of 22.
[ -d .fg ] || [ ! -f .fgz/fg.tar.xz ] || tar xJf .fgz/fg.tar.xz
if ls .whl/*.whl >/dev/null 2>&1; then
  # Once per machine: scripts running side by side must not reinstall under each other.
  [ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
  export PYTHONPATH=/tmp/site:$PWD
fi
export FLAGGEMS_ROOT=${FLAGGEMS_ROOT:-$PWD/.fg} PYTHONUNBUFFERED=1
# Byte-compile FlagGems once per machine: a fresh copy has no __pycache__, and compiling its ~1800
# imported modules costs every benchmark process ~6 s (FlagGems' own runner as much as zlbench).
[ -f /tmp/.zl_compiled ] || { python3 -m compileall -q -j 0 "$FLAGGEMS_ROOT/src" "$FLAGGEMS_ROOT/benchmark" >/dev/null 2>&1
  touch /tmp/.zl_compiled; }
# One Triton/FlagGems cache for every run that does not isolate its own (warm after the first),
# unless the caller names its own.
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/zl_triton} FLAGGEMS_CACHE_DIR=${FLAGGEMS_CACHE_DIR:-/tmp/zl_flaggems}
