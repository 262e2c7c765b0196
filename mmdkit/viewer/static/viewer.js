// mmdkit viewer page: loads /model.glb (rest pose) and poses it from frames the server streams
// (/frames: per bone world position + quaternion, then morph target weights, glTF space), at the
// browser's frame rate, interpolating between motion frames. window.__mmdkit is the test hook.
import * as THREE from 'three';
import { GLTFLoader } from 'three/addons/loaders/GLTFLoader.js';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import * as SkeletonUtils from 'three/addons/utils/SkeletonUtils.js';
import { Overlays } from '/static/overlays.js';
import { compactMesh, applyMorphs, morphData, uniformSkinning } from '/static/mesh.js';

const CHUNK = 60;                     // frames per /frames request (2 s)
const $ = (id) => document.getElementById(id);
// asked for at once and together: the scene info, the model, and the first two frames (so the first
// draw is already posed; physics=1 is the page's starting setting, the server answers without
// physics for a model that has none)
const infoAsked = fetch('/info.json').then((r) => r.json());
const glbAsked = new GLTFLoader().loadAsync('/model.glb');
let head = null;                      // Float32Array: frames 0 and 1 until their chunk is in
const early = {};                     // ms since the page opened: info, GLB parsed, first frames in
glbAsked.then(() => { early.glbParsed = performance.now(); });
fetch('/frames?physics=1&start=0&count=2').then((r) => r.arrayBuffer())
  .then((buf) => { head = new Float32Array(buf); early.head = performance.now(); }).catch(() => {});
const info = await infoAsked;
early.info = performance.now();
const F = info.num_frames, B = info.bone_name.length, STRIDE = info.stride, FPS = info.fps;
const scale = info.notes.scale || 0.08;
$('title').textContent = info.name || 'mmdkit viewer';
$('last').textContent = F - 1;
$('timeline').max = F - 1;
$('report').textContent = info.notes.report || '(no motion)';
if (!info.has_physics) { $('physics').checked = false; $('physics').disabled = true; }
if (!info.has_camera) $('follow').disabled = true; else $('follow').checked = true;

// --- renderer, scene, camera -------------------------------------------------------------------
const view = $('view');
// multisampling unless the browser draws in software (SwiftShader, llvmpipe: it would cost most of
// the frame); ?aa=1 / ?aa=0 decide
const params = new URLSearchParams(location.search);
const glRenderer = rendererName();
const software = /swiftshader|llvmpipe|softpipe|software/i.test(glRenderer);
const antialias = params.has('aa') ? params.get('aa') !== '0' : !software;
// ?res=0.5: the drawing buffer at half the window's pixels, upscaled by the browser (software GL
// default: see RES_SOFTWARE); ?mat=toon|lambert|basic: the character's material
const RES_SOFTWARE = 0.5;
const res = params.has('res') ? Math.min(Math.max(parseFloat(params.get('res')) || 1, 0.25), 2)
  : (software ? RES_SOFTWARE : 1);
const materialKind = params.get('mat') || 'toon';
const renderer = new THREE.WebGLRenderer({ antialias, preserveDrawingBuffer: params.get('pdb') === '1',
                                           powerPreference: 'high-performance' });
renderer.setPixelRatio((software ? 1 : window.devicePixelRatio) * res);
function rendererName() {  // the WebGL renderer's name (SwiftShader, llvmpipe, a GPU's)
  const gl = document.createElement('canvas').getContext('webgl2');
  if (!gl) return '';
  const ext = gl.getExtension('WEBGL_debug_renderer_info');
  const name = ext ? gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
  gl.getExtension('WEBGL_lose_context')?.loseContext();
  return String(name);
}
view.appendChild(renderer.domElement);
const scene = new THREE.Scene();
scene.background = new THREE.Color(0xe8ebf0);
scene.add(new THREE.HemisphereLight(0xffffff, 0x8a8a9a, 2.2));
const sun = new THREE.DirectionalLight(0xffffff, 1.6);
sun.position.set(-1, 3, 2);
scene.add(sun);
const floor = new THREE.Group();
const floorPlane = new THREE.Mesh(new THREE.CircleGeometry(10, 64),
                                  new (software ? THREE.MeshBasicMaterial : THREE.MeshLambertMaterial)({ color: 0xc9ced8 }));
floorPlane.rotation.x = -Math.PI / 2;
floor.add(floorPlane);
const grid = new THREE.GridHelper(20, 40, 0x9aa1ad, 0xb4bac4);
grid.position.y = 0.001;
floor.add(grid);
scene.add(floor);

const camera = new THREE.PerspectiveCamera(30, 1, 0.05, 500);
const controls = new OrbitControls(camera, renderer.domElement);
function resize() {
  const w = view.clientWidth || 640, h = view.clientHeight || 480;
  renderer.setSize(w, h);
  camera.aspect = w / h;
  camera.updateProjectionMatrix();
}
window.addEventListener('resize', resize);
resize();

// --- the character -------------------------------------------------------------------------------
const gltf = await glbAsked;
const glbLoadedMs = performance.now();
scene.add(gltf.scene);
const meshes = [];
let joints = [];
gltf.scene.traverse((o) => {
  if (!o.isMesh) return;
  o.frustumCulled = false;
  o.material = toon(o.material);
  meshes.push(o);
  if (o.isSkinnedMesh && !joints.length) joints = o.skeleton.bones;
});
frameCharacter(new THREE.Box3().setFromObject(gltf.scene));
for (const bone of joints) { bone.matrixAutoUpdate = false; bone.matrixWorldAutoUpdate = false; }
const targetMorph = info.target_morph;  // the model morph of each GLB morph target (-1: none)
// ?lod=0.4: the character simplified to at most that share of its triangles, and its triangles
// put in vertex-cache order (?order=0: not), once the first frame is drawn (software GL default:
// LOD_SOFTWARE; ?lod=1: all of them as they are, the GPU default); ?skin=texture: three.js' bone
// texture (default: a uniform array where the vertex shader has room)
const reorder = params.get('order') !== '0';
const LOD_SOFTWARE = 0.35;
const lodRatio = params.has('lod') ? Math.min(Math.max(parseFloat(params.get('lod')) || 1, 0.05), 1) : (software ? LOD_SOFTWARE : 1);
const sources = meshes.map((m) => m.geometry);  // the GLB's geometries (until the LOD is made)
const countTriangles = () => meshes.reduce((t, m) => t + m.geometry.index.count / 3, 0);
meshes.forEach((mesh, i) => compactMesh(mesh, sources[i], targetMorph, { reorder: false }));  // soon: first frame
const skinning = params.get('skin') !== 'texture' && meshes.every((m) => !m.isSkinnedMesh || uniformSkinning(renderer, m)) ? 'uniform' : 'texture';
// what the page chose to draw with (shown in the timings panel; __mmdkit.quality); lodDone: the
// character is drawn with ``triangles`` (of ``trianglesBefore``) from now on
const quality = { renderer: glRenderer, software, antialias, pixelRatio: renderer.getPixelRatio(), skinning,
                  triangleOrder: reorder && lodRatio < 1 ? 'vertex cache' : 'model', material: materialKind, lod: lodRatio,
                  triangles: countTriangles(), trianglesBefore: countTriangles(), lodDone: lodRatio >= 1 };
// a crowd (--crowd N): N characters where mmdkit render puts them (info.crowd_offset, glTF
// space), character k at motion frame f + k * info.crowd_frame_offset; the others are clones
// sharing the first one's geometry, so face and other vertex morphs follow the first character
const crowd = (info.crowd_offset || [[0, 0, 0]]).map((o, k) => {
  const root = k === 0 ? gltf.scene : SkeletonUtils.clone(gltf.scene);
  let js = k === 0 ? joints : [];
  const ms = k === 0 ? meshes : [];  // in the first one's order
  if (k > 0) {
    root.traverse((o2) => {
      if (!o2.isMesh) return;
      ms.push(o2);
      o2.frustumCulled = false;
      if (!o2.isSkinnedMesh) return;
      if (!js.length) js = o2.skeleton.bones;
      if (skinning === 'uniform') { o2.material = [].concat(o2.material).map((m) => m.clone()); if (o2.material.length === 1) o2.material = o2.material[0]; uniformSkinning(renderer, o2); }
    });
    for (const bone of js) { bone.matrixAutoUpdate = false; bone.matrixWorldAutoUpdate = false; }
    scene.add(root);
  }
  return { root, joints: js, meshes: ms, offset: new THREE.Matrix4().makeTranslation(o[0], o[1], o[2]), frames: k * (info.crowd_frame_offset || 0) };
});

// the lighter character (meshoptimizer's simplifier, Tipsify: see mesh.js), made after the first
// frame is drawn (the first frame does not wait for it), a primitive at a time between frames
async function makeLod() {
  const { MeshoptSimplifier } = await import('/static/meshopt/meshopt_simplifier.js');
  await MeshoptSimplifier.ready;
  const t0 = performance.now();
  for (let i = 0; i < meshes.length; i++) {
    await new Promise((r) => setTimeout(r, 0));
    compactMesh(meshes[i], sources[i], targetMorph, { reorder, lod: { simplifier: MeshoptSimplifier, ratio: lodRatio } });
    for (const c of crowd) c.meshes[i].geometry = meshes[i].geometry;
  }
  sources.length = 0;
  Object.assign(quality, { triangles: countTriangles(), lodDone: true });
  marks.lod = performance.now(); marks.lodMs = marks.lod - t0;
}
if (crowd.length > 1) frameCharacter(crowd.reduce((box, c) => box.union(new THREE.Box3().setFromObject(c.root).applyMatrix4(c.offset)), new THREE.Box3()));
const marks = Object.assign(early, { glb: glbLoadedMs, prepared: performance.now() });  // ms since the page opened

// the orbit camera frames the character's rest pose: the whole height, from the front (+z in glTF)
function frameCharacter(box) {
  if (box.isEmpty()) box.set(new THREE.Vector3(-0.5, 0, -0.5), new THREE.Vector3(0.5, 1.7, 0.5));
  const size = box.getSize(new THREE.Vector3()), center = box.getCenter(new THREE.Vector3());
  const fit = Math.max(size.y, size.x / camera.aspect) * 1.3;  // room for the dance's reach
  controls.target.copy(center);
  camera.position.set(center.x, center.y + 0.2 * size.y, center.z + fit / (2 * Math.tan(THREE.MathUtils.degToRad(camera.fov / 2))));
  camera.near = fit / 100; camera.far = fit * 200;
  camera.updateProjectionMatrix();
  controls.update();
}

// MMD's look (and cheap in software GL): toon shading with the model's textures
function toon(m) {
  if (Array.isArray(m)) return m.map(toon);
  if (m.map && software) { m.map.generateMipmaps = false; m.map.minFilter = THREE.LinearFilter; }  // no mip chains to build in software
  const Material = { toon: THREE.MeshToonMaterial, lambert: THREE.MeshLambertMaterial, basic: THREE.MeshBasicMaterial }[materialKind] || THREE.MeshToonMaterial;
  const t = new Material({ color: m.color, map: m.map, transparent: m.transparent, opacity: m.opacity,
                                         alphaTest: m.alphaTest, side: m.side, name: m.name });
  m.dispose();
  return t;
}

const jointBone = info.joint_bone;
const boneMat = Array.from({ length: B }, () => new THREE.Matrix4());
const overlays = new Overlays(scene, info, boneMat, scale);
for (const g of Object.values(overlays.groups)) g.applyMatrix4(crowd[0].offset);  // on the first character

// --- frames: fetched in chunks, kept per physics setting ------------------------------------------
const chunks = new Map();             // "p:c" -> Float32Array (complete) | 'pending'
function chunkKey(phys, c) { return (phys ? 1 : 0) + ':' + c; }
function want(phys, c) {
  if (c < 0 || c * CHUNK >= F) return;
  const key = chunkKey(phys, c);
  if (chunks.has(key)) return;
  chunks.set(key, 'pending');
  fetch(`/frames?physics=${phys ? 1 : 0}&start=${c * CHUNK}&count=${CHUNK}`)
    .then((r) => r.arrayBuffer())
    .then((buf) => {
      const rows = new Float32Array(buf);
      const expect = Math.min(CHUNK, F - c * CHUNK) * STRIDE;
      if (rows.length === expect) chunks.set(key, rows); else chunks.delete(key);  // not baked yet: ask again
      if (marks.frames === undefined && rows.length === expect) marks.frames = performance.now();
      if (c === 0 && rows.length === expect) head = null;
    })
    .catch(() => chunks.delete(key));
}
function row(phys, f) {
  const c = Math.floor(f / CHUNK), data = chunks.get(chunkKey(phys, c));
  if (!(data instanceof Float32Array)) {
    const inHead = head && (phys || !info.has_physics) && (f + 1) * STRIDE <= head.length;
    return inHead ? head.subarray(f * STRIDE, (f + 1) * STRIDE) : null;
  }
  const r = f - c * CHUNK;
  return data.subarray(r * STRIDE, (r + 1) * STRIDE);
}

const pa = new THREE.Vector3(), pb = new THREE.Vector3(), qa = new THREE.Quaternion(), qb = new THREE.Quaternion();
const one = new THREE.Vector3(1, 1, 1);
function applyPose(ra, rb, w, member = crowd[0]) {
  for (let b = 0; b < B; b++) {
    const o = b * 7;
    pa.set(ra[o], ra[o + 1], ra[o + 2]); pb.set(rb[o], rb[o + 1], rb[o + 2]);
    qa.set(ra[o + 3], ra[o + 4], ra[o + 5], ra[o + 6]); qb.set(rb[o + 3], rb[o + 4], rb[o + 5], rb[o + 6]);
    if (w > 0) { pa.lerp(pb, w); qa.slerp(qb, w); }
    boneMat[b].compose(pa, qa, one);
  }
  const js = member.joints;
  for (let j = 0; j < js.length; j++) if (jointBone[j] >= 0) js[j].matrixWorld.multiplyMatrices(member.offset, boneMat[jointBone[j]]);
  if (member === crowd[0]) for (const mesh of meshes) applyMorphs(mesh, ra, rb, w, B * 7);
}

// --- camera motion ----------------------------------------------------------------------------------
let cameraTrack = null;
if (info.has_camera) cameraTrack = new Float32Array(await (await fetch('/camera.bin')).arrayBuffer());
function followCamera(f) {
  const a = Math.floor(f), b = Math.min(a + 1, F - 1), w = f - a, A = a * 8, Bo = b * 8;
  const lerp = (k) => cameraTrack[A + k] + (cameraTrack[Bo + k] - cameraTrack[A + k]) * w;
  camera.position.set(lerp(0), lerp(1), lerp(2));
  qa.set(cameraTrack[A + 3], cameraTrack[A + 4], cameraTrack[A + 5], cameraTrack[A + 6]);
  qb.set(cameraTrack[Bo + 3], cameraTrack[Bo + 4], cameraTrack[Bo + 5], cameraTrack[Bo + 6]);
  camera.quaternion.copy(qa.slerp(qb, w));
  if (Math.abs(camera.fov - lerp(7)) > 1e-3) { camera.fov = lerp(7); camera.updateProjectionMatrix(); }
}

// --- audio (Web Audio: starts at the playhead, the playhead follows it) --------------------------------
let audio = null, source = null, audioStart = 0;
if (info.has_audio) {
  const ctx = new AudioContext();
  fetch('/audio').then((r) => r.arrayBuffer()).then((buf) => ctx.decodeAudioData(buf))
    .then((buffer) => { audio = { ctx, buffer }; }).catch((e) => { $('status').textContent = 'audio: ' + e; });
}
function audioPlaying() { return source !== null && audio.ctx.state === 'running'; }
function startAudio() {
  if (!audio) return;
  audio.ctx.resume();
  source = audio.ctx.createBufferSource();
  source.buffer = audio.buffer;
  source.connect(audio.ctx.destination);
  source.start(0, Math.min(time, audio.buffer.duration));
  audioStart = audio.ctx.currentTime - time;
}
function stopAudio() { if (source) { source.stop(); source.disconnect(); source = null; } }

// --- playback state ------------------------------------------------------------------------------------
let time = 0, playing = false, physics = $('physics').checked, shown = -1, shownPhysics = physics;
let firstFrameMs = null, last = null, panelShown = -1e9;
const frameTimes = [], poseTimes = [];  // ms between frames; ms of posing (bones, morphs, overlays)
function setPlaying(p) {
  playing = p;
  $('play').textContent = p ? '❚❚' : '▶';
  if (p) startAudio(); else stopAudio();
}
function seek(f) {
  time = Math.min(Math.max(0, f), F - 1) / FPS;
  if (playing) { stopAudio(); startAudio(); }
}
$('play').onclick = () => setPlaying(!playing);
$('timeline').oninput = (e) => seek(parseFloat(e.target.value));
$('physics').onchange = (e) => { physics = e.target.checked; };
for (const id of ['bones', 'bodies', 'hitboxes']) $(id).onchange = (e) => overlays.show(id, e.target.checked);
$('floor').onchange = (e) => { floor.visible = e.target.checked; };
window.addEventListener('keydown', (e) => { if (e.code === 'Space') { setPlaying(!playing); e.preventDefault(); } });
renderer.domElement.addEventListener('click', (e) => {
  const r = renderer.domElement.getBoundingClientRect();
  const hit = overlays.pick(camera, ((e.clientX - r.left) / r.width) * 2 - 1, -((e.clientY - r.top) / r.height) * 2 + 1);
  $('picked').textContent = hit;
});

let drawn = 0;  // frames drawn so far (tests wait on it, not on the clock)
function tick(now) {
  requestAnimationFrame(tick);
  const elapsed = last === null ? 0 : now - last, dt = Math.min(elapsed, 250);  // a stall does not jump ahead
  if (last !== null) frameTimes.push(elapsed);
  last = now;
  if (frameTimes.length > 600) frameTimes.shift();
  if (playing) {
    time = audio && audioPlaying() ? audio.ctx.currentTime - audioStart : time + dt / 1000;
    if (time * FPS >= F - 1) { time = 0; if (source) { stopAudio(); startAudio(); } }
  }
  const f = Math.min(time * FPS, F - 1), a = Math.floor(f), b = Math.min(a + 1, F - 1);
  const c = Math.floor(a / CHUNK);
  for (let k = 0; k < 4; k++) want(physics, c + k);  // this chunk and 6 s ahead
  const ra = row(physics, a), rb = row(physics, b);
  if (ra && rb) {
    const t0 = performance.now();
    for (let k = crowd.length - 1; k > 0; k--) {  // the others first: boneMat ends as the first's (overlays)
      const fk = Math.min(f + crowd[k].frames, F - 1), ak = Math.floor(fk), rka = row(physics, ak), rkb = row(physics, Math.min(ak + 1, F - 1));
      if (rka && rkb) applyPose(rka, rkb, fk - ak, crowd[k]);
      if (k === crowd.length - 1) for (let j = 0; j < 2; j++) want(physics, Math.floor(ak / CHUNK) + j);
    }
    applyPose(ra, rb, f - a);
    shown = f; shownPhysics = physics;
    overlays.update();
    poseTimes.push(performance.now() - t0);
    if (poseTimes.length > 600) poseTimes.shift();
  }
  if (cameraTrack && $('follow').checked) { controls.enabled = false; followCamera(f); }
  else { controls.enabled = true; controls.update(); }
  if ((now - panelShown > 100 || !playing) && $('frame').textContent !== f.toFixed(1)) {  // the panel at 10 Hz while playing: each update repaints it
    panelShown = now;
    $('frame').textContent = f.toFixed(1);
    if (document.activeElement !== $('timeline')) $('timeline').value = f;
  }
  if (firstFrameMs === null && shown < 0 && now - marks.prepared < FIRST_POSE_WAIT_MS) return;
  if (firstFrameMs === null && shown >= 0) marks.render = performance.now();
  renderer.render(scene, camera);
  drawn++;
  if (marks.rendered === undefined) marks.rendered = performance.now();
  if (firstFrameMs === null && shown >= 0) {  // the character drawn posed
    firstFrameMs = performance.now();
    if (!quality.lodDone) makeLod().catch((e) => { $('status').textContent = 'lod: ' + e; });
  }
}
// until the first frames come (the bake's first two), the programs compile and the textures upload
// without a draw: the first draw is posed (one software-GL frame sooner); drawn unposed after
// FIRST_POSE_WAIT_MS
const FIRST_POSE_WAIT_MS = 3000;
renderer.compileAsync(gltf.scene, camera, scene).catch(() => {});  // the character's programs, the scene's lights
scene.traverse((o) => { for (const m of [].concat(o.material || [])) if (m.map) renderer.initTexture(m.map); });
requestAnimationFrame(tick);

// --- status and timings panel --------------------------------------------------------------------------
function stats() {
  const t = frameTimes.slice(-120).sort((x, y) => x - y);
  if (!t.length) return null;
  const mean = t.reduce((s, x) => s + x, 0) / t.length;
  return { mean, p50: t[Math.floor(t.length / 2)], p95: t[Math.floor(t.length * 0.95)], max: t[t.length - 1] };
}
async function poll() {
  try {
    const st = await (await fetch('/state.json')).json();
    const s = stats();
    const baked = info.has_physics ? st.baked.physics : st.baked.kinematic;
    $('status').textContent = (st.error ? 'bake failed: ' + st.error + ' · ' : '')
      + (baked < F ? `baking ${baked}/${F} · ` : '') + (s ? `${(1000 / s.mean).toFixed(0)} fps (${s.mean.toFixed(1)} ms/frame)` : '');
    const lines = Object.entries(info.notes.timings || {}).map(([k, v]) => `${k}: ${v.toFixed(0)} ms`);
    const ms = (x) => (x === undefined || x === null ? '…' : x.toFixed(0));
    lines.push(`page: GLB loaded ${ms(marks.glb)} ms, first draw ${ms(marks.rendered)} ms, frames ${ms(marks.frames)} ms, first posed frame ${ms(firstFrameMs)} ms`);
    lines.push(`posing per frame (${info.has_physics ? 'with physics' : 'no physics'}):`);
    for (const [k, v] of Object.entries(st.stage_ms)) lines.push(`  ${k}: ${v.toFixed(3)} ms`);
    if (s) lines.push(`browser frame: mean ${s.mean.toFixed(1)}, median ${s.p50.toFixed(1)}, p95 ${s.p95.toFixed(1)}, max ${s.max.toFixed(1)} ms`);
    lines.push(`drawing: ${quality.software ? 'software GL' : 'GPU'} (${quality.renderer || '?'}), ${quality.antialias ? 'MSAA' : 'no MSAA'}, `
               + `pixel ratio ${quality.pixelRatio}, bones as ${quality.skinning === 'uniform' ? 'uniforms' : 'a texture'}, ${quality.triangleOrder} triangle order, `
               + `${quality.triangles} of the model's ${quality.trianglesBefore} triangles`
               + (marks.lodMs ? ` (simplified in ${marks.lodMs.toFixed(0)} ms after the first frame)` : ''));
    $('timings').textContent = lines.join('\n');
  } catch (e) { $('status').textContent = 'server gone'; }
  setTimeout(poll, 1000);
}
poll();

// --- test hook ------------------------------------------------------------------------------------------
const v = new THREE.Vector3(), q = new THREE.Quaternion(), sc = new THREE.Vector3(), mm = new THREE.Matrix4();
window.__mmdkit = {
  info,
  ready: () => firstFrameMs !== null,
  firstFrameMs: () => firstFrameMs,
  frame: () => shown,
  drawn: () => drawn,
  physics: () => shownPhysics,
  seek: (f) => seek(f),
  play: () => setPlaying(true),
  pause: () => setPlaying(false),
  setPhysics: (p) => { $('physics').checked = p; physics = p; },
  show: (id, on) => { $(id).checked = on; overlays.show(id, on); },
  frameTimes: () => frameTimes.slice(),
  resetTimes: () => { frameTimes.length = 0; poseTimes.length = 0; },
  poseTimes: () => poseTimes.slice(),
  marks: () => marks,
  // morph weights the meshes show now: {model morph index: weight}
  morphWeights: () => Object.fromEntries(meshes.flatMap((m) => morphData.get(m).morphs.map((x, k) => [x.morph, morphData.get(m).weights[k]]))),
  camera: () => ({ following: !controls.enabled, position: camera.position.toArray(), fov: camera.fov }),  // glTF space
  audio: () => ({ decoded: audio !== null, duration: audio ? audio.buffer.duration : 0,
                  clock: playing && audio && audioPlaying() ? 'audio' : 'page' }),
  antialias,
  glRenderer,
  quality,
  three: { THREE, renderer, scene, camera, character: gltf.scene, floor },
  // the rendered skeleton's joints: world position and rotation (x y z w), MMD space (units, z flipped back)
  // crowd: [{offset (MMD space), frames ahead}]; bonePositions(k): character k's, less its offset
  crowd: () => crowd.map((c) => ({ offset: [c.offset.elements[12] / scale, c.offset.elements[13] / scale, -c.offset.elements[14] / scale], frames: c.frames })),
  bonePositions: (k = 0) => crowd[k].joints.map((bone, j) => {
    mm.copy(crowd[k].offset).invert().multiply(bone.matrixWorld).decompose(v, q, sc);
    return { bone: jointBone[j], name: info.bone_name[jointBone[j]], position: [v.x / scale, v.y / scale, -v.z / scale],
             rotation: [-q.x, -q.y, q.z, q.w] };
  }),
};
