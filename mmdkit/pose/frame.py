"""One compiled call for the stages before physics (sample → morphs → bones pass 1 → matrices).

In/out: exactly the arrays ``Character.update`` passes to the individual stage kernels; this
only saves the per-call overhead of ~12 Python→numba calls per frame (same kernels inside).
"""

from __future__ import annotations

from numba import njit

from mmdkit.animation.sampling import sample_bones, sample_scalars, sample_steps
from mmdkit.pose.bones import solve_bones, switch_off_ik, write_matrices
from mmdkit.pose.morph import (apply_bone_morphs, apply_material_morphs, apply_offset_morphs,
                               apply_uv_morphs, expand_weights)


@njit(cache=True, nogil=True)
def frame_before_physics(frame, bk_start, bk_frame, bk_t, bk_q, bk_curve, mk_start, mk_frame, mk_weight,
                         ik_start, ik_frame, ik_value, ik_off, is_leaf, group_start, group_target, group_weight,
                         bm_start, bm_bone, bm_t, bm_q, vm_start, vm_vertex, vm_offset, m_kind, um_start,
                         um_vertex, um_offset, mm_start, mm_material, mm_op, mm_values, mat_base,
                         order, parent, position, flags, append_parent, append_ratio, fixed_axis, bone_ik,
                         ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone, ik_link_mode,
                         ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone, ik_after_start,
                         ik_after_bone, ik_enabled, raw_w, eff_w, prev_vw, prev_uw, morph_weight,
                         vertex_offset, uv_offset, add_uv_offset, mat_mul, mat_add, mat_out,
                         anim_t, anim_q, ik_q, app_t, app_q, local_t, local_q, world_p, world_q,
                         bone_world, bone_skin):
    sample_bones(frame, bk_start, bk_frame, bk_t, bk_q, bk_curve, anim_t, anim_q)
    sample_scalars(frame, mk_start, mk_frame, mk_weight, raw_w)
    sample_steps(frame, ik_start, ik_frame, ik_value, ik_enabled)
    switch_off_ik(ik_enabled, ik_off)
    if raw_w.shape[0] > 0:
        expand_weights(raw_w, is_leaf, group_start, group_target, group_weight, eff_w)
        apply_bone_morphs(eff_w, bm_start, bm_bone, bm_t, bm_q, anim_t, anim_q)
        apply_offset_morphs(eff_w, prev_vw, vm_start, vm_vertex, vm_offset, vertex_offset)
        apply_uv_morphs(eff_w, prev_uw, m_kind, um_start, um_vertex, um_offset, uv_offset, add_uv_offset)
        apply_material_morphs(eff_w, mm_start, mm_material, mm_op, mm_values, mat_mul, mat_add)
        for m in range(eff_w.shape[0]):
            morph_weight[m] = eff_w[m]
    for i in range(mat_out.shape[0]):
        for c in range(mat_out.shape[1]):
            mat_out[i, c] = mat_base[i, c] * mat_mul[i, c] + mat_add[i, c]
    solve_bones(order, parent, position, flags, append_parent, append_ratio, fixed_axis, bone_ik, ik_target,
                ik_loop, ik_limit, ik_link_start, ik_link_bone, ik_link_mode, ik_link_lower, ik_link_upper,
                ik_path_start, ik_path_bone, ik_after_start, ik_after_bone, ik_enabled, anim_t, anim_q, ik_q,
                app_t, app_q, local_t, local_q, world_p, world_q)
    write_matrices(position, world_p, world_q, bone_world, bone_skin)
