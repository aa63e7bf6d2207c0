#!/usr/bin/env bash
# Build resources/icons/specchat.icns with Apple's iconutil. packaging/render_icons.py already
# writes an equivalent .icns on any OS; this is the Apple-tool route, to cross-check that file.
# macOS only; needs the project's virtual environment (PySide6 renders the SVG).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"
SET="$(mktemp -d)/specchat.iconset"
"$PY" "$ROOT/packaging/render_icons.py" --iconset "$SET"
iconutil -c icns -o "$ROOT/resources/icons/specchat.icns" "$SET"
echo "make-icns: wrote resources/icons/specchat.icns with iconutil"
