"""MMD's self-shadow map: a depth pass from an orthographic light camera fitted each frame.

In: the Model (which bones carry vertices, how far vertices reach from them), per frame
bone_skin (instances, B, 4, 4) float32, the crowd offsets (instances, 3) and the light
direction (3,) float64 unit, MMD space. Out: the depth texture (read by the main pass through
texture unit 4) and the light's (4, 4) view-projection. State: the map and its framebuffer, and
the arrays each frame's fit fills (made once, for the renderer's number of characters).
"""

from __future__ import annotations

import moderngl
import numpy as np

from mmdkit.render.camera import light_view_proj
from mmdkit.render.passes import vertex_uniforms
from mmdkit.skinning.bounds import strongest_bone

SHADOW_UNIT = 4


class ShadowMap:
    """A size² depth map and what frames the light camera: the bones that carry vertices, grown by
    the farthest any vertex sits from its strongest bone (hair, skirts), so the map is spent on
    the character."""

    def __init__(self, ctx, model, size: int, instances: int = 1):
        self.ctx = ctx
        self.texture = ctx.depth_texture((size, size))
        self.texture.compare_func = "<="  # sampler2DShadow: hardware comparison, bilinear PCF
        self.texture.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self.texture.repeat_x = self.texture.repeat_y = False
        self.fbo = ctx.framebuffer(depth_attachment=self.texture)
        B = model.num_bones
        self.num_bones = B
        rest = np.asarray(model.bone_position, np.float64)
        if model.num_vertices:
            sb = strongest_bone(model)
            self.bones = np.unique(sb)
            reach = np.linalg.norm(np.asarray(model.vertex_position, np.float64) - rest[sb], axis=1).max()
        else:
            self.bones, reach = np.arange(min(B, 1)), 1.0
        self.bone_rest = np.concatenate([rest, np.ones((B, 1))], axis=1)[self.bones]  # (K, 4) homogeneous
        self.margin = float(reach) + 0.5
        # per frame, made once: the carrying bones' skinning matrices (float32 as given, float64)
        # and world positions of every character
        self._skin32 = np.empty((instances, len(self.bones), 4, 4), np.float32)
        self._skin = np.empty((instances, len(self.bones), 4, 4), np.float64)
        self._pts = np.empty((instances, len(self.bones), 3), np.float64)
        self.eye_gl = np.eye(4, dtype=np.float32)  # the depth pass's projection (light_vp does it all)

    def fit(self, bone_skin, instance_offset, light_dir) -> np.ndarray:
        """(4, 4) view-projection of a light camera around the posed bones of every character."""
        skin = np.asarray(bone_skin).reshape(-1, self.num_bones, 4, 4)
        if skin.dtype == np.float32 and len(skin) == len(self._skin):
            np.take(skin, self.bones, axis=1, out=self._skin32, mode="clip")  # clip: unbuffered
            np.copyto(self._skin, self._skin32)
            gathered, pts = self._skin, self._pts
        else:  # another layout than the renderer's (one set of bones for a crowd): as it comes
            gathered = np.asarray(skin[:, self.bones], np.float64)
            pts = np.empty(gathered.shape[:2] + (3,))
        np.einsum("kbij,bj->kbi", gathered[:, :, :3, :], self.bone_rest, out=pts)  # bone world positions
        pts += instance_offset[:len(skin), None, :]
        pts = pts.reshape(-1, 3)
        lo, hi = pts.min(0) - self.margin, pts.max(0) + self.margin
        return light_view_proj(light_dir, 0.5 * (lo + hi), 0.5 * float(np.linalg.norm(hi - lo)))

    def draw(self, geo, prog, table, values, textures, light_vp_gl, light_dir) -> None:
        """Depth of the casting materials from the light (alpha-tested against their texture);
        light_vp_gl: the light's view-projection as ``passes.gl_matrix`` lays it out."""
        ctx = self.ctx
        self.fbo.use()
        ctx.viewport = (0, 0, self.texture.width, self.texture.height)
        self.fbo.clear(depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)
        ctx.polygon_offset = 1.5, 4.0  # slope-scaled bias against shadow acne
        vertex_uniforms(prog, light_vp_gl, self.eye_gl, light_dir)
        prog["u_tex"].value = 1
        for m in range(table.num_materials):
            if not table.casts_self_shadow(m, float(values.diffuse[m, 3])):
                continue
            t = textures.of(m)[0]
            prog["u_diffuse"].value = tuple(float(x) for x in values.diffuse[m])
            prog["u_has_tex"].value = t is not None
            (t or textures.white).use(1)
            geo.draw(m, "depth")
        ctx.polygon_offset = 0.0, 0.0

    def use(self) -> None:
        self.texture.use(SHADOW_UNIT)
