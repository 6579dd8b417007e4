# Sourced by measure.sh and gap.sh (from the repository root): unpacks .cpu-kit/{sckit,ovkit}.tar.xz
# (made by kit.sh) into $K (default /tmp/amxkit), puts this tree's python/stagecraft beside the
# module, and sets PYTHONPATH, LD_LIBRARY_PATH (the kit's libraries, the machine's CUDA ones) and
# STAGECRAFT_NO_VENV for the machine's Python ($PYTHON, default python3). Returns 3 when a part
# does not unpack.
K=${K:-/tmp/amxkit}
rm -rf "$K"; mkdir -p "$K"
tar -C "$K" -xJf .cpu-kit/sckit.tar.xz & unpack_p1=$!
tar -C "$K" -xJf .cpu-kit/ovkit.tar.xz & unpack_p2=$!
wait $unpack_p1 || { echo "FATAL: sckit.tar.xz did not unpack"; return 3; }
wait $unpack_p2 || { echo "FATAL: ovkit.tar.xz did not unpack"; return 3; }
cp python/stagecraft/*.py python/stagecraft/py.typed "$K/stagecraft/"
echo "kit unpacked: $(du -sh "$K" | cut -f1); module sha256/commit: $(tr '\n' ' ' < "$K/stagecraft/MODULE_SHA256")"
export PYTHONPATH="$K:$K/site${PYTHONPATH:+:$PYTHONPATH}"
STAGECRAFT_PYTHON=${CUDA_PYTHON:-${PYTHON:-python3}} source scripts/gpu_env.sh
[ -n "${STAGECRAFT_CUDA_MISSING:-}" ] && echo "WARNING: CUDA libraries not found: $STAGECRAFT_CUDA_MISSING"
export LD_LIBRARY_PATH="$K/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STAGECRAFT_NO_VENV=1
export PYTHONDONTWRITEBYTECODE=1
return 0
