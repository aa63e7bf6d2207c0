#!/usr/bin/env bash
# Builds one of the llama.cpp harnesses in tools/llama_oracle (the first argument:
# spec-oracle, the default, or chat-oracle) against the llama.cpp that llama-cpp-python
# $LLAMA_VERSION vendors, the one SpecChat's libllama is built from, and prints its path.
# `llama-server` builds llama.cpp's own server from that same source instead, with the
# backend flags SpecChat's wheel is built with ($LLAMA_CMAKE_ARGS, the Makefile's): the
# peer `specchat bench --peers` measures SpecChat against (bench/peers).
#
# Cached in the user cache like the wheelhouse: the binary sits under a directory named
# after the llama-cpp-python version and a hash of the harness sources, so a second run
# only prints the path, and a changed harness gets a binary of its own. The sdist and the
# CMake build tree are kept as well: after a harness change only the harness recompiles.
#
# Environment: LLAMA_VERSION (0.3.36), PYTHON (python3; its pip fetches the sdist),
# JOBS (parallel compile jobs; all cores by default), LLAMA_CMAKE_ARGS (llama-server only:
# -DGGML_NATIVE=on by default, -DGGML_CUDA=on / -DGGML_METAL=on where the Makefile says so).
set -euo pipefail

LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
target=${1:-spec-oracle}
case $target in
  spec-oracle | chat-oracle) ;;
  llama-server)
    exec bash "$(dirname "$0")/build_llama_server.sh"
    ;;
  *)
    echo "usage: $0 [spec-oracle|chat-oracle|llama-server]" >&2
    exit 2
    ;;
esac

harness_dir=$(cd "$(dirname "$0")/llama_oracle" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/specchat
tools_root=$cache/llama-tools

harness_hash=$(cd "$harness_dir" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
dest=$tools_root/$LLAMA_VERSION-$harness_hash
binary=$dest/$target

if [[ -x $binary ]]; then
  echo "$binary"
  exit 0
fi

# one build at a time (two test processes may ask at once); the second finds the binary
mkdir -p "$tools_root"
exec 9>"$tools_root/.lock"
flock 9
if [[ -x $binary ]]; then
  echo "$binary"
  exit 0
fi

# everything below talks on stderr: stdout carries only the binary's path
{
  llama_src=$(LLAMA_VERSION=$LLAMA_VERSION PYTHON=$PYTHON bash "$(dirname "$0")/fetch_llama_source.sh")

  # The harness is copied to a fixed place so that every checkout shares one build tree.
  staged=$tools_root/src-$LLAMA_VERSION
  build=$tools_root/build-$LLAMA_VERSION
  # (fresh copies, fresh mtimes: ninja then never mistakes changed sources for built ones)
  rm -rf "$staged"
  cp -r "$harness_dir" "$staged"

  echo "Building $target against llama.cpp from llama-cpp-python $LLAMA_VERSION" \
    "(the first time about 8 minutes on 2 cores; after a harness change seconds)"
  cmake -S "$staged" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_SOURCE_DIR="$llama_src" >/dev/null
  cmake --build "$build" --target "$target" -j "$JOBS"

  mkdir -p "$dest"
  install -m 755 "$build/bin/$target" "$binary.tmp"
  mv "$binary.tmp" "$binary"
} >&2

echo "$binary"
