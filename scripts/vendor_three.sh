#!/usr/bin/env bash
# Copy the three.js files the viewer page imports from the pinned npm package (tools/threejs, shared
# with the Node loader tests) into mmdkit/viewer/static/three/: build/*.js at its top (a folder named
# build/ is ignored by git), examples/jsm/ as laid out (GLTFLoader imports ../utils/…), and three.js's
# MIT licence. Run after changing the version in tools/threejs/package.json; the
# copies are committed, so nothing is fetched when the viewer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --prefix tools/threejs --no-audit --no-fund >/dev/null
src=tools/threejs/node_modules/three
dst=mmdkit/viewer/static/three
rm -rf "$dst"
for f in LICENSE build/three.module.js build/three.core.js examples/jsm/loaders/GLTFLoader.js \
         examples/jsm/utils/BufferGeometryUtils.js examples/jsm/utils/SkeletonUtils.js \
         examples/jsm/controls/OrbitControls.js; do
  out="$dst/${f#build/}"
  mkdir -p "$(dirname "$out")"
  cp "$src/$f" "$out"
done
echo "three $(node -p "require('./$src/package.json').version") copied into $dst"
