#!/usr/bin/env bash
# Copy meshoptimizer's simplifier (its JavaScript module with the WebAssembly inside, MIT) from the
# pinned npm package (tools/meshoptimizer) into mmdkit/viewer/static/meshopt/, with its licence.
# Run after changing the version in tools/meshoptimizer/package.json; the copies are committed, so
# nothing is fetched when the viewer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --prefix tools/meshoptimizer --no-audit --no-fund >/dev/null
src=tools/meshoptimizer/node_modules/meshoptimizer
dst=mmdkit/viewer/static/meshopt
rm -rf "$dst"
mkdir -p "$dst"
cp "$src/meshopt_simplifier.js" "$dst/meshopt_simplifier.js"
cp "$src/LICENSE.md" "$dst/LICENSE.md"
echo "meshoptimizer $(node -p "require('./$src/package.json').version") copied into $dst"
