// The character's meshes made cheap to draw, above all in software WebGL (SwiftShader, llvmpipe),
// where every vertex and triangle costs CPU time:
// - compactMesh: each primitive gets its own compact geometry (its vertices only: the exporter
//   writes one shared vertex array), optionally simplified (``lod``: meshoptimizer's simplifier,
//   vendored in static/meshopt/, the vertices a morph moves and the primitive's borders kept), its
//   triangles in vertex-cache order (Tipsify) and its vertices in first-use order; its morphs
//   become (vertex, delta) lists the page applies to the positions (applyMorphs), so no morph
//   targets are left in the shaders;
// - uniformSkinning: the bone matrices as a uniform array the vertex shader blends once per vertex.
import * as THREE from 'three';

export const CACHE_SIZE = 24;  // Tipsify's vertex cache size (SwiftShader, llvmpipe: small caches)
export const LOD_ERROR = 0.01;  // the simplifier's largest error, relative to the primitive's size
const LOD_MIN_TRIANGLES = 200;  // smaller primitives are kept whole

// mesh -> { morphs: [{ morph (model morph index), vertex (Uint32Array), delta (Float32Array) }],
// base positions, weights shown (Float32Array per morph) }
export const morphData = new Map();

// ``mesh.geometry`` := a compact copy of ``source`` (the GLB's geometry of the mesh);
// ``targetMorph[t]``: the model morph of GLB morph target t (-1: none); ``reorder``: triangles in
// vertex-cache order; ``lod``: { simplifier (MeshoptSimplifier, ready), ratio (of the triangles
// kept, at most) } or null. Morph weights shown so far are kept (morphData; applyMorphs applies them)
export function compactMesh(mesh, source, targetMorph, { reorder = true, lod = null } = {}) {
  const geo = source, n = geo.attributes.position.count;
  let index = geo.index ? geo.index.array : Uint32Array.from({ length: n }, (_, i) => i);
  const whole = geo.groups.length <= 1;  // a GLTFLoader primitive: one material, no groups
  if (lod && whole && index.length >= 3 * LOD_MIN_TRIANGLES) index = simplified(geo, index, targetMorph, lod);
  if (reorder && whole) index = tipsify(index, n, CACHE_SIZE);
  const { remap, used } = firstUse(index, n);
  const out = new THREE.BufferGeometry();
  const newIndex = new (used.length > 65535 ? Uint32Array : Uint16Array)(index.length);
  for (let k = 0; k < index.length; k++) newIndex[k] = remap[index[k]];
  out.setIndex(new THREE.BufferAttribute(newIndex, 1));
  for (const [name, attr] of Object.entries(geo.attributes)) out.setAttribute(name, gather(attr, used));
  const morphs = [];
  (geo.morphAttributes.position || []).forEach((attr, t) => {
    if (targetMorph[t] < 0) return;
    const d = morphArray(attr), vertex = [], delta = [];
    for (let j = 0; j < used.length; j++) {
      const o = 3 * used[j];
      if (d[o] !== 0 || d[o + 1] !== 0 || d[o + 2] !== 0) { vertex.push(j); delta.push(d[o], d[o + 1], d[o + 2]); }
    }
    if (vertex.length) morphs.push({ morph: targetMorph[t], vertex: Uint32Array.from(vertex), delta: Float32Array.from(delta) });
  });
  out.groups = geo.groups;
  const old = mesh.geometry;
  mesh.geometry = out;
  if (old !== source) old.dispose();
  mesh.morphTargetInfluences = undefined; mesh.morphTargetDictionary = undefined;
  const shown = morphData.get(mesh)?.shown || new Map();  // model morph -> weight shown
  morphData.set(mesh, { morphs, base: morphs.length ? out.attributes.position.array.slice() : null,
                        weights: new Float32Array(morphs.length), shown });
  applyMorphs(mesh);
}

// a morph target's deltas as one flat array (x y z per GLB vertex)
function morphArray(attr) {
  return attr.isInterleavedBufferAttribute ? gather(attr, Array.from({ length: attr.count }, (_, i) => i)).array : attr.array;
}

// this frame's morph weights (row ra, rb at offset m0, interpolated by w) onto the positions;
// no rows: the weights shown last (a mesh just rebuilt)
export function applyMorphs(mesh, ra = null, rb = null, w = 0, m0 = 0) {
  const { morphs, base, weights, shown } = morphData.get(mesh);
  if (!morphs.length) return;
  let changed = ra === null;
  for (let k = 0; k < morphs.length; k++) {
    const m = morphs[k].morph, x = ra === null ? shown.get(m) || 0 : ra[m0 + m] + (rb[m0 + m] - ra[m0 + m]) * w;
    if (x !== weights[k]) { weights[k] = x; shown.set(m, x); changed = true; }
  }
  if (!changed) return;
  const attr = mesh.geometry.attributes.position, pos = attr.array;
  pos.set(base);
  for (let k = 0; k < morphs.length; k++) {
    const x = weights[k];
    if (x === 0) continue;
    const { vertex, delta } = morphs[k];
    for (let i = 0; i < vertex.length; i++) {
      const o = 3 * vertex[i];
      pos[o] += x * delta[3 * i]; pos[o + 1] += x * delta[3 * i + 1]; pos[o + 2] += x * delta[3 * i + 2];
    }
  }
  attr.needsUpdate = true;
}

function firstUse(index, n) {  // vertices in the order the triangles first use them
  const remap = new Int32Array(n).fill(-1), used = [];
  for (const i of index) if (remap[i] < 0) { remap[i] = used.length; used.push(i); }
  return { remap, used };
}

// ``index`` (a primitive's triangles) simplified to about lod.ratio of its triangles, within
// LOD_ERROR; the vertices a morph moves are locked (the face keeps its detail where it moves), as
// are the primitive's borders (no cracks where materials meet); the same vertex numbering
function simplified(geo, index, targetMorph, { simplifier, ratio }) {
  const { used, remap } = firstUse(index, geo.attributes.position.count);
  const compact = new Uint32Array(index.length);
  for (let k = 0; k < index.length; k++) compact[k] = remap[index[k]];
  const position = gather(geo.attributes.position, used).array, normal = geo.attributes.normal;
  const attributes = normal ? gather(normal, used).array : new Float32Array(0);
  const lock = new Uint8Array(used.length);
  (geo.morphAttributes.position || []).forEach((attr, t) => {
    if (targetMorph[t] < 0) return;
    const d = morphArray(attr);
    for (let j = 0; j < used.length; j++) {
      const o = 3 * used[j];
      if (d[o] !== 0 || d[o + 1] !== 0 || d[o + 2] !== 0) lock[j] = 1;
    }
  });
  const target = Math.floor((index.length / 3) * ratio) * 3;
  const [kept] = simplifier.simplifyWithAttributes(compact, Float32Array.from(position), 3, Float32Array.from(attributes),
                                                   normal ? 3 : 0, normal ? [0.5, 0.5, 0.5] : [], lock, target, LOD_ERROR, ['LockBorder']);
  const out = new index.constructor(kept.length);
  for (let k = 0; k < kept.length; k++) out[k] = used[kept[k]];
  return out;
}

function gather(attr, used) {  // the rows ``used`` of an attribute, as a new attribute
  const s = attr.itemSize, a = new attr.array.constructor(used.length * s);
  if (attr.isInterleavedBufferAttribute) {
    for (let j = 0; j < used.length; j++) for (let c = 0; c < s; c++) a[j * s + c] = attr.getComponent(used[j], c);
  } else {
    const src = attr.array;
    for (let j = 0; j < used.length; j++) { const o = used[j] * s; for (let c = 0; c < s; c++) a[j * s + c] = src[o + c]; }
  }
  return new THREE.BufferAttribute(a, s, attr.normalized);
}

// Tipsify (Sander, Nehab, Barczak 2007): the triangles of ``index`` (vertex indices < n) reordered
// so that a vertex cache of ``k`` entries reuses shaded vertices; the same triangles, same winding
export function tipsify(index, n, k) {
  const T = index.length / 3, start = new Uint32Array(n + 1), live = new Int32Array(n);
  for (let i = 0; i < index.length; i++) live[index[i]]++;
  for (let v = 0; v < n; v++) start[v + 1] = start[v] + live[v];
  const adj = new Uint32Array(index.length), fill = start.slice(0, n);
  for (let i = 0; i < index.length; i++) adj[fill[index[i]]++] = (i / 3) | 0;
  const stamp = new Int32Array(n).fill(-1e9), emitted = new Uint8Array(T), out = new (index.constructor)(index.length);
  const dead = [];
  let o = 0, time = k + 1, cursor = 0, f = 0;
  while (f >= 0) {
    const candidates = [];
    for (let a = start[f]; a < start[f + 1]; a++) {
      const t = adj[a];
      if (emitted[t]) continue;
      emitted[t] = 1;
      for (let c = 0; c < 3; c++) {
        const v = index[3 * t + c];
        out[o++] = v; dead.push(v); candidates.push(v); live[v]--;
        if (time - stamp[v] > k) stamp[v] = time++;
      }
    }
    f = -1;
    let best = -1;
    for (const v of candidates) {  // the fanning vertex still in the cache the longest
      if (live[v] <= 0) continue;
      const p = time - stamp[v] + 2 * live[v] <= k ? time - stamp[v] : 0;
      if (p > best) { best = p; f = v; }
    }
    if (f < 0) {
      while (dead.length && f < 0) { const d = dead.pop(); if (live[d] > 0) f = d; }
      while (f < 0 && cursor < n) { if (live[cursor] > 0) f = cursor; cursor++; }
    }
  }
  return out;
}

// Skinning for the skinned ``mesh`` (all its materials; a mesh's own materials: three.js uploads
// a material's uniforms when it switches to it): each joint's skinning matrix (bind matrices
// folded in) as 3 rows in the uniform vec4 array ``mmdBones``, and the vertex shader blends the
// rows of its 4 joints by their weights once, then transforms position and normal by the blend
// (three.js: 16 texel fetches from the bone texture, 4 matrix-vector products for the position,
// a blended 4×4 matrix times the two bind matrices for the normal: the costliest part of the
// vertex shader in software GL). The same linear blend skinning; false (nothing changed) when
// the vertex shader has not room for 3 vectors per joint besides three.js' own.
const SKIN_CHUNKS = (rows) => ({
  skinning_pars_vertex: `#ifdef USE_SKINNING
uniform highp vec4 mmdBones[${rows}];
#endif`,
  skinbase_vertex: `#ifdef USE_SKINNING
ivec4 skinRow = ivec4(skinIndex) * 3;
vec4 skinR0 = mmdBones[skinRow.x] * skinWeight.x + mmdBones[skinRow.y] * skinWeight.y + mmdBones[skinRow.z] * skinWeight.z + mmdBones[skinRow.w] * skinWeight.w;
skinRow += 1;
vec4 skinR1 = mmdBones[skinRow.x] * skinWeight.x + mmdBones[skinRow.y] * skinWeight.y + mmdBones[skinRow.z] * skinWeight.z + mmdBones[skinRow.w] * skinWeight.w;
skinRow += 1;
vec4 skinR2 = mmdBones[skinRow.x] * skinWeight.x + mmdBones[skinRow.y] * skinWeight.y + mmdBones[skinRow.z] * skinWeight.z + mmdBones[skinRow.w] * skinWeight.w;
#endif`,
  skinnormal_vertex: `#ifdef USE_SKINNING
objectNormal = vec3(dot(skinR0.xyz, objectNormal), dot(skinR1.xyz, objectNormal), dot(skinR2.xyz, objectNormal));
#ifdef USE_TANGENT
objectTangent = vec3(dot(skinR0.xyz, objectTangent), dot(skinR1.xyz, objectTangent), dot(skinR2.xyz, objectTangent));
#endif
#endif`,
  skinning_vertex: `#ifdef USE_SKINNING
transformed = vec3(dot(skinR0, vec4(transformed, 1.0)), dot(skinR1, vec4(transformed, 1.0)), dot(skinR2, vec4(transformed, 1.0)));
#endif`,
});

export function uniformSkinning(renderer, mesh) {
  const bones = mesh.skeleton.bones.length, rows = 3 * bones;
  if (renderer.capabilities.maxVertexUniforms < rows + 64) return false;
  const data = new Float32Array(4 * rows), uniform = { value: data }, chunks = SKIN_CHUNKS(rows);
  for (const material of [].concat(mesh.material)) {
    material.onBeforeCompile = (shader) => {
      shader.uniforms.mmdBones = uniform;
      for (const [name, code] of Object.entries(chunks)) shader.vertexShader = shader.vertexShader.replaceAll(`#include <${name}>`, code);
    };
    material.customProgramCacheKey = () => 'mmdBones' + rows;
  }
  const identity = mesh.bindMatrix.equals(new THREE.Matrix4()), m = new THREE.Matrix4();
  let frame = -1;
  mesh.onBeforeRender = function (r) {  // three.js has updated the skeleton's matrices
    if (r.info.render.frame === frame) return;  // once a frame (a mesh's groups, two-pass sides)
    frame = r.info.render.frame;
    const all = this.skeleton.boneMatrices;
    for (let b = 0; b < bones; b++) {
      let e = all, s = 16 * b;
      if (!identity) { e = m.fromArray(all, s).premultiply(this.bindMatrixInverse).multiply(this.bindMatrix).elements; s = 0; }
      const d = 12 * b;
      data[d] = e[s]; data[d + 1] = e[s + 4]; data[d + 2] = e[s + 8]; data[d + 3] = e[s + 12];
      data[d + 4] = e[s + 1]; data[d + 5] = e[s + 5]; data[d + 6] = e[s + 9]; data[d + 7] = e[s + 13];
      data[d + 8] = e[s + 2]; data[d + 9] = e[s + 6]; data[d + 10] = e[s + 10]; data[d + 11] = e[s + 14];
    }
  };
  return true;
}
