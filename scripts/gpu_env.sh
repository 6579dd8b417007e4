#!/usr/bin/env bash
# Sourced by gpu_check.sh and gpu_bundle_smoke.sh (and copied into the bundle): points the dynamic
# loader at the CUDA libraries the stagecraft binaries need but the bundle does not carry — the CUDA
# 13 runtime, cuBLAS (and cuBLASLt) 13 and cuDNN 9 — found in the Python packages of the machine
# (nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13, as PyTorch installs them), or already
# known to the loader (ldconfig). Every other library comes from the bundle's lib/ (RPATH).
#
#   source gpu_env.sh            # sets LD_LIBRARY_PATH, STAGECRAFT_CUDA_LIBS (one "soname dir" per
#                                # line) and STAGECRAFT_CUDA_MISSING (sonames not found)
# The Python used is $STAGECRAFT_PYTHON, else python3.

# Needed by the binaries (DT_NEEDED, directly or through cuBLAS), and cuDNN's sub-libraries, which
# cuDNN opens itself when it first needs them.
STAGECRAFT_CUDA_SONAMES=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9
                         libcudnn_graph.so.9 libcudnn_ops.so.9 libcudnn_cnn.so.9
                         libcudnn_engines_precompiled.so.9 libcudnn_engines_runtime_compiled.so.9
                         libcudnn_heuristic.so.9)
# Used by some cuDNN engines when present (runtime compilation); not required.
STAGECRAFT_CUDA_OPTIONAL=(libnvrtc.so.13 libnvrtc-builtins.so.13 libnvJitLink.so.13)

stagecraft_locate_cuda_libs() {
  local py=${STAGECRAFT_PYTHON:-$(command -v python3 || true)}
  local found="" missing=() soname dir dirs=()
  if [ -n "$py" ]; then
    # "soname<TAB>dir" for every wanted file under the nvidia namespace package(s).
    found=$("$py" - "${STAGECRAFT_CUDA_SONAMES[@]}" "${STAGECRAFT_CUDA_OPTIONAL[@]}" <<'EOF' 2>/dev/null
import os, site, sys
wanted = set(sys.argv[1:])
roots = []
try:
    import nvidia
    roots += [p for p in nvidia.__path__]
except Exception:
    pass
paths = []
try:
    paths = site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    paths = [p for p in sys.path if p.endswith("-packages")]
for sp in paths:
    p = os.path.join(sp, "nvidia")
    if os.path.isdir(p) and p not in roots:
        roots.append(p)
seen = set()
for root in roots:
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f in wanted and f not in seen:
                seen.add(f)
                print(f + "\t" + os.path.realpath(dirpath))
EOF
    ) || found=""
  fi
  STAGECRAFT_CUDA_LIBS=""
  for soname in "${STAGECRAFT_CUDA_SONAMES[@]}" "${STAGECRAFT_CUDA_OPTIONAL[@]}"; do
    dir=$(printf '%s\n' "$found" | awk -F'\t' -v s="$soname" '$1 == s {print $2; exit}')
    if [ -z "$dir" ]; then
      # Known to the loader already (a system CUDA installation): nothing to add to the path.
      dir=$(/sbin/ldconfig -p 2>/dev/null | awk -v s="$soname" '$1 == s {print $NF; exit}')
      if [ -n "$dir" ]; then
        STAGECRAFT_CUDA_LIBS+="$soname $(dirname "$dir") (system)"$'\n'
        continue
      fi
    fi
    if [ -z "$dir" ]; then
      case " ${STAGECRAFT_CUDA_OPTIONAL[*]} " in
        *" $soname "*) ;;
        *) missing+=("$soname") ;;
      esac
      continue
    fi
    STAGECRAFT_CUDA_LIBS+="$soname $dir"$'\n'
    case " ${dirs[*]} " in
      *" $dir "*) ;;
      *) dirs+=("$dir") ;;
    esac
  done
  STAGECRAFT_CUDA_MISSING="${missing[*]}"
  local joined
  joined=$(IFS=:; echo "${dirs[*]}")
  if [ -n "$joined" ]; then
    export LD_LIBRARY_PATH="$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  export STAGECRAFT_CUDA_LIBS STAGECRAFT_CUDA_MISSING
}

# The bundle's C++ runtime (lib/cxx/, Debian 12's: GLIBCXX_3.4.30, needs glibc 2.36) only when the
# machine's libstdc++ is older than what the binaries need.
stagecraft_cxx_runtime() {
  local here cxx system
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  cxx="$here/lib/cxx"
  [ -d "$cxx" ] || return 0
  system=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libstdc++.so.6" {print $NF; exit}')
  if [ -n "$system" ] && grep -qa 'GLIBCXX_3\.4\.30' "$system"; then
    STAGECRAFT_CXX_RUNTIME="$system"
  else
    STAGECRAFT_CXX_RUNTIME="$cxx (the machine's libstdc++ ${system:-is missing} lacks GLIBCXX_3.4.30)"
    export LD_LIBRARY_PATH="$cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  export STAGECRAFT_CXX_RUNTIME
}

stagecraft_locate_cuda_libs
stagecraft_cxx_runtime
