// Pose a model with a motion in babylon-mmd's JavaScript runtime (headless, physics off) and
// write every bone's world matrix at the requested frames, in float64.
//
// Usage (from tools/reference/, after `npm ci`; make_golden.py runs this):
//   node --import ./register_hook.mjs dump_pose.mjs MODEL.pmx|pmd MOTION.vmd FRAMES.json OUT.bin
// In: FRAMES.json = [frame, ...] (30 fps frame numbers). Out: OUT.bin = float64 (F, B, 16)
// babylon world matrices (row-vector layout: rotation rows 0-2 hold R transposed, row 3 holds the
// translation) and OUT.bin.json = {bones: [name, ...], babylon_mmd: version, corrections: [...]}.
//
// babylon-mmd has faults that MMD (and nanoem, saba, MMDAgent) do not; they are corrected here,
// not copied into the golden data (see ../../../shared/MMD-SEMANTICS.md and docs/conformance.md):
//  1. float32: world matrices live in a Float32Array and babylon Matrix temporaries are float32;
//     IK is chaotic enough that float32 moves knees by ~0.05 units. → float64 everywhere.
//  2. PMD knee (ひざ) limits are PMX Editor's table in degrees (-180..-0.5) used as radians.
//     → the same limits in radians, for every IK link whose name contains ひざ.
//  3. PMD bone type 5 (回転影響下) takes its source from the child field with the IK field as a
//     percentage; MMD takes the full rotation of the bone in the IK field. Type 9 (回転連動,
//     child field × IK field / 100) is ignored. → type 5: IK-field bone, ratio 1; type 9: as said.
//  4. World matrices are reset every frame and bones run in (deform layer, index) order, so a
//     child listed before its parent sees an identity parent. → parents are moved before
//     their children (the order MMD, saba and nanoem evaluate in).
//  5. A PMD whose IK list is not in bone order has its bones re-indexed by the loader, which
//     turns "no parent" (-1) into undefined and fails to load (mokou_A.pmd). → -1 restored.
//  6. Where two bones share a name (sd_mei.pmd has two センター), a motion track drives the last
//     of them; MMD, saba and mmdkit bind the first. → the first.

import fs from "node:fs";

import { NullEngine } from "@babylonjs/core/Engines/nullEngine.js";
import { PerformanceConfigurator } from "@babylonjs/core/Engines/performanceConfigurator.js";
import { LoadAssetContainerAsync } from "@babylonjs/core/Loading/sceneLoader.js";
import { Scene } from "@babylonjs/core/scene.js";
import "babylon-mmd/esm/Loader/pmdLoader.js";
import "babylon-mmd/esm/Loader/pmxLoader.js";
import { PmdReader } from "babylon-mmd/esm/Loader/Parser/pmdReader.js";
import { VmdLoader } from "babylon-mmd/esm/Loader/vmdLoader.js";
import "babylon-mmd/esm/Runtime/Animation/mmdRuntimeModelAnimation.js";
import { MmdRuntime } from "babylon-mmd/esm/Runtime/mmdRuntime.js";

const CORRECTIONS = [
    "float64 world matrices and babylon Matrix temporaries",
    "PMD knee (ひざ) IK limits in radians: x in [-pi, -0.5 deg]",
    "PMD type 5 from the IK-field bone with ratio 1; type 9 from the child-field bone, ratio IK field / 100",
    "parents evaluated before their children",
    "PMD re-indexed for its IK order: 'no parent' kept as -1 (the loader failed)",
    "a motion track drives the first bone of its name, not the last",
];

// 1. float64 matrices (converts the matrices babylon already made, e.g. static temporaries)
PerformanceConfigurator.SetMatrixPrecision(true);

// 2. PMD knee limits: [minX, maxX, minY, maxY, minZ, maxZ] in radians, matched like mmdkit's reader
const KNEE_LIMIT = [-Math.PI, -0.5 * Math.PI / 180, 0, 0, 0, 0];
class KneeLimitTable extends Map {
    get(name) {
        return name.includes("ひざ") ? KNEE_LIMIT : undefined;
    }
}
PmdReader._IkAngleLimitTable = new KneeLimitTable();

// 3. PMD type 5 / 9 bones, rewritten into what babylon's converter reads for its "type 5"
const ROTATE_EFFECT = 5;
const ROTATE_RATIO = 9;
const convertBones = PmdReader._ConvertBones;
PmdReader._ConvertBones = function (bones, ...rest) {
    for (const bone of bones) {
        if (bone.type === ROTATE_EFFECT) { // babylon: source = tailIndex, ratio = ikIndex / 100
            bone.tailIndex = bone.ikIndex;
            bone.ikIndex = 100;
        } else if (bone.type === ROTATE_RATIO) {
            bone.type = ROTATE_EFFECT;
        }
    }
    const converted = convertBones.call(this, bones, ...rest);
    for (const bone of converted) { // 5. "no parent" lost when the IK list is not in bone order
        if (bone.parentBoneIndex === undefined) bone.parentBoneIndex = -1;
        if (bone.tailPosition === undefined) bone.tailPosition = -1;
    }
    return converted;
};

// 4. parents first: each bone is placed after its not yet placed ancestors
function parentsFirst(sorted) {
    const placed = new Set();
    const out = [];
    for (const bone of sorted) {
        const chain = [];
        for (let b = bone; b !== null && !placed.has(b) && chain.length <= sorted.length; b = b.parentBone) {
            chain.push(b);
        }
        for (let i = chain.length - 1; i >= 0; --i) {
            if (!placed.has(chain[i])) {
                placed.add(chain[i]);
                out.push(chain[i]);
            }
        }
    }
    return out;
}

async function main() {
    const [modelPath, motionPath, framesPath, outPath] = process.argv.slice(2);
    const frames = JSON.parse(fs.readFileSync(framesPath, "utf8"));
    const engine = new NullEngine();
    const scene = new Scene(engine);
    const ext = modelPath.toLowerCase().endsWith(".pmd") ? ".pmd" : ".pmx";
    const container = await LoadAssetContainerAsync(new Uint8Array(fs.readFileSync(modelPath)), scene, {
        pluginExtension: ext,
        pluginOptions: { mmdmodel: { loggingEnabled: false, materialBuilder: null } },
    });
    container.addAllToScene();
    const mesh = container.meshes.find((m) => m.metadata?.isMmdModel) ?? container.meshes[0];
    const runtime = new MmdRuntime(scene);
    const model = runtime.createMmdModel(mesh);
    for (const bone of model.runtimeBones) {
        bone.worldMatrix = new Float64Array(16);
    }
    model._sortedRuntimeBones = parentsFirst(model._sortedRuntimeBones);

    const vmd = new VmdLoader(scene);
    vmd.loggingEnabled = false;
    const motionBytes = new Uint8Array(fs.readFileSync(motionPath));
    const animation = await vmd.loadFromBufferAsync("motion", motionBytes.buffer);
    // 6. a motion track binds to the first bone of its name (babylon's name map keeps the last)
    const seen = new Set();
    const renamed = [];
    for (const bone of model.skeleton.bones) {
        if (seen.has(bone.name)) {
            renamed.push([bone, bone.name]);
            bone.name += "\u0000duplicate";
        }
        seen.add(bone.name);
    }
    model.setRuntimeAnimation(model.createRuntimeAnimation(animation));
    for (const [bone, name] of renamed) bone.name = name;

    const bones = model.runtimeBones;
    const out = new Float64Array(frames.length * bones.length * 16);
    for (let f = 0; f < frames.length; ++f) {
        model.beforePhysics(frames[f]);
        model.afterPhysics();
        for (let b = 0; b < bones.length; ++b) {
            out.set(bones[b].worldMatrix, (f * bones.length + b) * 16);
        }
    }
    fs.writeFileSync(outPath, Buffer.from(out.buffer));
    const version = JSON.parse(fs.readFileSync(new URL("./node_modules/babylon-mmd/package.json", import.meta.url), "utf8")).version;
    fs.writeFileSync(outPath + ".json", JSON.stringify({
        bones: bones.map((b) => b.name),
        babylon_mmd: version,
        corrections: CORRECTIONS,
    }));
    engine.dispose();
}

await main();
