#!/usr/bin/env bash
# Copy the JavaScript the viewer page imports from their pinned npm packages into
# mmdkit/viewer/static/, each with its MIT licence; the copies are committed, so nothing is fetched
# when the viewer runs. Run after changing a version in tools/threejs/package.json (shared with the
# Node loader tests) or tools/meshoptimizer/package.json.
# - three.js → static/three/: build/*.js at its top (a folder named build/ is ignored by git),
#   examples/jsm/ as laid out (GLTFLoader imports ../utils/…)
# - meshoptimizer's simplifier (its JavaScript module with the WebAssembly inside) → static/meshopt/
set -euo pipefail
cd "$(dirname "$0")/.."

# vendor TOOL_DIR PACKAGE DEST FILE... : npm ci in TOOL_DIR, then FILE (relative to the package,
# a leading build/ dropped) copied into a fresh DEST
vendor() {
  local tool=$1 package=$2 dst=$3; shift 3
  npm ci --prefix "$tool" --no-audit --no-fund >/dev/null
  local src="$tool/node_modules/$package"
  rm -rf "$dst"
  for f in "$@"; do
    local out="$dst/${f#build/}"
    mkdir -p "$(dirname "$out")"
    cp "$src/$f" "$out"
  done
  echo "$package $(node -p "require('./$src/package.json').version") copied into $dst"
}

vendor tools/threejs three mmdkit/viewer/static/three LICENSE build/three.module.js build/three.core.js \
  examples/jsm/loaders/GLTFLoader.js examples/jsm/utils/BufferGeometryUtils.js examples/jsm/utils/SkeletonUtils.js \
  examples/jsm/controls/OrbitControls.js
vendor tools/meshoptimizer meshoptimizer mmdkit/viewer/static/meshopt meshopt_simplifier.js LICENSE.md
