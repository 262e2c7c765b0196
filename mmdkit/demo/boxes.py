"""The box figure: a small character and a dance made in code (fast; used by tests).

Out: ``demo_model()`` → Model (a box-built humanoid with MMD's standard bone names, leg IK,
physics hair — dynamic rigid bodies on 6-DOF spring joints — a mouth vertex morph and a
blush material morph); ``demo_motion(seconds)`` → Motion (a looping dance: bounce, sway,
arm swings, stepping feet through the leg IK, nodding, singing mouth).
"""

from __future__ import annotations

import math

import numpy as np

from mmdkit.model import model as M
from mmdkit.animation.builder import MotionBuilder
from mmdkit.model.builder import ModelBuilder

_FACES = np.array([[0, 1, 2], [0, 2, 3]])
_MOUTH_CENTER, _MOUTH_HALF = (0, 15.0, -1.16), (0.3, 0.06, 0.02)
_HAIR_SEGMENTS = (("髪1", "髪2"), ("髪2", "髪3"), ("髪3", "髪先"))
"""Hair bones with the bone each one's body and box reach to."""


def _box(center, half):
    """24 vertices (4 per face, flat normals) and 12 triangles of an axis-aligned box."""
    c = np.asarray(center, np.float32)
    h = np.asarray(half, np.float32)
    pos, nrm, uv, tri = [], [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3, np.float32)
            n[axis] = sign
            u = np.zeros(3, np.float32)
            u[(axis + 1) % 3] = 1
            v = np.cross(n, u)
            base = len(pos)
            for du, dv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                pos.append(c + h * (n + du * u + dv * v))
                nrm.append(n)
                uv.append(((du + 1) / 2, (dv + 1) / 2))
            f = _FACES + base
            tri.extend(f)
    pos = np.array(pos)
    tri = np.array(tri)
    # orient each triangle so its winding agrees with the outward normal (clockwise in LH space)
    p0, p1, p2 = pos[tri[:, 0]], pos[tri[:, 1]], pos[tri[:, 2]]
    geo_n = np.cross(p1 - p0, p2 - p0)
    flip = (geo_n * np.array(nrm)[tri[:, 0]]).sum(1) < 0  # MMD winding (as in real PMX files)
    tri[flip] = tri[flip][:, ::-1]
    return pos, np.array(nrm), np.array(uv, np.float32), tri


def _quat(axis, deg):
    a = math.radians(deg) / 2
    ax = np.asarray(axis, np.float64)
    ax = ax / np.linalg.norm(ax)
    return (*(ax * math.sin(a)), math.cos(a))


def _add_bones(mb: ModelBuilder) -> tuple[dict, dict]:
    """The skeleton with MMD's standard names and leg IK → (name → bone index, name → (3,) float32
    rest position, model space)."""
    index, position = {}, {}

    def bone(name, pos, parent=None, **kw):
        index[name] = mb.add_bone(name, pos, -1 if parent is None else index[parent], **kw)
        position[name] = np.asarray(pos, np.float32)  # as the builder stores it

    bone("全ての親", (0, 0, 0), translatable=True)
    bone("センター", (0, 8, 0), "全ての親", translatable=True)
    bone("上半身", (0, 9.6, 0), "センター")
    bone("首", (0, 13.6, 0), "上半身")
    bone("頭", (0, 14.4, 0), "首")
    bone("下半身", (0, 9.6, 0), "センター")
    for side, sx in (("左", 1.0), ("右", -1.0)):
        bone(f"{side}腕", (1.3 * sx, 13.2, 0), "上半身")
        bone(f"{side}ひじ", (3.6 * sx, 13.2, 0), f"{side}腕")
        bone(f"{side}手首", (5.7 * sx, 13.2, 0), f"{side}ひじ")
        bone(f"{side}足", (0.8 * sx, 9.0, 0), "下半身")
        bone(f"{side}ひざ", (0.8 * sx, 5.0, 0), f"{side}足")
        bone(f"{side}足首", (0.8 * sx, 1.0, 0), f"{side}ひざ")
        bone(f"{side}足ＩＫ", (0.8 * sx, 1.0, 0), "全ての親", translatable=True)
        mb.add_ik(index[f"{side}足ＩＫ"], index[f"{side}足首"],
                  [(index[f"{side}ひざ"], (-math.pi, 0, 0), (-0.0087, 0, 0)), index[f"{side}足"]],
                  loop_count=40, limit_angle=2.0)
    bone("髪1", (0, 15.8, 1.3), "頭")
    bone("髪2", (0, 13.6, 1.6), "髪1")
    bone("髪3", (0, 11.4, 1.8), "髪2")
    bone("髪先", (0, 9.6, 1.9), "髪3")
    return index, position


def _add_meshes(mb: ModelBuilder, index: dict, position: dict) -> tuple[int, int]:
    """Materials and one box per body part, each skinned to one bone → (skin material index, first
    vertex of the mouth box)."""
    skin = mb.add_material("肌", diffuse=(1.0, 0.86, 0.78, 1), ambient=(0.5, 0.42, 0.38), toon=1,
                           specular=(0.1, 0.1, 0.1), specular_power=10, edge_size=1.0)
    shirt = mb.add_material("服", diffuse=(0.25, 0.55, 0.95, 1), ambient=(0.1, 0.25, 0.45), toon=2)
    skirt = mb.add_material("スカート", diffuse=(0.95, 0.3, 0.45, 1), ambient=(0.45, 0.12, 0.2), toon=2,
                            double_sided=True)
    hair = mb.add_material("髪", diffuse=(0.2, 0.8, 0.75, 1), ambient=(0.08, 0.35, 0.32), toon=3,
                           specular=(0.4, 0.4, 0.4), specular_power=30)
    eyes = mb.add_material("目", diffuse=(0.1, 0.1, 0.2, 1), ambient=(0.05, 0.05, 0.1), edge=False)
    mouth = mb.add_material("口", diffuse=(0.6, 0.1, 0.15, 1), ambient=(0.3, 0.05, 0.08), edge=False)
    shoes = mb.add_material("靴", diffuse=(0.3, 0.2, 0.15, 1), ambient=(0.15, 0.1, 0.07), toon=2)

    def part(material, center, half, bone_name):
        p, n, uv, t = _box(center, half)
        return mb.add_mesh(material, p, n, uv, t, [index[bone_name]] * len(p))

    part(skin, (0, 15.6, 0), (1.25, 1.3, 1.15), "頭")
    part(skin, (0, 13.9, 0), (0.35, 0.45, 0.35), "首")
    part(shirt, (0, 11.6, 0), (1.3, 2.0, 0.8), "上半身")
    part(skirt, (0, 8.6, 0), (1.6, 1.1, 1.1), "下半身")
    part(eyes, (0.45, 15.9, -1.16), (0.18, 0.25, 0.02), "頭")
    part(eyes, (-0.45, 15.9, -1.16), (0.18, 0.25, 0.02), "頭")
    mouth_first = part(mouth, _MOUTH_CENTER, _MOUTH_HALF, "頭")
    for side, sx in (("左", 1.0), ("右", -1.0)):
        part(shirt, (2.45 * sx, 13.2, 0), (1.15, 0.38, 0.38), f"{side}腕")
        part(skin, (4.65 * sx, 13.2, 0), (1.05, 0.32, 0.32), f"{side}ひじ")
        part(skin, (6.1 * sx, 13.2, 0), (0.4, 0.3, 0.2), f"{side}手首")
        part(skin, (0.8 * sx, 7.0, 0), (0.5, 2.0, 0.5), f"{side}足")
        part(skin, (0.8 * sx, 3.0, 0), (0.42, 2.0, 0.42), f"{side}ひざ")
        part(shoes, (0.8 * sx, 0.45, -0.3), (0.5, 0.45, 0.8), f"{side}足首")
    part(hair, (0, 16.6, 0.2), (1.4, 0.55, 1.3), "頭")
    for a, b in _HAIR_SEGMENTS:
        pa, pb = position[a], position[b]
        part(hair, (pa + pb) / 2, (1.0, abs(pa[1] - pb[1]) / 2 + 0.2, 0.25), a)
    return skin, mouth_first


def _add_morphs(mb: ModelBuilder, skin: int, mouth_first: int) -> None:
    """The mouth opens (vertex morph), a blush (material morph), both in a group ('歌う')."""
    mouth_v = np.arange(mouth_first, mouth_first + 24)
    mouth_pos = np.asarray(_box(_MOUTH_CENTER, _MOUTH_HALF)[0])
    off = np.zeros((24, 3), np.float32)
    off[mouth_pos[:, 1] < 15.0, 1] = -0.5  # the lower lip drops: the mouth opens
    a_morph = mb.add_vertex_morph("あ", mouth_v, off, panel=3)
    blush = mb.add_material_morph("照れ", skin, 1, panel=4, diffuse=(0.25, -0.05, -0.05, 0))
    mb.add_group_morph("歌う", [a_morph, blush], [1.0, 0.4], panel=4)


def _add_hair_physics(mb: ModelBuilder, index: dict, position: dict) -> None:
    """Head (static, follows its bone) + three dynamic hair bodies on spring joints."""
    head = mb.add_rigid_body("頭", index["頭"], M.SHAPE_SPHERE, (1.4, 0, 0), (0, 15.6, 0), mode=M.BODY_STATIC,
                             group=0, collide_mask=0xFFFF)
    prev = head
    for name, tip in _HAIR_SEGMENTS:
        p, q = position[name], position[tip]
        body = mb.add_rigid_body(name, index[name], M.SHAPE_CAPSULE, (0.35, np.linalg.norm(q - p), 0), (p + q) / 2,
                                 mass=0.5, mode=M.BODY_DYNAMIC, group=2, collide_mask=0xFFFF & ~(1 << 2),
                                 linear_damping=0.6, angular_damping=0.8)
        mb.add_joint(f"{name}J", prev, body, p, rotation_lower=(-0.6, -0.3, -0.3),
                     rotation_upper=(0.6, 0.3, 0.3), spring_rotation=(30, 30, 30))
        prev = body


def demo_model():
    """The demo character (about 20 bones, leg IK, 3 physics hair segments, 2 morphs)."""
    mb = ModelBuilder("デモちゃん", name_en="mmdkit demo", comment="built in code by mmdkit.demo")
    index, position = _add_bones(mb)
    skin, mouth_first = _add_meshes(mb, index, position)
    _add_morphs(mb, skin, mouth_first)
    _add_hair_physics(mb, index, position)
    return mb.build()


def demo_motion(seconds: float = 4.0, fps: int = 30):
    """A looping dance for ``demo_model`` (also binds to any model with standard bone names)."""
    mo = MotionBuilder(model_name="デモちゃん")
    n = int(seconds * fps)
    beat = 15  # frames per beat (120 BPM at 30 fps)
    for f in range(0, n + 1, 5):
        ph = 2 * math.pi * f / (2 * beat)
        bounce = -0.35 * abs(math.sin(ph))
        sway = 0.6 * math.sin(ph / 2)
        mo.add_bone_key("センター", f, translation=(sway, bounce, 0))
        mo.add_bone_key("上半身", f, rotation=_quat((0, 1, 0), 15 * math.sin(ph / 2)))
        mo.add_bone_key("頭", f, rotation=_quat((1, 0, 0), 8 * math.sin(ph)))
        for side, sx, lag in (("左", 1.0, 0.0), ("右", -1.0, math.pi)):
            lift = max(0.0, math.sin(ph / 2 + lag))
            mo.add_bone_key(f"{side}足ＩＫ", f, translation=(sway * 0.5, 1.2 * lift, -0.6 * lift))
            arm = -sx * (35 + 45 * math.sin(ph / 2 + lag))  # rotate about −Z on the left: arm down/up
            mo.add_bone_key(f"{side}腕", f, rotation=_quat((0, 0, 1), arm))
            mo.add_bone_key(f"{side}ひじ", f, rotation=_quat((0, 1, 0), sx * (20 + 30 * max(0, math.sin(ph)))))
        mo.add_morph_key("歌う", f, max(0.0, math.sin(ph * 1.5)))
    return mo.build()
