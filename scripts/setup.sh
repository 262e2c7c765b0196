#!/usr/bin/env bash
# One-shot set-up on a fresh Debian/Ubuntu machine: system packages (Bullet, Assimp, EGL/GL via Mesa,
# a C++ toolchain) when missing, then mmdkit itself (editable) with its test extras.
# Safe to run again: it installs only what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libbullet-dev libassimp-dev assimp-utils pkg-config cmake g++ libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri nodejs
              chromium chromium-driver fonts-ipafont-gothic)  # chromium: the viewer tests drive it headless
# (tests/test_viewer.py); the IPA Gothic font draws Japanese names on its page and screenshots
# npm: Debian's package, unless an npm is there already (NodeSource's nodejs bundles one and
# conflicts with Debian's npm)
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)
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
# Skip pip when this checkout is already installed (editable) with its extensions built (the Assimp
# bridge too when the system Assimp is there) and nothing that the install depends on
# (pyproject.toml, CMakeLists.txt, src/: both bridges) changed since: a stamp holds their hash.
# Delete the stamp (or set MMDKIT_SETUP_FORCE=1) to reinstall anyway.
STAMP=${MMDKIT_SETUP_STAMP:-build/setup.stamp}
inputs_hash=$(cat pyproject.toml CMakeLists.txt $(find src -type f | LC_ALL=C sort) | sha256sum | cut -d' ' -f1)
here=$(pwd -P)
need_assimp=""
pkg-config --exists assimp 2>/dev/null && need_assimp=", mmdkit.importers._assimp"
installed_from=$(cd / && $PY -c "import os, mmdkit, mmdkit.physics._bullet$need_assimp
print(os.path.dirname(os.path.dirname(os.path.realpath(mmdkit.__file__))))" 2>/dev/null || true)
if [ -z "${MMDKIT_SETUP_FORCE:-}" ] && [ "$installed_from" = "$here" ] && [ -f "$STAMP" ] \
   && [ "$(cat "$STAMP")" = "$inputs_hash" ]; then
  echo "setup: mmdkit is installed (editable) from $here and unchanged since; skipping pip"
else
  echo "setup: installing mmdkit (editable) with test and ray extras"
  $PY -m pip install -q --disable-pip-version-check -e ".[test,ray]"
  mkdir -p "$(dirname "$STAMP")"
  echo "$inputs_hash" > "$STAMP"
fi
# the glTF export tests run the Khronos glTF-Validator in Node: its pinned npm package, once
if [ ! -d tools/gltf_validator/node_modules ]; then
  echo "setup: installing the glTF validator (npm ci --prefix tools/gltf_validator)"
  npm ci --prefix tools/gltf_validator --no-audit --no-fund >/dev/null
fi
# three.js loaders (export tests) and three-vrm's VRM Animation loader (retarget .vrma tests); an
# older install without three-vrm is redone
[ -d tools/threejs/node_modules/@pixiv/three-vrm-animation ] || npm ci --prefix tools/threejs --no-audit --no-fund >/dev/null
echo "setup: done — try 'mmdkit --help'"
