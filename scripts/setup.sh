#!/usr/bin/env bash
# One-shot set-up on a fresh Debian/Ubuntu machine: system packages (Bullet, EGL/GL via Mesa,
# a C++ toolchain) when missing, then mmdkit itself (editable) with its test extras.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libbullet-dev pkg-config cmake g++ libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
echo "setup: installing mmdkit (editable) with test extras"
$PY -m pip install -q --disable-pip-version-check -e ".[test]"
echo "setup: done — try 'mmdkit --help'"
