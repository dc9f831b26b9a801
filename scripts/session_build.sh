# Sourced by the device-session scripts (split_stats_session.sh,
# device_choice_session.sh): kernel_check (scripts/sanitize_kernels.sh,
# BUILD_ONLY; SKIP_KC=1 leaves it out) and the wheel built side by side
# (PREBUILT=1: the extension module carried in jaxemu/ instead of the wheel),
# the time and the GPU into $LOG; exits the caller on a build error.
# Needs OUT and LOG set.
t0=$(date +%s)
if [ -z "${SKIP_KC:-}" ]; then
  (BUILD_ONLY=1 OUT="$OUT/kc" JOBS=12 bash scripts/sanitize_kernels.sh > /dev/null 2>&1; echo "kc rc=$?" > "$OUT/kc_rc") &
else
  echo "kc rc=0 (skipped)" > "$OUT/kc_rc"
fi
if [ -n "${PREBUILT:-}" ]; then  # the module built elsewhere and carried (scripts/build_device_extension.sh)
  ls jaxemu/_jaxemu_cuda.cpython-3*.so > "$OUT/build.log" 2>&1 \
    || { echo "PREBUILT: carry jaxemu/_jaxemu_cuda.cpython-312-*.so (scripts/build_device_extension.sh)"; exit 1; }
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # (scripts/x.py import the tree's jaxemu/ with it)
else
  python3 -m pip install --no-build-isolation --no-deps -Cbuild-dir=build/gpu -Cbuild.verbose=false \
    -Ccmake.define.JAXEMU_CUDA=ON -e . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
wait
echo "builds: $(( $(date +%s) - t0 )) s; $(cat "$OUT/kc_rc")" | tee -a "$LOG"
grep -q "rc=0" "$OUT/kc_rc" || { grep error "$OUT/kc/build.log" | head; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
