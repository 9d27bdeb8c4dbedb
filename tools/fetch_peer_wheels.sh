#!/usr/bin/env bash
# Download the peer kernel libraries used as speed baselines into .whl/ (git-ignored), for a GPU
# machine that reaches no package registry: Python 3.12, x86_64 Linux, no dependency resolution.
#
#   tools/fetch_peer_wheels.sh [DEST]        (default DEST: .whl, next to pyproject.toml)
#
# On the GPU machine:
#   pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#
# Liger-Kernel (import liger_kernel) and FlagGems (import flag_gems) are pure-Python wheels of
# Triton kernels; this script refuses any other kind for them. FlagGems also imports PyYAML and
# SQLAlchemy when it is imported (its config and autotune cache), so their cp312 wheels come
# along; everything else it needs (torch, triton, numpy, packaging) is already on a GPU machine.
set -euo pipefail

cd "$(dirname "$0")/.."
DEST="${1:-.whl}"
PY="${PYTHON:-python3}"
PYVER="${PEER_PYTHON_VERSION:-3.12}"
ABI="cp${PYVER/./}"
PEERS=("liger-kernel==0.8.5" "flag-gems==5.0.2")
FLAGGEMS_RUNTIME=("PyYAML==6.0.3" "SQLAlchemy==2.0.48")

mkdir -p "$DEST"
"$PY" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --abi "$ABI" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    -d "$DEST" "${PEERS[@]}" "${FLAGGEMS_RUNTIME[@]}"

status=0
for pattern in "liger_kernel-*.whl" "flag_gems-*.whl"; do
    found=0
    for wheel in "$DEST"/$pattern; do
        [ -e "$wheel" ] || continue
        found=1
        case "$(basename "$wheel")" in
            *-py3-none-any.whl) echo "pure Python: $(basename "$wheel")" ;;
            *) echo "not a pure-Python wheel: $wheel" >&2; status=1 ;;
        esac
    done
    if [ "$found" = 0 ]; then echo "missing: $pattern in $DEST" >&2; status=1; fi
done
ls -l "$DEST"
exit "$status"
