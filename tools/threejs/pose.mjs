// Load a BVH or a glTF/GLB with three.js's own loaders, play its (first) clip with an
// AnimationMixer and print the world positions three.js computes, as JSON on stdout:
//   node pose.mjs FILE.bvh  T1,T2,...   → {names: [joint], times, position: [T][J][3]}
//   node pose.mjs FILE.glb  T1,T2,...   → {names: [node], nodes: [glTF node index], times, position}
// Times in seconds (the clip plays once: a time past its end holds the last key). BVH: every joint (End Sites left out), in file order. glTF: every node three.js
// built from a glTF node (parser.associations), in node order. Textures are not decoded (Node has
// no image decoder; they do not move joints). Set up once with: npm ci --prefix tools/threejs
import fs from "node:fs";
import { AnimationMixer, LoopOnce, Vector3 } from "three";
import { BVHLoader } from "three/addons/loaders/BVHLoader.js";
import { GLTFLoader } from "three/addons/loaders/GLTFLoader.js";

function sample(root, clip, objects, times) {
  const mixer = new AnimationMixer(root);
  if (clip) {  // played once and held at its end (a repeating clip wraps to 0 at its last key)
    const action = mixer.clipAction(clip);
    action.setLoop(LoopOnce, 1);
    action.clampWhenFinished = true;
    action.play();
  }
  const v = new Vector3();
  return times.map((t) => {
    mixer.setTime(t);
    root.updateMatrixWorld(true);
    return objects.map((o) => o.getWorldPosition(v).toArray());
  });
}

async function loadGltf(file) {
  const bytes = fs.readFileSync(file);
  const loader = new GLTFLoader();
  loader.register(() => ({ name: "mmdkit_no_textures", loadTexture: () => Promise.resolve(null) }));
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return loader.parseAsync(buffer, "");
}

const [file, timeList] = process.argv.slice(2);
const times = (timeList || "0").split(",").map(Number);
let out;
if (file.toLowerCase().endsWith(".bvh")) {
  const result = new BVHLoader().parse(fs.readFileSync(file, "utf8"));
  // the End Sites are bones too, all named ENDSITE (BVH end sites have no name)
  const joints = result.skeleton.bones.filter((b) => b.name !== "ENDSITE");
  out = { names: joints.map((b) => b.name), times, position: sample(result.skeleton.bones[0], result.clip, joints, times) };
} else {
  const gltf = await loadGltf(file);
  const found = [];
  gltf.scene.traverse((o) => {
    const a = gltf.parser.associations.get(o);
    if (a && a.nodes !== undefined) found.push([a.nodes, o]);
  });
  found.sort((x, y) => x[0] - y[0]);
  const objects = found.map((f) => f[1]);
  out = { names: objects.map((o) => o.name), nodes: found.map((f) => f[0]), times,
          position: sample(gltf.scene, gltf.animations[0], objects, times) };
}
process.stdout.write(JSON.stringify(out) + "\n");
