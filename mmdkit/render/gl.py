"""Headless OpenGL renderer (moderngl on EGL): per-frame pose state in, MMD-looking pixels out.

In: a Model (uploaded once; its material rules resolved by ``materials.material_table``), per
frame bone_skin (B,4,4) or (instances,B,4,4) float32 skinning matrices (model space, column
vectors), vertex/UV morph offsets, ``MaterialValues`` after material morphs, camera view/proj
(see ``camera``), light direction/colour and the self-shadow switch.
Out: an (H, W, 3) uint8 RGB image read back from an MSAA framebuffer.
Set-up lives in ``context`` (programs), ``geometry`` (buffers, skinning by a compute shader or
palette batches), ``textures``, ``shadow``, ``floor`` (a ground under the character, when asked
for); the passes of a frame in ``passes``.
"""

from __future__ import annotations

import moderngl
import numpy as np

from mmdkit.errors import OptionError, RenderError
from mmdkit.model.materials import material_table
from mmdkit.model.textures import model_folder
from mmdkit.render import passes
from mmdkit.render.context import build_programs, create_context
from mmdkit.render.floor import Floor
from mmdkit.render.geometry import Geometry
from mmdkit.render.materials import MaterialValues
from mmdkit.render.shadow import ShadowMap
from mmdkit.render.textures import MaterialTextures

LIGHT_COLOR = 154.0 / 255.0  # MMD's default light colour
DEFAULT_LIGHT_DIR = (-0.5, -1.0, 0.5)


class Renderer:
    """Draws one Model (any number of instances) into an offscreen MSAA framebuffer.

    ``palette_size=P`` skins through palette batches of ≤ P bones in a uniform buffer (one
    character only) instead of the bone texture; the picture is the same. ``warnings`` lists
    images that were missing or unreadable.
    """

    def __init__(self, model, size=(1280, 720), msaa: int = 4, *, instances: int = 1,
                 model_dir: str | None = None, ctx=None, edges: bool = True, palette_size: int | None = None,
                 ground_shadow: bool = True, self_shadow: bool = False, shadow_map_size: int = 1024,
                 floor: bool = False):
        self.model = model
        self.width, self.height = int(size[0]), int(size[1])
        self.instances = int(instances)
        if self.width < 1 or self.height < 1:
            raise OptionError("size", f"{size[0]}x{size[1]} has no pixels")
        if self.instances < 1:
            raise OptionError("instances", f"must be at least 1, got {instances}")
        self.edges, self.ground_shadow, self.self_shadow = edges, ground_shadow, self_shadow
        palette = None
        if palette_size:
            from mmdkit.skinning.palette import build_palette_batches

            if self.instances != 1:
                raise OptionError("palette_size", "the palette path draws one character; use the bone "
                                  "texture (no palette) for crowds")
            palette = build_palette_batches(model, int(palette_size), keep_order=True)
        own_context = ctx is None
        self.ctx = ctx = ctx or create_context()
        try:
            self._make_framebuffers(msaa)
        except BaseException:
            if own_context:
                ctx.release()
            raise
        self.programs = build_programs(ctx, palette_size=palette and palette.palette_size, self_shadow=self_shadow)
        self.geometry = Geometry(ctx, model, self.programs, self.instances, palette)
        self.palette = palette
        self.materials = material_table(model)
        folder = model_dir if model_dir is not None else model_folder(model)
        self.textures = MaterialTextures(ctx, self.materials, folder, model.source_extras.get("embedded_textures"))
        self.warnings = self.textures.warnings
        self.shadow = ShadowMap(ctx, model, int(shadow_map_size), self.instances) if self_shadow else None
        self.floor = Floor(ctx) if floor else None
        self._shadow_drawn = False  # the self-shadow map holds the last frame drawn (``render(skinned=True)``)
        # what each frame fills, made once: view, projection and light view-projection as OpenGL
        # reads them, and the picture as read back (bottom row first)
        self._gl_mats = np.empty((3, 4, 4), np.float32)
        self._readback = np.empty((self.height, self.width, 3), np.uint8)

    def _make_framebuffers(self, msaa) -> None:
        ctx = self.ctx
        n = msaa or 0
        if n != int(n) or n < 0 or (n > 1 and (int(n) & (int(n) - 1) or n > ctx.max_samples)):
            can = ", ".join(str(k) for k in [0] + [2 ** e for e in range(1, 8) if 2 ** e <= ctx.max_samples])
            raise OptionError("msaa", f"{msaa} samples cannot be done by this OpenGL "
                              f"({ctx.info.get('GL_RENDERER', '?')}); use one of {can}")
        self._samples = int(n) if n > 1 else 0
        self._targets = []
        self.targets(1)
        self._fbo_ms, self._fbo = self._targets[0]

    def targets(self, count: int) -> None:
        """Keep ``count`` pictures to draw into (``render(..., target=k, read=False)``, then ``read(k)``):
        a caller drawing several views of a frame draws the next while the last is still being
        rasterized (llvmpipe's threads), and reads each back after."""
        ctx, size, samples = self.ctx, (self.width, self.height), self._samples
        try:
            while len(self._targets) < count:
                self._targets.append((
                    ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4, samples=samples)],
                                    depth_attachment=ctx.depth_renderbuffer(size, samples=samples)),
                    ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4)])))
        except moderngl.Error as e:
            raise RenderError(f"this OpenGL cannot make a {size[0]}x{size[1]} picture with {samples} samples "
                              f"per pixel ({e})") from None

    def place_floor(self, center, radius: float) -> None:
        """Where the floor (``floor=True``) lies: centre (3,) MMD space, half size in units."""
        if self.floor is not None:
            self.floor.place(center, radius)

    def set_instance_offsets(self, offsets) -> None:
        """(instances, 3) model-space offsets of each character (crowds)."""
        self.geometry.set_instance_offsets(offsets)

    def render(self, bone_skin, view, proj, *, vertex_offset=None, uv_offset=None,
               materials: MaterialValues | None = None, light_dir=DEFAULT_LIGHT_DIR, light_color=None,
               background=(1.0, 1.0, 1.0), eye_distance: float = 40.0, self_shadow: bool | None = None,
               out: np.ndarray | None = None, skinned: bool = False, target: int = 0,
               read: bool = True) -> np.ndarray | None:
        """Draw one frame; returns (H, W, 3) uint8, C order (``out`` when given, else a new array).

        bone_skin: (B,4,4) or (instances,B,4,4) float32 skinning matrices (column vectors).
        view, proj: (4,4) camera matrices (see mmdkit.render.camera).
        vertex_offset (V,3) or (instances,V,3), uv_offset (V,4) or (instances,V,4): morph offsets
        (one array: the same for every character of a crowd); None: no offsets. Nothing is kept
        from an earlier frame: each call draws from its arguments alone.
        materials: this frame's MaterialValues (``MaterialValues.of_character(ch)``; default: the
        model's own), shared by every character of a crowd.
        light_dir (3,) MMD space, light_color (3,) linear RGB (default MMD's 154/255 grey).
        eye_distance: camera distance, scales edge width as MMD does.
        self_shadow: False switches a self-shadowing renderer's shadow off for this frame (VMD
        self-shadow keys with mode 0); None: as the renderer was built.
        out: an (H, W, 3) uint8 C-ordered array to draw into (a caller that keeps its own
        pictures: then nothing is allocated for the frame).
        skinned: True when this frame's characters were already uploaded and skinned by a render
        just before (the same frame from another view): they are drawn as they are, the morph
        offsets are not sent again.
        target: which of the ``targets`` pictures to draw into; read=False: drawn only (returns
        None: ``resolve(target)``, then ``read(target, out)``).
        """
        ctx, geo, progs = self.ctx, self.geometry, self.programs
        if out is not None and (out.shape != self._readback.shape or out.dtype != np.uint8
                                or not out.flags.c_contiguous or not out.flags.writeable):
            raise OptionError("out", f"needs a writable C-ordered ({self.height}, {self.width}, 3) uint8 array")
        values = materials if materials is not None else MaterialValues.of_model(self.model)
        if not skinned:
            geo.upload(bone_skin, vertex_offset, uv_offset)
        geo.skin(dispatch=not skinned)
        ctx.front_face = "cw"  # MMD's front faces wind clockwise; the view flips z, so cw stays front
        L = np.asarray(light_dir, np.float64)
        if not (np.isfinite(L).all() and L.any()):  # a zero or broken light key: MMD's default light
            L = np.asarray(DEFAULT_LIGHT_DIR, np.float64)
        L = L / np.linalg.norm(L)
        shadow_on = self._prepare_main(bone_skin, values, L, self_shadow, skinned)
        view_gl, proj_gl = passes.gl_matrix(view, self._gl_mats[0]), passes.gl_matrix(proj, self._gl_mats[1])
        self._targets[target][0].use()
        ctx.viewport = (0, 0, self.width, self.height)
        ctx.clear(*background, 1.0, depth=1.0)
        if self.floor is not None:
            self.floor.draw(view_gl, proj_gl, background, eye_distance)
        ctx.enable(moderngl.DEPTH_TEST | moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        color = tuple(float(c) for c in light_color) if light_color is not None else (LIGHT_COLOR,) * 3
        for p in progs.shading:
            passes.vertex_uniforms(p, view_gl, proj_gl, L)
            p["u_light_color"].value = color
        if self.ground_shadow:
            passes.ground_shadow_pass(ctx, geo, progs.ground, self.materials, values, view_gl, proj_gl, L)
        passes.main_pass(ctx, geo, progs, self.materials, values, self.textures, shadow_on)
        if self.edges:
            passes.edge_pass(ctx, geo, progs.flat, self.materials, values, view_gl, proj_gl, L, eye_distance)
        if not read:
            return None
        self.resolve(target)
        return self.read(target, out)

    def _prepare_main(self, bone_skin, values, light_dir, self_shadow, skinned: bool = False) -> bool:
        """Texture units of the shading programs; draws the self-shadow map when it is on this frame
        (returns whether it is); ``skinned`` (this frame again, from another view, the same light):
        the map the first view drew is used again."""
        progs = self.programs.shading
        for p in progs:
            p["u_tex"].value = 1
            p["u_toon"].value = 3
            if self.shadow is not None:
                p["u_self_shadow"].value = 0.0
        self.programs.main["u_sphere"].value = 2
        shadow_on = self.shadow is not None and (self_shadow is None or bool(self_shadow))
        if shadow_on and not (skinned and self._shadow_drawn):
            light_vp_gl = passes.gl_matrix(self.shadow.fit(bone_skin, self.geometry.instance_offset, light_dir),
                                           self._gl_mats[2])
            self.shadow.draw(self.geometry, self.programs.depth, self.materials, values, self.textures,
                             light_vp_gl, light_dir)
            for p in progs:
                p["u_light_vp"].write(light_vp_gl)
                p["u_shadow_map"].value = 4
        elif shadow_on:  # the state the map's drawing leaves (the floor is drawn next)
            self.ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)
        if shadow_on:
            self.shadow.use()
        self._shadow_drawn = shadow_on
        return shadow_on

    def resolve(self, target: int = 0) -> None:
        """Resolve the MSAA picture ``target`` (queued: ``read`` waits for it)."""
        self.ctx.copy_framebuffer(self._targets[target][1], self._targets[target][0])

    def read(self, target: int = 0, out: np.ndarray | None = None) -> np.ndarray:
        """The resolved picture ``target``, top row first, into ``out`` (or a new array)."""
        self._targets[target][1].read_into(self._readback, components=3, alignment=1)
        if out is None:
            out = np.empty_like(self._readback)
        np.copyto(out, self._readback[::-1])
        return out

    def release(self) -> None:
        self.ctx.release()


__all__ = ["Renderer", "create_context", "LIGHT_COLOR"]
