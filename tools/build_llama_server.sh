#!/usr/bin/env bash
# Builds llama.cpp's own llama-server from the source llama-cpp-python $LLAMA_VERSION vendors
# (the one SpecChat's libllama is built from), with the backend flags SpecChat's own wheel is
# built with, and prints its path. `specchat bench --peers` runs it beside SpecChat's modes.
#
# Cached like the oracles (tools/build_llama_tools.sh): the binary sits under a directory
# named after the version and a hash of the CMake flags, so a second run only prints the
# path and a CUDA build never passes for a CPU one. Linked statically: one binary to run.
# The web UI is left out (its assets would be downloaded at build time): the bench needs
# only the OpenAI endpoint.
#
# Environment: LLAMA_VERSION (0.3.36), PYTHON (python3; its pip fetches the sdist),
# JOBS (parallel compile jobs; all cores by default), LLAMA_CMAKE_ARGS (the Makefile's:
# -DGGML_NATIVE=on on a CPU build, -DGGML_CUDA=on or -DGGML_METAL=on where it has them).
set -euo pipefail

LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
LLAMA_CMAKE_ARGS=${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=on}
target=llama-server

cache=${XDG_CACHE_HOME:-$HOME/.cache}/specchat
tools_root=$cache/llama-tools
read -r -a backend_args <<<"$LLAMA_CMAKE_ARGS"
fixed_args=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
)
flags_hash=$(printf '%s\n' "${fixed_args[@]}" "${backend_args[@]}" | sha256sum | cut -c1-12)
dest=$tools_root/$LLAMA_VERSION-server-$flags_hash
binary=$dest/$target

if [[ -x $binary ]]; then
  echo "$binary"
  exit 0
fi

mkdir -p "$tools_root"
exec 9>"$tools_root/.lock-server"
flock 9
if [[ -x $binary ]]; then
  echo "$binary"
  exit 0
fi

# everything below talks on stderr: stdout carries only the binary's path
{
  llama_src=$(LLAMA_VERSION=$LLAMA_VERSION PYTHON=$PYTHON bash "$(dirname "$0")/fetch_llama_source.sh")
  build=$tools_root/build-server-$LLAMA_VERSION-$flags_hash
  echo "Building llama-server from llama-cpp-python $LLAMA_VERSION's llama.cpp" \
    "($LLAMA_CMAKE_ARGS; the first time about 10 minutes on 2 cores)"
  generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  cmake -S "$llama_src" -B "$build" "${generator[@]}" "${fixed_args[@]}" "${backend_args[@]}" >/dev/null
  cmake --build "$build" --target "$target" -j "$JOBS"

  mkdir -p "$dest"
  printf '%s\n' "${fixed_args[@]}" "${backend_args[@]}" >"$dest/cmake-args.txt"
  install -m 755 "$build/bin/$target" "$binary.tmp"
  mv "$binary.tmp" "$binary"
} >&2

echo "$binary"
