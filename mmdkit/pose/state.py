"""The mutable pose state of one character: every working array the stages read and write.

In: a ``Rig`` (sizes). Out: ``PoseState`` — arrays allocated once (``fields.allocate``, from the
declarations below), then rewritten in place every frame by ``stages.run_stages``; the kernels take
them as the named groups ``bone_state`` (``BoneState``), ``morph_state`` (``MorphState``),
``morph_out`` (``MorphOut``), ``frame_out`` (``FrameOut``) and ``coupling`` (``Coupling``), whose
fields are also attributes of the PoseState (``state.bone_world`` is ``state.frame_out.bone_world``).
Spaces: bone_anim_*/bone_ik_q/bone_append_*/bone_local_* are parent-local, bone_world_* and the
(B, 4, 4) matrices model space (MMD's left-handed units). Quaternions (x, y, z, w).
"""

from __future__ import annotations

import numpy as np

from mmdkit.pose.fields import Field, allocate, expose_fields, group
from mmdkit.pose.ik import IK_CHAIN_ROW

# Sizes: B bones, K IK solvers, C = IK_CHAIN_ROW × the longest IK path, N morphs, V vertices, A
# additional UV channels, M materials, D driven bones, R refreshed bones.
BoneState = group("BoneState", (
    Field("bone_anim_t", ("B", 3), "float64", "parent-local", "keyed translation + bone morphs"),
    Field("bone_anim_q", ("B", 4), "float64", "parent-local", "keyed rotation + bone morphs", "identity"),
    Field("bone_ik_q", ("B", 4), "float64", "parent-local", "rotation IK added", "identity"),
    Field("bone_append_t", ("B", 3), "float64", "parent-local", "append (付与) translation"),
    Field("bone_append_q", ("B", 4), "float64", "parent-local", "append (付与) rotation", "identity"),
    Field("bone_local_t", ("B", 3), "float64", "parent-local", "final local translation"),
    Field("bone_local_q", ("B", 4), "float64", "parent-local", "final local rotation", "identity"),
    Field("bone_world_p", ("B", 3), "float64", "model", "world position"),
    Field("bone_world_q", ("B", 4), "float64", "model", "world rotation", "identity"),
    Field("ik_chain", ("C",), "float64", "", "scratch of the IK solver (``ik.solve_ik``)"),
), "The per-bone float64 state of a frame: the kernels' ``bone_state`` (# Data in/out).", __name__)

MorphState = group("MorphState", (
    Field("morph_raw_weight", ("N",), "float64", "", "sampled weights"),
    Field("morph_effective_weight", ("N",), "float64", "", "weights after groups/flips"),
    Field("morph_vertex_prev", ("N",), "float64", "", "last frame's weights (vertex rows to clear)"),
    Field("morph_uv_prev", ("N",), "float64", "", "last frame's weights (UV rows to clear)"),
), "Morph weights of a frame and the last: the kernels' ``morph_state`` (# Data in/out).", __name__)

MorphOut = group("MorphOut", (
    Field("morph_weight", ("N",), "float32", "", "output copy of the effective weights"),
    Field("vertex_offset", ("V", 3), "float32", "model", "vertex-morph sums"),
    Field("uv_offset", ("V", 4), "float32", "", "UV-morph sums"),
    Field("additional_uv_offset", ("V", "A", 4), "float32", "", "additional-UV-morph sums"),
    Field("material_mul", ("M", 28), "float64", "", "material-morph factors (MATERIAL_MORPH_CHANNELS)", 1.0),
    Field("material_add", ("M", 28), "float64", "", "material-morph addends (MATERIAL_MORPH_CHANNELS)"),
    Field("material_out", ("M", 16), "float32", "", "base × mul + add of the first 16 channels"),
), "What the morph stage writes: the kernels' ``morph_out`` (# Data out).", __name__)

FrameOut = group("FrameOut", (
    Field("ik_enabled", ("K",), "uint8", "", "solver on this frame (property keys, then ik_disabled)", 1),
    Field("visible", (1,), "uint8", "", "0 where property keys hide the model", 1),
    Field("bone_world", ("B", 4, 4), "float32", "model", "bone matrices"),
    Field("bone_skin", ("B", 4, 4), "float32", "model", "world @ translate(-rest); (0,4,4): not kept"),
), "What a frame gives its users: the kernels' ``frame_out`` (# Data out).", __name__)

Coupling = group("Coupling", (
    Field("ik_disabled", ("K",), "uint8", "", "solvers whose links are all driven (MMD skips them)"),
    Field("bone_driven", ("D",), "int32", "", "bones whose bone_world rows the simulator writes"),
    Field("bone_refresh", ("R",), "int32", "", "non-driven first-pass bones below driven ones (eval order)"),
), "Coupling to a simulator (``PoseState.set_driven``; empty without physics): the kernels' "
   "``coupling_in`` (# Model).", __name__)

_GROUPS = {"bone_state": BoneState, "morph_state": MorphState, "morph_out": MorphOut, "frame_out": FrameOut,
           "coupling": Coupling}


def state_sizes(rig, driven: int = 0, refresh: int = 0) -> dict:
    """The size symbols of the state groups for ``rig`` (see the declarations above)."""
    longest = int(np.diff(rig.ik_path_start).max(initial=0))
    return dict(B=len(rig.bone_parent), K=len(rig.ik_target), C=IK_CHAIN_ROW * longest, N=len(rig.morph_kind),
                V=rig.num_vertices, A=rig.num_additional_uv, M=len(rig.material_base), D=driven, R=refresh)


class PoseState:
    """Every working array of posing one character, in the groups ``bone_state``, ``morph_state``,
    ``morph_out``, ``frame_out`` and ``coupling`` (see their types for each array's shape, dtype
    and space); each array is also an attribute of its own name. Create with
    ``PoseState.for_rig(rig)``."""

    def __init__(self, bone_state: BoneState, morph_state: MorphState, morph_out: MorphOut, frame_out: FrameOut,
                 coupling: Coupling):
        self.bone_state, self.morph_state, self.morph_out = bone_state, morph_state, morph_out
        self.frame_out, self.coupling = frame_out, coupling

    @classmethod
    def for_rig(cls, rig) -> "PoseState":
        """A state at rest for ``rig``."""
        sizes = state_sizes(rig)
        return cls(*(allocate(g, sizes) for g in _GROUPS.values()))

    def set_driven(self, rig, bone_driven_mask: np.ndarray) -> None:
        """Couple to a simulator that writes the bone_world rows of ``bone_driven_mask`` (B,) bool
        between the two bone passes: fills bone_driven, bone_refresh and ik_disabled (a new
        ``coupling``)."""
        driven = np.asarray(bone_driven_mask, bool)
        mask = driven.copy()
        refresh = []
        after = np.zeros(len(driven), bool)
        after[rig.bone_pass_after] = True
        for b in rig.bone_order:
            p = rig.bone_parent[b]
            if p >= 0 and mask[p] and not driven[b]:
                mask[b] = True
                if not after[b]:
                    refresh.append(b)
        ik_disabled = self.coupling.ik_disabled
        for k in range(len(ik_disabled)):
            links = rig.ik_link_bone[rig.ik_link_start[k]:rig.ik_link_start[k + 1]]
            ik_disabled[k] = len(links) > 0 and bool(driven[links].all())
        self.coupling = Coupling(ik_disabled=ik_disabled, bone_driven=np.nonzero(driven)[0].astype(np.int32),
                                 bone_refresh=np.asarray(refresh, np.int32))


expose_fields(PoseState, _GROUPS)
