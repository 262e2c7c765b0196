"""SMPL-family body models (the user's own file) as a retarget target: read, rest skeleton, humanoid map.

In: a body model file in the published layout — ``.npz`` (numpy arrays) or ``.pkl`` (a pickle of
the same dict, read with numpy only: a pickle that needs chumpy or scipy objects is refused with a
line saying to convert it to .npz). Keys used: ``v_template`` (V,3) float metres, ``shapedirs``
(V,3,S) (SMPL-X: 300 shape + 100 expression), ``J_regressor`` (J,V) dense, ``kintree_table``
(2,J) (row 0: parents, the root's 2³²−1 or −1). J tells the family: 24 SMPL, 52 SMPL-H, 55 SMPL-X
(``JOINT_NAMES``); ``weights``/``posedirs``/``f`` are not needed for the skeleton.
Out: ``BodyModel`` (joint names, parents (J,), the rest joints (J,3) metres for given betas, the
family), ``skeleton_model(body, betas)`` → a bones-only ``Model`` in MMD space (the body's
right-handed y-up metres: points ``Space()``: (x, y, −z)·12.5; SMPL's rest is a T-pose facing +z,
so the model faces −z as MMD models do) and ``smpl_map(model)`` → its ``HumanoidMap`` (fixed
table, source 'smpl'). SMPL's 'left_hand'/'right_hand' (the knuckles) play the middle finger's
proximal bone, so the wrist's direction is the source's hand → middle finger.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from dataclasses import dataclass

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.model.builder import ModelBuilder
from mmdkit.model.space import Space
from mmdkit.retarget.bones import HUMANOID_BONES, HUMANOID_INDEX
from mmdkit.retarget.humanoid import HumanoidMap

BODY = ("pelvis", "left_hip", "right_hip", "spine1", "left_knee", "right_knee", "spine2", "left_ankle",
        "right_ankle", "spine3", "left_foot", "right_foot", "neck", "left_collar", "right_collar", "head",
        "left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist")
_FINGERS = ("index", "middle", "pinky", "ring", "thumb")
HANDS = tuple(f"{s}_{f}{i}" for s in ("left", "right") for f in _FINGERS for i in (1, 2, 3))
JOINT_NAMES = {24: BODY + ("left_hand", "right_hand"), 52: BODY + HANDS,
               55: BODY + ("jaw", "left_eye_smplhf", "right_eye_smplhf") + HANDS}
"""{joint count: names in joint order} of SMPL (24), SMPL-H (52) and SMPL-X (55)."""
FAMILY = {24: "SMPL", 52: "SMPL-H", 55: "SMPL-X"}
PARENTS_24 = (-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 20, 21)
"""SMPL's kintree_table[0] (the first 22 joints are the same body in all three)."""

_HUMANOID = {"pelvis": "hips", "spine1": "spine", "spine2": "chest", "spine3": "upperChest", "neck": "neck",
             "head": "head", "jaw": "jaw", "left_eye_smplhf": "leftEye", "right_eye_smplhf": "rightEye"}
for _s in ("left", "right"):
    _HUMANOID.update({f"{_s}_hip": f"{_s}UpperLeg", f"{_s}_knee": f"{_s}LowerLeg", f"{_s}_ankle": f"{_s}Foot",
                      f"{_s}_foot": f"{_s}Toes", f"{_s}_collar": f"{_s}Shoulder", f"{_s}_shoulder": f"{_s}UpperArm",
                      f"{_s}_elbow": f"{_s}LowerArm", f"{_s}_wrist": f"{_s}Hand",
                      f"{_s}_hand": f"{_s}MiddleProximal"})
    for _f, _h in zip(_FINGERS, ("Index", "Middle", "Little", "Ring", "Thumb")):
        _joints = ("Metacarpal", "Proximal", "Distal") if _f == "thumb" else ("Proximal", "Intermediate", "Distal")
        _HUMANOID.update({f"{_s}_{_f}{i}": f"{_s}{_h}{j}" for i, j in zip((1, 2, 3), _joints)})
HUMANOID_OF = dict(_HUMANOID)
"""{SMPL joint name: VRM 1.0 humanoid bone}."""

MAX_ELEMENTS = 50_000_000
"""Largest array read from a body model (SMPL-X's shapedirs: 12.6 M)."""
_NEEDED = ("v_template", "shapedirs", "J_regressor", "kintree_table")
_NUMPY_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                  ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}
TO_MMD = Space()
"""Body model space (right-handed, y up, metres) → MMD space; ``Space(1 / 12.5)`` goes back."""


@dataclass(frozen=True)
class BodyModel:
    """A body model's skeleton data (see module). ``shapedirs`` (V,3,S), ``v_template`` (V,3),
    ``J_regressor`` (J,V) float64 metres; ``parents`` (J,) int64 (−1 root); ``names`` (J,);
    ``family`` 'SMPL'/'SMPL-H'/'SMPL-X'; ``gender`` from the file name (else 'neutral')."""

    path: str
    names: tuple[str, ...]
    parents: np.ndarray
    v_template: np.ndarray
    shapedirs: np.ndarray
    J_regressor: np.ndarray
    family: str
    gender: str

    @property
    def num_shapes(self) -> int:
        """S: shape (+ expression) directions in the file."""
        return int(self.shapedirs.shape[2])

    def joints(self, betas) -> np.ndarray:
        """(J,3) float64 rest joints (metres, the body's space) for shape coefficients ``betas`` (≤ S)."""
        b = np.asarray(betas, np.float64).reshape(-1)
        v = self.v_template + self.shapedirs[:, :, :len(b)] @ b
        return self.J_regressor @ v


class _NumpyOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}")


def _read_pkl(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            data = _NumpyOnly(fh, encoding="latin1").load()
    except pickle.UnpicklingError as e:
        raise FormatError(f"the pickle needs {e} (chumpy/scipy objects); convert it to .npz with numpy arrays "
                          "(e.g. np.savez(out, **{k: np.array(v) for k, v in model.items()}))", path=path) from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, MemoryError) as e:
        raise FormatError(f"not a body model pickle ({type(e).__name__})", path=path) from None
    if not isinstance(data, dict):
        raise FormatError("not a body model pickle (no dict of arrays)", path=path)
    return {k: data[k] for k in _NEEDED if k in data}


def _read_npz(path: str) -> dict:
    try:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                key = name[:-4] if name.endswith(".npy") else name
                if key not in _NEEDED:
                    continue
                with z.open(name) as fh:
                    version = np.lib.format.read_magic(fh)
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                        np.lib.format.read_array_header_2_0
                    shape, _, dtype = read(fh)
                if dtype.hasobject:
                    raise FormatError(f"{key} is stored as Python objects (a scipy sparse matrix?); "
                                      "save it as a dense numpy array", path=path)
                if int(np.prod(shape, dtype=np.float64)) > MAX_ELEMENTS:
                    raise FormatError(f"{key} has shape {shape}: more than {MAX_ELEMENTS:,} numbers", path=path)
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in _NEEDED if k in f.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"not a body model .npz ({e})", path=path) from None


def _array(d: dict, key: str, ndim: int, path: str) -> np.ndarray:
    try:
        a = np.asarray(d[key], np.float64)
    except KeyError:
        raise FormatError(f"no {key} (a body model file has {', '.join(_NEEDED)})", path=path) from None
    except (TypeError, ValueError):
        raise FormatError(f"{key} is not an array of numbers", path=path) from None
    if a.ndim != ndim or 0 in a.shape or not np.all(np.isfinite(a)):
        raise FormatError(f"{key}: expected {ndim} axes of finite numbers, got shape {a.shape}", path=path)
    return a


def read_body_model(path) -> BodyModel:
    """The ``BodyModel`` of an SMPL/SMPL-H/SMPL-X ``.npz``/``.pkl`` (see module); FormatError naming
    the file and what is wrong."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FormatError("no such file", path=path)
    d = _read_pkl(path) if path.lower().endswith(".pkl") else _read_npz(path)
    vt, sd = _array(d, "v_template", 2, path), _array(d, "shapedirs", 3, path)
    jr, kt = _array(d, "J_regressor", 2, path), _array(d, "kintree_table", 2, path)
    V, J = vt.shape[0], jr.shape[0]
    if vt.shape[1] != 3 or sd.shape[:2] != (V, 3) or jr.shape[1] != V:
        raise FormatError(f"v_template {vt.shape}, shapedirs {sd.shape} and J_regressor {jr.shape} do not "
                          "agree (V,3), (V,3,S), (J,V)", path=path)
    if J not in JOINT_NAMES or kt.shape != (2, J):
        raise FormatError(f"{J} joints, kintree_table {kt.shape}: not SMPL (24), SMPL-H (52) or SMPL-X (55)",
                          path=path)
    parents = np.where(kt[0] >= 2 ** 31, -1, kt[0]).astype(np.int64)
    if parents[0] != -1 or tuple(parents[:22]) != PARENTS_24[:22] or np.any(parents[1:] >= np.arange(1, J)) \
            or np.any(parents[1:] < 0):
        raise FormatError("kintree_table's parents are not the SMPL family's (joint 0 the root, body joints "
                          "in SMPL's order)", path=path)
    low = os.path.basename(path).lower()
    gender = next((g for g in ("female", "male", "neutral") if g in low), "neutral")
    return BodyModel(path, JOINT_NAMES[J], parents, vt, sd, jr, FAMILY[J], gender)


def skeleton_model(body: BodyModel, betas):
    """A bones-only ``Model`` of the body's rest skeleton for ``betas`` in MMD space (see module):
    one bone per joint, named as ``JOINT_NAMES``, parents from the kintree."""
    joints = TO_MMD.points(body.joints(betas))
    b = ModelBuilder(f"{body.family} {body.gender}")
    for name, p, parent in zip(body.names, joints, body.parents):
        b.add_bone(name, p, int(parent), translatable=parent < 0)
    model = b.build()
    return model.replace(source_path=body.path, source_format=body.family)


def smpl_map(model) -> HumanoidMap:
    """The ``HumanoidMap`` of a ``skeleton_model`` (``HUMANOID_OF``, confidence 1, source 'smpl')."""
    H = len(HUMANOID_BONES)
    bone, conf, source = np.full(H, -1, np.int32), np.zeros(H, np.float32), [""] * H
    for b, name in enumerate(model.bone_name):
        h = HUMANOID_INDEX[HUMANOID_OF[name]]
        bone[h], conf[h], source[h] = b, 1.0, "smpl"
    return HumanoidMap(bone, conf, tuple(source), {}, tuple(model.bone_name))
