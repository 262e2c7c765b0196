// Overlays drawn from the streamed bone matrices (glTF space): bones (lines to parents), bone hit
// boxes (mmdkit.skinning.bounds.BoneBoxes: around the vertices each bone moves most; click one to
// name it), rigid bodies (wire shapes: static grey, dynamic orange, dynamic
// following its bone yellow) and physics joints (small red spheres).
import * as THREE from 'three';

const SHAPE_SPHERE = 0, SHAPE_BOX = 1, SHAPE_CAPSULE = 2;
const BODY_COLOR = [0x8a8f98, 0xff8a1c, 0xe5c100];

function frameMatrix(f) {
  return new THREE.Matrix4().compose(new THREE.Vector3(f[0], f[1], f[2]),
                                     new THREE.Quaternion(f[3], f[4], f[5], f[6]), new THREE.Vector3(1, 1, 1));
}

export class Overlays {
  constructor(scene, info, boneMat, scale) {
    this.info = info; this.boneMat = boneMat;
    const B = boneMat.length, parent = info.bone_parent;
    this.groups = { bones: new THREE.Group(), hitboxes: new THREE.Group(), bodies: new THREE.Group() };
    for (const g of Object.values(this.groups)) { g.visible = false; scene.add(g); }
    // bones: a segment from each bone to its parent
    this.links = [];
    for (let b = 0; b < B; b++) if (parent[b] >= 0 && parent[b] < B) this.links.push([b, parent[b]]);
    this.linePos = new Float32Array(this.links.length * 6);
    const lg = new THREE.BufferGeometry();
    lg.setAttribute('position', new THREE.BufferAttribute(this.linePos, 3));
    this.lines = new THREE.LineSegments(lg, new THREE.LineBasicMaterial({ color: 0x1f6fff, depthTest: false }));
    this.lines.renderOrder = 10; this.lines.frustumCulled = false;
    this.groups.bones.add(this.lines);
    // hit boxes: a box per bone that moves vertices, in the bone's frame (offset from the bone, size)
    this.boxOffset = info.hitbox_center.map((c) => new THREE.Matrix4().makeTranslation(c[0], c[1], c[2]));
    this.boxSize = info.hitbox_size.map((s) => new THREE.Vector3(s[0], s[1], s[2]));
    this.boxes = new THREE.InstancedMesh(new THREE.BoxGeometry(1, 1, 1),
      new THREE.MeshBasicMaterial({ color: 0x00a0a0, wireframe: true, depthTest: false }), Math.max(1, this.boxSize.length));
    this.boxes.count = this.boxSize.length;
    this.boxes.renderOrder = 11; this.boxes.frustumCulled = false;
    this.groups.hitboxes.add(this.boxes);
    // rigid bodies and joints
    this.bodyRest = info.body_rest.map(frameMatrix);
    this.bodyRestInv = this.bodyRest.map((m) => m.clone().invert());
    this.bodies = info.body_shape.map((shape, i) => {
      const s = info.body_size[i];
      const geo = shape === SHAPE_SPHERE ? new THREE.SphereGeometry(s[0], 12, 8)
        : shape === SHAPE_BOX ? new THREE.BoxGeometry(2 * s[0], 2 * s[1], 2 * s[2])
        : new THREE.CapsuleGeometry(s[0], s[1], 4, 10);
      const m = new THREE.Mesh(geo, new THREE.MeshBasicMaterial({ color: BODY_COLOR[info.body_dynamic[i]] || 0xffffff,
                                                                 wireframe: true, depthTest: false }));
      m.matrixAutoUpdate = false; m.renderOrder = 12; m.frustumCulled = false;
      this.groups.bodies.add(m);
      return m;
    });
    this.jointRest = info.joint_rest.map(frameMatrix);
    const jg = new THREE.SphereGeometry(0.012, 8, 6), jm = new THREE.MeshBasicMaterial({ color: 0xe02020, depthTest: false });
    this.joints = this.jointRest.map(() => {
      const m = new THREE.Mesh(jg, jm);
      m.matrixAutoUpdate = false; m.renderOrder = 13; m.frustumCulled = false;
      this.groups.bodies.add(m);
      return m;
    });
    this.tmp = new THREE.Matrix4(); this.v = new THREE.Vector3();
  }

  show(id, on) { this.groups[id].visible = on; }

  update() {
    const { boneMat, info } = this, v = this.v;
    if (this.groups.bones.visible) {
      this.links.forEach(([b, p], k) => {
        v.setFromMatrixPosition(boneMat[b]); v.toArray(this.linePos, k * 6);
        v.setFromMatrixPosition(boneMat[p]); v.toArray(this.linePos, k * 6 + 3);
      });
      this.lines.geometry.attributes.position.needsUpdate = true;
    }
    if (this.groups.hitboxes.visible) {
      for (let b = 0; b < this.boxSize.length; b++) {
        this.tmp.multiplyMatrices(boneMat[b], this.boxOffset[b]).scale(this.boxSize[b]);
        this.boxes.setMatrixAt(b, this.tmp);
      }
      this.boxes.instanceMatrix.needsUpdate = true;
      this.boxes.computeBoundingSphere();
    }
    if (this.groups.bodies.visible) {
      const rest = info.bone_rest;
      this.bodies.forEach((m, i) => {
        const bone = info.body_bone[i];
        if (bone >= 0 && bone < boneMat.length) {
          this.tmp.makeTranslation(-rest[bone][0], -rest[bone][1], -rest[bone][2]);
          m.matrix.multiplyMatrices(boneMat[bone], this.tmp).multiply(this.bodyRest[i]);
        } else m.matrix.copy(this.bodyRest[i]);
        m.matrixWorldNeedsUpdate = true;
      });
      this.joints.forEach((m, k) => {
        const a = info.joint_body[k];
        if (a >= 0 && a < this.bodies.length) {
          m.matrix.multiplyMatrices(this.bodies[a].matrix, this.bodyRestInv[a]).multiply(this.jointRest[k]);
        } else m.matrix.copy(this.jointRest[k]);
        m.matrixWorldNeedsUpdate = true;
      });
    }
  }

  pick(camera, x, y) {
    if (!this.groups.hitboxes.visible) return '';
    const ray = new THREE.Raycaster();
    ray.setFromCamera(new THREE.Vector2(x, y), camera);
    const hit = ray.intersectObject(this.boxes)[0];
    return hit ? `bone ${hit.instanceId}: ${this.info.bone_name[hit.instanceId]}` : '';
  }
}
