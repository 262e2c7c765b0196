"""Retargeting between humanoid skeletons (docs/retarget.md). Layer: beside ``pose`` — imports
model, animation, formats/importers data and pose only.

``retarget(source_model, source_motion, target_model)`` → a Motion keyed on the target's bones
(``motion``: rest-pose alignment, root scaling, contact pass, MMD twist/IK keys). Maps:
``humanoid_map(model)`` → ``HumanoidMap`` (VRM 1.0 humanoid bone → model bone, confidence,
source: VRM extension / name scheme / geometry / override), ``read_override(path)`` for a user's
JSON table, ``humanoid_lines(map)`` for ``mmdkit info --humanoid``. SMPL-family targets:
``smpl.read_body_model(path)`` (the user's .npz/.pkl), ``amass.retarget_amass`` → AMASS-layout
arrays, ``amass.write_amass``.
"""

from mmdkit.retarget.bones import EXTRA_BONES, HUMANOID_BONES, MAIN_LIMBS, REQUIRED_BONES
from mmdkit.retarget.humanoid import HumanoidMap, humanoid_map, read_override
from mmdkit.retarget.motion import retarget
from mmdkit.retarget.report import humanoid_lines

__all__ = ["retarget", "humanoid_map", "read_override", "HumanoidMap", "humanoid_lines", "HUMANOID_BONES",
           "REQUIRED_BONES", "MAIN_LIMBS", "EXTRA_BONES"]
