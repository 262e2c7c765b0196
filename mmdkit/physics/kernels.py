"""numba kernels that move poses between bones and rigid bodies each frame (no allocation).

In: bone_world (B, 4, 4) float32 model space and the per-body tables of ``setup.BodySetup``.
Out: body targets (R, 4, 4) float32 (where each body's bone puts it) and, after Bullet stepped,
the rows of bone_world that dynamic bodies drive. Public so benchmarks can time the sync alone.
"""

from __future__ import annotations

from numba import njit

__all__ = ["body_targets", "drive_bones"]


@njit(cache=True, nogil=True)
def body_targets(bone_world, body_follow, body_offset, body_target_out):
    """body_target_out[r] = bone_world[body_follow[r]] @ body_offset[r] (body_offset[r] when the
    body follows no bone, body_follow[r] = -1).

    bone_world (B, 4, 4) float32 model space; body_follow (R,) int32; body_offset (R, 4, 4)
    float32 body frame relative to translate(bone_position); body_target_out (R, 4, 4) float32
    model space, written in full.
    """
    for r in range(body_target_out.shape[0]):
        b = body_follow[r]
        if b < 0:
            for i in range(4):
                for j in range(4):
                    body_target_out[r, i, j] = body_offset[r, i, j]
            continue
        for i in range(4):
            for j in range(4):
                s = 0.0
                for k in range(4):
                    s += bone_world[b, i, k] * body_offset[r, k, j]
                body_target_out[r, i, j] = s


@njit(cache=True, nogil=True)
def drive_bones(body_world, drive_body, drive_bone, drive_mode, body_offset_inv, body_active, bone_world_out):
    """bone_world_out[drive_bone[d]] = body_world[r] @ body_offset_inv[r] for each driving body
    r = drive_body[d] that is active; mode 2 keeps the bone's own translation column.

    body_world (R, 4, 4) float32 model space; drive_body, drive_bone, drive_mode (D,) int32;
    body_offset_inv (R, 4, 4) float32; body_active (R,) bool (dynamic now);
    bone_world_out (B, 4, 4) float32 model space, only the driven rows' top 3 rows written.
    """
    for d in range(drive_body.shape[0]):
        r = drive_body[d]
        if not body_active[r]:
            continue
        b = drive_bone[d]
        for i in range(3):
            for j in range(4):
                if drive_mode[d] == 2 and j == 3:
                    continue
                s = 0.0
                for k in range(4):
                    s += body_world[r, i, k] * body_offset_inv[r, k, j]
                bone_world_out[b, i, j] = s
