"""Humanoid maps (mmdkit.retarget.humanoid_map) on real rigs: VRM extension, name schemes, geometry,
user overrides, and ``mmdkit info --humanoid``. Expected maps are written out per rig."""

from __future__ import annotations

import json

import pytest

from mmdkit.errors import FormatError
from mmdkit.formats.io import load
from mmdkit.retarget import HUMANOID_BONES, MAIN_LIMBS, humanoid_map, read_override
from mmdkit.retarget.bones import VRM0_RENAMES


def _limbs(hips, spine, head, legs, arms):
    """Expected {humanoid: bone name}: legs/arms are (left, right) tuples of (upper, lower, foot|hand)."""
    d = {"hips": hips, "spine": spine, "head": head}
    for side, (u, lo, f) in zip(("left", "right"), legs):
        d.update({f"{side}UpperLeg": u, f"{side}LowerLeg": lo, f"{side}Foot": f})
    for side, (u, lo, h) in zip(("left", "right"), arms):
        d.update({f"{side}UpperArm": u, f"{side}LowerArm": lo, f"{side}Hand": h})
    return d


_MMD = _limbs("下半身", "上半身", "頭", [("左足", "左ひざ", "左足首"), ("右足", "右ひざ", "右足首")],
              [("左腕", "左ひじ", "左手首"), ("右腕", "右ひじ", "右手首")])
EXPECTED = {
    # file: (expected main limbs and more, how many humanoid bones are mapped, required bones missing)
    "gene/Gene.pmx": ({**_MMD, "chest": "上半身2", "neck": "首", "leftToes": "左つま先EX", "leftShoulder": "左肩",
                       "leftThumbMetacarpal": "左親指０", "leftThumbProximal": "左親指１", "rightIndexDistal": "右人指３",
                       "leftEye": "左目", "rightLittleProximal": "右小指１"}, 53, []),
    "mei/Model/mei/mei.pmd": ({**_MMD, "chest": "上半身2", "leftToes": "左つま先", "leftThumbProximal": "左親指１",
                               "leftThumbDistal": "左親指２"}, 51, []),
    "mokou/mokou_A.pmd": ({**_MMD, "chest": "上半身２", "rightShoulder": "右肩"}, 51, []),
    "rigs/humanoid/mannequiny-0.3.0.glb": (
        {**_limbs("pelvis", "spine_01", "head", [("thigh.l", "calf.l", "foot.l"), ("thigh.r", "calf.r", "foot.r")],
                  [("upperarm.l", "lowerarm.l", "hand.l"), ("upperarm.r", "lowerarm.r", "hand.r")]),
         "chest": "spine_02", "neck": "neck_01", "leftShoulder": "clavicle.l", "rightToes": "ball.r",
         "leftThumbMetacarpal": "thumb_01.l", "rightRingDistal": "ring_03.r"}, 45, []),
    "gltf/CesiumMan.glb": (
        {**_limbs("Skeleton_torso_joint_1", "Skeleton_torso_joint_2", "Skeleton_neck_joint_2",
                  [("leg_joint_L_1", "leg_joint_L_2", "leg_joint_L_3"), ("leg_joint_R_1", "leg_joint_R_2", "leg_joint_R_3")],
                  [("Skeleton_arm_joint_L__4_", "Skeleton_arm_joint_L__3_", "Skeleton_arm_joint_L__2_"),
                   ("Skeleton_arm_joint_R", "Skeleton_arm_joint_R__2_", "Skeleton_arm_joint_R__3_")]),
         "chest": "torso_joint_3", "neck": "Skeleton_neck_joint_1", "leftToes": "leg_joint_L_5"}, 19, []),
    "gltf/RobotExpressive.glb": (  # legs hang from Body, not from 'Hips'; the hand is the first palm bone
        {**_limbs("Body", "Hips", "Head", [("UpperLegL", "LowerLegL", "FootL"), ("UpperLegR", "LowerLegR", "FootR")],
                  [("UpperArmL", "LowerArmL", "Palm3L"), ("UpperArmR", "LowerArmR", "Palm3R")]),
         "neck": "Neck", "leftShoulder": "ShoulderL", "leftIndexProximal": "IndexL", "rightMiddleIntermediate": "Middle2R",
         "leftThumbMetacarpal": "ThumbL"}, 36, []),
    "assimp/models/BVH/01_01.bvh": (  # Assimp gives no bone for the BVH's Hips and LeftHand/RightHand
        {"spine": "LowerBack", "chest": "Spine", "neck": "Neck", "head": "Head", "leftUpperLeg": "LeftUpLeg",
         "leftLowerLeg": "LeftLeg", "leftFoot": "LeftFoot", "rightToes": "RightToeBase", "leftShoulder": "LeftShoulder",
         "leftUpperArm": "LeftArm", "leftLowerArm": "LeftForeArm", "rightUpperArm": "RightArm",
         "rightLowerArm": "RightForeArm", "rightThumbMetacarpal": "RThumb"}, 20, ["hips", "leftHand", "rightHand"]),
    "rigs/vrm0/Godette_vrm_v4.vrm": (
        {**_limbs("pelvis_Armature", "tummy_Armature", "head_Armature",
                  [("thigh.l_Armature", "shin.l_Armature", "foot.l_Armature"),
                   ("thigh.r_Armature", "shin.r_Armature", "foot.r_Armature")],
                  [("upper_arm.l_Armature", "lowerarm.l_Armature", "hand.l_Armature"),
                   ("upper_arm.r_Armature", "lowerarm.r_Armature", "hand.r_Armature")]),
         "leftThumbMetacarpal": "thumb.1.l_Armature", "leftThumbProximal": "thumb.2.l_Armature"}, 45, []),
    "rigs/vrm0/cryptovoxels.vrm": (
        _limbs("Hips", "Spine", "Head", [("Left leg", "Left knee", "Left ankle"), ("Right leg", "Right knee", "Right ankle")],
               [("Left arm", "Left elbow", "Left wrist"), ("Right arm", "Right elbow", "Right wrist")]), 43, []),
    "rigs/vrm1/debug_robot.vrm": (
        {**_limbs("hips", "spine", "head", [("upper_leg.L", "lower_leg.L", "foot.L"), ("upper_leg.R", "lower_leg.R", "foot.R")],
                  [("upper_arm.L", "lower_arm.L", "hand.L"), ("upper_arm.R", "lower_arm.R", "hand.R")]),
         "leftThumbMetacarpal": "thumb_proximal.L", "leftEye": "eye.L"}, 53, []),
    "rigs/vrm1/VRMC_materials_mtoon_UV_Animation_Test.vrm": (
        {**_limbs("hips", "spine", "head", [("upper_leg.L", "lower_leg.L", "foot.L"), ("upper_leg.R", "lower_leg.R", "foot.R")],
                  [("upper_arm.L", "lower_arm.L", "hand.L"), ("upper_arm.R", "lower_arm.R", "hand.R")]),
         "rightEye": "eye.R"}, 53, []),
}


@pytest.mark.parametrize("rel", list(EXPECTED))
def test_map_found_without_a_table(assets, rel):
    model = load(assets / rel)
    hmap = humanoid_map(model)
    want, count, missing = EXPECTED[rel]
    got = hmap.names()
    assert {k: got.get(k) for k in want} == want
    assert len(got) == count and hmap.missing(required_only=True) == missing
    assert len(set(got.values())) == len(got)  # one model bone plays one humanoid bone
    mapped = hmap.humanoid_bone >= 0
    assert (hmap.humanoid_confidence[mapped] >= 0.5).all() and (hmap.humanoid_confidence[~mapped] == 0).all()
    vrm = model.source_extras.get("vrm_humanoid")
    if vrm:  # every bone the file's VRM humanoid names is mapped there, from the extension
        rename = VRM0_RENAMES if vrm["version"] == "0.x" else {}
        assert {rename.get(k, k): v for k, v in vrm["bones"].items()} == hmap.as_dict()
        assert set(s for s in hmap.humanoid_source if s) == {"vrm"}


def _renamed(model):
    names = tuple(f"bone_{i:03d}" for i in range(model.num_bones))
    return model.replace(bone_name=names, bone_name_en=names)


def test_renamed_gene_maps_main_limbs_by_geometry(assets):
    gene = load(assets / "gene" / "Gene.pmx")
    hmap = humanoid_map(_renamed(gene))
    want = {**_MMD, "chest": "上半身2", "neck": "首", "leftShoulder": "左肩", "rightShoulder": "右肩"}
    assert {k: gene.bone_name[hmap[k]] if hmap[k] >= 0 else None for k in want} == want
    assert all(hmap.humanoid_source[HUMANOID_BONES.index(k)] == "geometry" for k in MAIN_LIMBS)


def test_vrm0_geometry_alone_knows_left_from_right(assets):
    """Godette (VRM 0.x faces +z: its left is -x) with names and extension gone: the toes say which way."""
    model = load(assets / "rigs" / "vrm0" / "Godette_vrm_v4.vrm")
    want = humanoid_map(model)
    bare = _renamed(model).replace(source_extras={})
    got = humanoid_map(bare)
    for k in ("hips", "leftUpperLeg", "leftFoot", "rightLowerLeg", "leftUpperArm", "rightHand", "head"):
        assert got[k] == want[k], k
    assert model.bone_position[got["leftUpperLeg"], 0] < 0  # the character's left at -x


def test_override(assets, tmp_path):
    mei = load(assets / "mei" / "Model" / "mei" / "mei.pmd")
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"leftUpperArm": "左腕捩", "jaw": None, "leftToes": None}), encoding="utf-8")
    hmap = humanoid_map(mei, read_override(path), str(path))
    assert mei.bone_name[hmap["leftUpperArm"]] == "左腕捩" and hmap["leftToes"] == -1
    i = HUMANOID_BONES.index("leftUpperArm")
    assert hmap.humanoid_source[i] == "override" and hmap.humanoid_confidence[i] == 1.0
    path.write_text(json.dumps({"leftUpperArm": "左腕X"}), encoding="utf-8")
    with pytest.raises(FormatError, match="map.json.*leftUpperArm.*左腕X"):
        humanoid_map(mei, read_override(path), str(path))
    path.write_text(json.dumps({"leftUpperArmm": "左腕"}), encoding="utf-8")
    with pytest.raises(FormatError, match="leftUpperArmm"):
        read_override(path)


def test_info_humanoid(assets, tmp_path, mmdkit_cli):
    gene = assets / "gene" / "Gene.pmx"
    code, out, err = mmdkit_cli("info", "--humanoid", gene)
    assert code == 0, err
    assert "humanoid: 53/55 bones mapped" in out and "missing (2): upperChest, jaw" in out
    assert any(line.split()[:4] == ["leftUpperArm", "左腕", "0.90", "name:mmd"] for line in out.splitlines())
    code, out, err = mmdkit_cli("info", "--humanoid", "--json", assets / "assimp/models/BVH/01_01.bvh")
    d = json.loads(out)["humanoid"]
    assert d["missing_required"] == ["hips", "leftHand", "rightHand"] and d["bones"]["leftUpperLeg"]["bone"] == "LeftUpLeg"
    bad = tmp_path / "bad.json"
    bad.write_text('{"leftUpperArm": "no such bone"}', encoding="utf-8")
    code, out, err = mmdkit_cli("info", "--humanoid-map", bad, gene)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "bad.json" in err and "no such bone" in err and "leftUpperArm" in err


@pytest.mark.parametrize("name, label", [
    ("mixamorig:LeftHandThumb1", "leftThumbMetacarpal"), ("mixamorig:RightForeArm", "rightLowerArm"),
    ("mixamorig:LeftUpLeg", "leftUpperLeg"), ("mixamorig:LeftLeg", "leftLowerLeg"), ("thigh_l", "leftUpperLeg"),
    ("calf_r", "rightLowerLeg"), ("upperarm_l", "leftUpperArm"), ("pinky_02_r", "rightLittleIntermediate"),
    ("J_Bip_L_UpperArm", "leftUpperArm"), ("J_Bip_R_Hand", "rightHand"), ("LThumb", "leftThumbMetacarpal"),
    ("右ひじ", "rightLowerArm"), ("左足首", "leftFoot"), ("左足首D", "leftFoot"), ("左親指０", "leftThumbMetacarpal"),
    ("左親指2", "leftThumbDistal"), ("ﾋﾀﾞﾘ", None), ("左足ＩＫ", None), ("左人指１", "leftIndexProximal"),
    ("leg_joint_L_2", None), ("Head_3", None), ("センター", "center"), ("左腕捩", "leftUpperArmTwist"),
])
def test_name_schemes(name, label):
    from mmdkit.retarget.names import label_name

    m = label_name(name)
    assert (m.label if m else None) == label


def test_vrm_extension_read_safely():
    from mmdkit.formats.gltf.vrm import vrm_humanoid

    warnings = []
    v0 = {"extensions": {"VRM": {"humanoid": {"humanBones": [{"bone": "hips", "node": 1}, {"bone": "spine", "node": 99},
                                                             {"bone": 3, "node": 2}, "junk"]}}}}
    assert vrm_humanoid(v0, 5, warnings) == ("0.x", {"hips": 1}) and "2 bone entries" in warnings[0]
    v1 = {"extensions": {"VRMC_vrm": {"humanoid": {"humanBones": {"hips": {"node": 0}, "head": {"node": True}}}},
                         "VRM": {"humanoid": {"humanBones": [{"bone": "hips", "node": 3}]}}}}
    assert vrm_humanoid(v1, 5) == ("1.0", {"hips": 0})  # 1.0 wins; a bool is not a node
    assert vrm_humanoid({"extensions": {"VRM": []}}, 5) == ("", {})
    assert vrm_humanoid({"extensions": {"VRMC_vrm": {"humanoid": {"humanBones": []}}}}, 5) == ("1.0", {})
