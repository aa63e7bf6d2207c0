#!/usr/bin/env bash
# Install SpecChat's desktop integration: the icon into the hicolor theme, the menu entry and
# the AppStream metainfo. Per-user by default (~/.local); PREFIX=/usr/local for everyone, and
# DESTDIR for staging a package. With --bin FILE (the one-file bundle) the program itself is
# installed as PREFIX/bin/specchat too, so the menu entry works without a virtual environment.
#
#   packaging/linux/install-desktop.sh [--bin dist/specchat] [--uninstall]
set -euo pipefail

APP_ID=io.github.specchat.SpecChat
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ICONS="$ROOT/resources/icons"
PREFIX="${PREFIX:-$HOME/.local}"
DESTDIR="${DESTDIR:-}"
SIZES=(16 24 32 48 64 128 256 512)

bin=""
uninstall=no
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="${2:?--bin needs a file}"; shift 2 ;;
    --uninstall) uninstall=yes; shift ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-desktop: unknown option $1" >&2; exit 2 ;;
  esac
done

share="$DESTDIR$PREFIX/share"
targets=(
  "$share/applications/$APP_ID.desktop"
  "$share/metainfo/$APP_ID.metainfo.xml"
  "$share/icons/hicolor/scalable/apps/$APP_ID.svg"
)
for size in "${SIZES[@]}"; do
  targets+=("$share/icons/hicolor/${size}x${size}/apps/$APP_ID.png")
done

if [ "$uninstall" = yes ]; then
  rm -f "${targets[@]}"
  # Only the bundle this script installed: pipx's specchat is a symlink, pip's a script.
  binary="$DESTDIR$PREFIX/bin/specchat"
  if [ -f "$binary" ] && [ ! -L "$binary" ] && [ "$(head -c4 "$binary" | tail -c3)" = ELF ]; then
    rm -f "$binary"
  fi
  echo "install-desktop: removed SpecChat's menu entry, icons and metainfo from $DESTDIR$PREFIX"
else
  install -Dm644 "$HERE/$APP_ID.desktop" "$share/applications/$APP_ID.desktop"
  install -Dm644 "$HERE/$APP_ID.metainfo.xml" "$share/metainfo/$APP_ID.metainfo.xml"
  install -Dm644 "$ICONS/specchat.svg" "$share/icons/hicolor/scalable/apps/$APP_ID.svg"
  for size in "${SIZES[@]}"; do
    install -Dm644 "$ICONS/specchat-$size.png" \
      "$share/icons/hicolor/${size}x${size}/apps/$APP_ID.png"
  done
  if [ -n "$bin" ]; then
    install -Dm755 "$bin" "$DESTDIR$PREFIX/bin/specchat"
    echo "install-desktop: installed $bin as $DESTDIR$PREFIX/bin/specchat"
  elif ! command -v specchat >/dev/null 2>&1; then
    # The entry runs `specchat` from PATH: say so now rather than leave a dead menu item.
    echo "install-desktop: note: no 'specchat' on PATH yet; install it (pipx, or --bin" \
         "dist/specchat) for the menu entry to start" >&2
  fi
  echo "install-desktop: installed SpecChat's menu entry, icons and metainfo into $DESTDIR$PREFIX"
fi

# Refresh caches only for a live install: a DESTDIR stage is a package's job to refresh.
if [ -z "$DESTDIR" ]; then
  command -v gtk-update-icon-cache >/dev/null 2>&1 &&
    gtk-update-icon-cache -qtf "$share/icons/hicolor" 2>/dev/null || true
  command -v update-desktop-database >/dev/null 2>&1 &&
    update-desktop-database -q "$share/applications" 2>/dev/null || true
fi
exit 0
