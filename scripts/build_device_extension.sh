#!/usr/bin/env bash
# Builds the CUDA extension for the device machine on this one (no GPU
# needed: nvcc 13.0, sm_90a) so that a device call skips its ~4 min build
# (stop 60): Python 3.12 (pyenv) and jax 0.11.2's FFI headers, as the device
# has; the wheel goes to dist/ and its module to jaxemu/ (both ignored by
# git). Carry it: run(carry=[".cutlass", "jaxemu/_jaxemu_cuda.cpython-312-x86_64-linux-gnu.so"])
# with PREBUILT=1 in the session scripts (scripts/session_build.sh). ~30 min
# on two cores.
#   bash scripts/build_device_extension.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py312="$(pyenv root)/versions/3.12.1/bin/python3"
venv="${TMPDIR:-/tmp}/jaxemu-venv312-build"
[ -x "$venv/bin/python" ] || "$py312" -m venv "$venv"
"$venv/bin/pip" install -q "jax==0.11.2" "jaxlib==0.11.2" nanobind scikit-build-core cmake ninja
export PATH="$PATH:/usr/local/cuda-13.0/bin" JAXEMU_CUTLASS_DIR="${JAXEMU_CUTLASS_DIR:-$PWD/.cutlass}"
rm -f dist/jaxemu-*-cp312-*.whl
"$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w dist -Ccmake.define.JAXEMU_CUDA=ON \
  -Cbuild-dir="${TMPDIR:-/tmp}/jaxemu-b312" .
"$venv/bin/python" - <<'PY'
import glob, zipfile
whl = glob.glob("dist/jaxemu-*-cp312-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = [n for n in z.namelist() if n.startswith("jaxemu/_jaxemu_cuda") and n.endswith(".so")][0]
    z.extract(name, ".")
print("built", name)
PY
