"""The mutable pose state of one character: every working array the stages read and write.

In: a ``Rig`` (sizes). Out: ``PoseState`` — arrays allocated once, then rewritten in place every
frame by ``stages.run_stages``; the kernels get them grouped as the tuples ``bone_state``,
``morph_state``, ``morph_out``, ``frame_out`` and ``coupling`` (the arrays in the order the class
docstring lists them).
Spaces: bone_anim_*/bone_ik_q/bone_append_*/bone_local_* are parent-local, bone_world_* and the
(B, 4, 4) matrices model space (MMD's left-handed units). Quaternions (x, y, z, w).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from mmdkit.pose.ik import IK_CHAIN_ROW


@njit(cache=True, nogil=True)
def new_bone_state(B, ik_path_start):
    """The arrays of ``PoseState.bone_state`` for B bones: 9 float64 bone arrays ((B,3)
    translations / positions, zero, and (B,4) rotations, identity) in the order anim_t, anim_q,
    ik_q, append_t, append_q, local_t, local_q, world_p, world_q, then the IK chain scratch
    (IK_CHAIN_ROW × the longest IK path,) float64 (``ik.solve_ik``; ik_path_start:
    ``Rig.ik_path_start``).
    Used by PoseState and by each batch chunk."""
    anim_t = np.zeros((B, 3))
    anim_q = np.zeros((B, 4))
    ik_q = np.zeros((B, 4))
    app_t = np.zeros((B, 3))
    app_q = np.zeros((B, 4))
    local_t = np.zeros((B, 3))
    local_q = np.zeros((B, 4))
    world_p = np.zeros((B, 3))
    world_q = np.zeros((B, 4))
    for b in range(B):
        anim_q[b, 3] = 1.0
        ik_q[b, 3] = 1.0
        app_q[b, 3] = 1.0
        local_q[b, 3] = 1.0
        world_q[b, 3] = 1.0
    longest = 0
    for k in range(ik_path_start.shape[0] - 1):
        longest = max(longest, ik_path_start[k + 1] - ik_path_start[k])
    ik_chain = np.zeros(IK_CHAIN_ROW * longest)
    return anim_t, anim_q, ik_q, app_t, app_q, local_t, local_q, world_p, world_q, ik_chain


@dataclass(eq=False)
class PoseState:
    """Every working array of posing one character (B bones, K IK solvers, N morphs,
    V vertices, A additional UV channels, M materials). Create with ``PoseState.for_rig(rig)``.

    bone_anim_t (B,3), bone_anim_q (B,4) float64: keyed pose + bone morphs, parent-local
    bone_ik_q (B,4) float64: rotation IK added; bone_append_t (B,3), bone_append_q (B,4): 付与
    bone_local_t (B,3), bone_local_q (B,4) float64: final local transform
    bone_world_p (B,3), bone_world_q (B,4) float64: model space
    ik_chain (IK_CHAIN_ROW P,) float64: scratch of the IK solver (P: the longest IK path; ``ik.solve_ik``)
    bone_world (B,4,4) float32 model space; bone_skin (B,4,4) float32 = world @ translate(-rest)
    ik_enabled (K,) uint8: solver on this frame (property keys, then ``ik_disabled``)
    morph_raw_weight (N,) float64 sampled; morph_effective_weight (N,) float64 after groups;
    morph_vertex_prev (N,), morph_uv_prev (N,) float64: last frame's weights (rows to clear)
    morph_weight (N,) float32 output copy of the effective weights
    vertex_offset (V,3), uv_offset (V,4), additional_uv_offset (V,A,4) float32: morph sums
    material_mul, material_add (M,28) float64: material-morph factors (MATERIAL_MORPH_CHANNELS)
    material_out (M,16) float32: base × mul + add of the first 16 channels
    visible (1,) uint8: 0 where property keys hide the model
    Coupling to a simulator (set by ``set_driven``; empty without physics):
    ik_disabled (K,) uint8: solvers whose links are all driven (MMD skips them)
    bone_driven (D,) int32: bones whose bone_world rows the simulator writes
    bone_refresh (R,) int32: non-driven first-pass bones below driven ones (eval order)
    """

    bone_anim_t: np.ndarray
    bone_anim_q: np.ndarray
    bone_ik_q: np.ndarray
    bone_append_t: np.ndarray
    bone_append_q: np.ndarray
    bone_local_t: np.ndarray
    bone_local_q: np.ndarray
    bone_world_p: np.ndarray
    bone_world_q: np.ndarray
    ik_chain: np.ndarray
    bone_world: np.ndarray
    bone_skin: np.ndarray
    ik_enabled: np.ndarray
    morph_raw_weight: np.ndarray
    morph_effective_weight: np.ndarray
    morph_vertex_prev: np.ndarray
    morph_uv_prev: np.ndarray
    morph_weight: np.ndarray
    vertex_offset: np.ndarray
    uv_offset: np.ndarray
    additional_uv_offset: np.ndarray
    material_mul: np.ndarray
    material_add: np.ndarray
    material_out: np.ndarray
    visible: np.ndarray
    ik_disabled: np.ndarray
    bone_driven: np.ndarray
    bone_refresh: np.ndarray
    bone_state: tuple = field(init=False, repr=False)
    morph_state: tuple = field(init=False, repr=False)
    morph_out: tuple = field(init=False, repr=False)
    frame_out: tuple = field(init=False, repr=False)
    coupling: tuple = field(init=False, repr=False)

    def __post_init__(self):
        """Group the arrays into the tuples the kernels take (built once: no per-frame tuples)."""
        self.bone_state = (self.bone_anim_t, self.bone_anim_q, self.bone_ik_q, self.bone_append_t,
                           self.bone_append_q, self.bone_local_t, self.bone_local_q, self.bone_world_p,
                           self.bone_world_q, self.ik_chain)
        self.morph_state = (self.morph_raw_weight, self.morph_effective_weight, self.morph_vertex_prev,
                            self.morph_uv_prev)
        self.morph_out = (self.morph_weight, self.vertex_offset, self.uv_offset, self.additional_uv_offset,
                          self.material_mul, self.material_add, self.material_out)
        self.frame_out = (self.ik_enabled, self.visible, self.bone_world, self.bone_skin)
        self.coupling = (self.ik_disabled, self.bone_driven, self.bone_refresh)

    @classmethod
    def for_rig(cls, rig) -> "PoseState":
        """A state at rest for ``rig`` (see the class docstring for the shapes)."""
        B, K, N = len(rig.bone_parent), len(rig.ik_target), len(rig.morph_kind)
        V, A, Mn = rig.num_vertices, rig.num_additional_uv, len(rig.material_base)
        return cls(*new_bone_state(B, rig.ik_path_start), bone_world=np.zeros((B, 4, 4), np.float32),
                   bone_skin=np.zeros((B, 4, 4), np.float32), ik_enabled=np.ones(K, np.uint8),
                   morph_raw_weight=np.zeros(N), morph_effective_weight=np.zeros(N),
                   morph_vertex_prev=np.zeros(N), morph_uv_prev=np.zeros(N),
                   morph_weight=np.zeros(N, np.float32), vertex_offset=np.zeros((V, 3), np.float32),
                   uv_offset=np.zeros((V, 4), np.float32), additional_uv_offset=np.zeros((V, A, 4), np.float32),
                   material_mul=np.ones((Mn, 28)), material_add=np.zeros((Mn, 28)),
                   material_out=np.zeros((Mn, 16), np.float32), visible=np.ones(1, np.uint8),
                   ik_disabled=np.zeros(K, np.uint8), bone_driven=np.zeros(0, np.int32),
                   bone_refresh=np.zeros(0, np.int32))

    def set_driven(self, rig, bone_driven_mask: np.ndarray) -> None:
        """Couple to a simulator that writes the bone_world rows of ``bone_driven_mask`` (B,) bool
        between the two bone passes: fills bone_driven, bone_refresh and ik_disabled."""
        driven = np.asarray(bone_driven_mask, bool)
        self.bone_driven = np.nonzero(driven)[0].astype(np.int32)
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
        self.bone_refresh = np.asarray(refresh, np.int32)
        for k in range(len(self.ik_disabled)):
            links = rig.ik_link_bone[rig.ik_link_start[k]:rig.ik_link_start[k + 1]]
            self.ik_disabled[k] = len(links) > 0 and bool(driven[links].all())
        self.coupling = (self.ik_disabled, self.bone_driven, self.bone_refresh)
