// Load a VRM with three-vrm and a VRM Animation (.vrma) with three-vrm-animation's
// VRMAnimationLoaderPlugin, make the VRM's clip (createVRMAnimationClip), play it once and print,
// as JSON on stdout, the humanoid bones' normalized world rotations and positions three-vrm gives:
//   node vrma_pose.mjs MODEL.vrm DANCE.vrma T1,T2,...
//   → {bones: [VRM humanoid name], times, rotation: [T][J][4] x y z w, position: [T][J][3] metres,
//      expressions: {preset: [T] weight}}
// Times in seconds. Rotations are the normalized bones' world quaternions (VRM's T-pose = identity,
// glTF space: right-handed, +y up) after vrm.update (the raw bones follow them). Textures are not
// decoded (Node has no image decoder; they do not move bones). Set up with: npm ci --prefix tools/threejs
import fs from "node:fs";
import { AnimationMixer, LoopOnce, Quaternion, Vector3 } from "three";
import { GLTFLoader } from "three/addons/loaders/GLTFLoader.js";
import { VRMLoaderPlugin } from "@pixiv/three-vrm";
import { VRMAnimationLoaderPlugin, createVRMAnimationClip } from "@pixiv/three-vrm-animation";

async function load(file) {
  const loader = new GLTFLoader();
  loader.register(() => ({ name: "mmdkit_no_textures", loadTexture: () => Promise.resolve(null) }));
  loader.register((parser) => new VRMLoaderPlugin(parser));
  loader.register((parser) => new VRMAnimationLoaderPlugin(parser));
  const bytes = fs.readFileSync(file);
  return loader.parseAsync(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength), "");
}

const [modelFile, animFile, timeList] = process.argv.slice(2);
const times = (timeList || "0").split(",").map(Number);
const vrm = (await load(modelFile)).userData.vrm;
const anim = (await load(animFile)).userData.vrmAnimations[0];
const clip = createVRMAnimationClip(anim, vrm);
const mixer = new AnimationMixer(vrm.scene);
const action = mixer.clipAction(clip);
action.setLoop(LoopOnce, 1);
action.clampWhenFinished = true;
action.play();
const bones = Object.keys(vrm.humanoid.humanBones).filter((n) => vrm.humanoid.getNormalizedBoneNode(n));
const presets = vrm.expressionManager ? [...anim.expressionTracks.preset.keys()] : [];
const out = { bones, times, rotation: [], position: [], expressions: Object.fromEntries(presets.map((p) => [p, []])) };
const q = new Quaternion();
const v = new Vector3();
for (const t of times) {
  mixer.setTime(t);
  vrm.update(0);
  vrm.scene.updateMatrixWorld(true);
  out.rotation.push(bones.map((n) => vrm.humanoid.getNormalizedBoneNode(n).getWorldQuaternion(q).toArray()));
  out.position.push(bones.map((n) => vrm.humanoid.getRawBoneNode(n).getWorldPosition(v).toArray()));
  for (const p of presets) out.expressions[p].push(vrm.expressionManager.getValue(p));
}
process.stdout.write(JSON.stringify(out) + "\n");
