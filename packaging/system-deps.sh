#!/usr/bin/env bash
# System packages SpecChat's tests and tools use on Debian/Ubuntu: the Qt runtime libraries,
# Xvfb for screenshots, the desktop-file validators (with the hicolor theme that the
# install test checks icon folders against), objdump for the bundle's instruction check and
# QEMU's user-mode emulator to run the portable build as an older CPU. Installs only what is missing, and only where
# apt is usable; elsewhere it lists what to install and carries on.
set -u
needed=()
want() { dpkg -s "$1" >/dev/null 2>&1 || needed+=("$1"); }
command -v dpkg >/dev/null 2>&1 || { echo "system-deps: not a Debian system, skipping"; exit 0; }
# Qt's xcb platform plugin (a real window under X or Xvfb) needs the xcb utility libraries.
for pkg in libgl1 libegl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 \
           libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 \
           libxcb-randr0 libxcb-shape0 libxcb-xfixes0 libxcb-xinerama0 libxcb-xkb1 \
           xvfb xauth desktop-file-utils appstream hicolor-icon-theme binutils qemu-user; do
  want "$pkg"
done
[ ${#needed[@]} -eq 0 ] && { echo "system-deps: all present"; exit 0; }
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: installing ${needed[*]}"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null \
    || echo "system-deps: apt-get failed; install by hand: ${needed[*]}"
else
  echo "system-deps: please install: sudo apt-get install ${needed[*]}"
fi
exit 0
