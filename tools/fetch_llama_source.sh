#!/usr/bin/env bash
# Prints the path of the llama.cpp source tree that llama-cpp-python $LLAMA_VERSION vendors
# (its sdist's vendor/llama.cpp: the publishers' chat templates, real vocabularies, the
# sources SpecChat's libllama is built from), fetching and unpacking the sdist the first time.
#
# Cached in the user cache beside the wheelhouse; stdout carries only the path.
# Environment: LLAMA_VERSION (0.3.36), PYTHON (python3; its pip fetches the sdist).
set -euo pipefail

LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
PYTHON=${PYTHON:-python3}

sdist_dir=${XDG_CACHE_HOME:-$HOME/.cache}/specchat/sdist
unpacked=$sdist_dir/llama_cpp_python-$LLAMA_VERSION
llama_src=$unpacked/vendor/llama.cpp

if [[ ! -f $unpacked/.extracted ]]; then
  mkdir -p "$sdist_dir"
  # one fetch at a time (two test processes may ask at once); the second finds it done
  exec 9>"$sdist_dir/.lock"
  flock 9
  if [[ ! -f $unpacked/.extracted ]]; then
    {
      sdist=$sdist_dir/llama_cpp_python-$LLAMA_VERSION.tar.gz
      if [[ ! -f $sdist ]]; then
        echo "Fetching the llama-cpp-python $LLAMA_VERSION sdist (one time)"
        # into a folder of its own first: an interrupted download never passes for the sdist
        download=$(mktemp -d "$sdist_dir/.download.XXXXXX")
        "$PYTHON" -m pip download -q --no-binary :all: --no-deps -d "$download" \
          "llama-cpp-python==$LLAMA_VERSION"
        mv "$download/llama_cpp_python-$LLAMA_VERSION.tar.gz" "$sdist"
        rm -rf "$download"
      fi
      rm -rf "$unpacked"
      tar -xzf "$sdist" -C "$sdist_dir"
      touch "$unpacked/.extracted"
    } >&2
  fi
fi

echo "$llama_src"
