"""The label pass: per pixel camera depth, character id and body part, drawn by the renderer's own
context from the vertices its frame already skinned (no second skinning, nothing from the CPU).

In: a ``Renderer`` (compute-shader skinning: not the palette path) that has just drawn a frame
(its Skinned buffer holds this frame's vertices), the part id of each vertex (V,) int32, the
view/projection of the view and the frame's ``MaterialValues``. Out: ``draw(...)`` fills an
(H, W, 2) float32 array, top row first: [..., 0] the depth along the camera's forward axis in MMD
units (0: no character), [..., 1] character id × 256 + part id (0: background); with ``normals``
also an (H, W, 3) float32 array of unit normals in OpenCV's camera axes (x right, y down, z
forward; turned to face the camera; 0 on the background); with ``correspondence`` also an (H, W, 4)
float32 array (another render target of the same draw): the drawn triangle's corner nearest the
surface point (vertex index + 1; nearest in 3D), the triangle's index in the model's face list + 1,
and the surface point's UV (the model's UV with UV morphs; DirectX's v down), 0 on the background
(ids exact as float32 up to 2**24). One sample per pixel, at its centre; a surface counts where its
alpha (material × texture) is at least ``ALPHA_CUT``; culling as the main pass; edges and the
ground shadow are not labelled.
"""

from __future__ import annotations

import moderngl
import numpy as np

from mmdkit.errors import OptionError, RenderError
from mmdkit.render import passes
from mmdkit.render.context import compile_program, shader_source

ALPHA_CUT = 0.5
"""Surfaces less opaque than this (lace, blush overlays, glass) are see-through for the labels."""


class LabelPass:
    """A single-sample framebuffer (RG32F labels + depth) beside the renderer's, and its program."""

    def __init__(self, renderer, vertex_part: np.ndarray, normals: bool = False, correspondence: bool = False):
        if renderer.palette is not None:
            raise OptionError("palette_size", "annotated renders skin through the bone texture; leave --palette out")
        self.ren = renderer
        ctx, geo = renderer.ctx, renderer.geometry
        self.normals, self.correspondence = normals, correspondence
        self._corr_attachment = 1 + int(normals)
        defines = "\n".join((["#define NORMALS"] if normals else [])
                            + ([f"#define CORRESPONDENCE\n#define CORR_LOCATION {self._corr_attachment}"]
                               if correspondence else []))
        frag = ("buffers.glsl", "labels.frag") if correspondence else ("labels.frag",)
        self.prog = compile_program(ctx, "label", vertex_shader=shader_source("buffers.glsl", "labels.vert",
                                                                              defines=defines),
                                    fragment_shader=shader_source(*frag, defines=defines))
        for name, value in (("u_num_vertices", geo.num_vertices), ("u_uv_rows", len(geo.uv_rows)),
                            ("u_morph_rows", len(geo.morph_rows)), ("u_tex", 1), ("u_alpha_cut", ALPHA_CUT)):
            if name in self.prog:
                self.prog[name].value = value
        self.fbos = []
        self.targets(1)
        self.fbo = self.fbos[0]
        part = np.zeros(max(geo.num_vertices, 1), np.int32)
        part[:len(vertex_part)] = vertex_part
        self.parts = ctx.buffer(part.tobytes())
        self.faces = ctx.buffer(np.ascontiguousarray(geo.model.face_vertex_index, np.int32).tobytes() or b"\0" * 12) \
            if correspondence else None
        self.vao = geo.bare_vertex_array(self.prog)
        self._gl_mats = np.empty((2, 4, 4), np.float32)
        H, W = renderer.height, renderer.width
        self._readback = np.empty((H, W, 2), np.float32)
        self._normal_back = np.empty((H, W, 4), np.float32) if normals else None
        self._corr_back = np.empty((H, W, 4), np.float32) if correspondence else None

    def targets(self, count: int) -> None:
        """Keep ``count`` label pictures (as ``Renderer.targets``: draw one view's while the last one's
        is still being rasterized, read each after)."""
        ctx, size = self.ren.ctx, (self.ren.width, self.ren.height)
        try:
            while len(self.fbos) < count:
                targets = [ctx.renderbuffer(size, 2, dtype="f4")]
                targets += [ctx.renderbuffer(size, 4, dtype="f4")
                             for _ in range(int(self.normals) + int(self.correspondence))]
                self.fbos.append(ctx.framebuffer(color_attachments=targets,
                                                 depth_attachment=ctx.depth_renderbuffer(size)))
        except moderngl.Error as e:
            raise RenderError(f"this OpenGL cannot make a {size[0]}x{size[1]} label picture ({e})") from None

    def draw(self, view, proj, values, out: np.ndarray | None, normals_out: np.ndarray | None = None,
             target: int = 0, corr_out: np.ndarray | None = None) -> np.ndarray | None:
        """Label the frame the renderer just skinned, seen through (view, proj) (4,4) GL matrices,
        into label picture ``target``; ``out`` (H, W, 2) float32, ``normals_out`` (H, W, 3) and
        ``corr_out`` (H, W, 4) float32 when built with them (the module docstring); ``out`` None:
        drawn only, ``read`` later."""
        ren, prog = self.ren, self.prog
        ctx, geo, table, textures = ren.ctx, ren.geometry, ren.materials, ren.textures
        prog["u_view"].write(passes.gl_matrix(view, self._gl_mats[0]))
        prog["u_proj"].write(passes.gl_matrix(proj, self._gl_mats[1]))
        fbo = self.fbos[target]
        fbo.use()
        ctx.viewport = (0, 0, ren.width, ren.height)
        fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.BLEND)
        ctx.front_face = "cw"
        self.parts.bind_to_storage_buffer(6)
        if self.faces is not None:
            self.faces.bind_to_storage_buffer(7)
        for m in range(table.num_materials):
            alpha = float(values.diffuse[m, 3])
            if not geo.has_faces(m) or alpha < ALPHA_CUT:
                continue
            passes.cull_material(ctx, table, m, alpha)
            t = textures.of(m)[0]
            prog["u_diffuse"].value = tuple(float(x) for x in values.diffuse[m])
            prog["u_has_tex"].value = t is not None
            (t or textures.white).use(1)
            if self.faces is not None:
                prog["u_face_start"].value = geo.ranges[m][0][0] // 3
            geo.draw_with(self.vao, m)
        ctx.disable(moderngl.CULL_FACE)
        return None if out is None else self.read(target, out, normals_out, corr_out)

    def read(self, target: int, out: np.ndarray, normals_out: np.ndarray | None = None,
             corr_out: np.ndarray | None = None) -> np.ndarray:
        """Label picture ``target`` into ``out`` (and ``normals_out``, ``corr_out``), as ``draw`` fills them."""
        fbo = self.fbos[target]
        fbo.read_into(self._readback, components=2, dtype="f4", alignment=1)
        np.copyto(out, self._readback[::-1])
        if normals_out is not None:
            fbo.read_into(self._normal_back, components=4, dtype="f4", alignment=1, attachment=1)
            np.copyto(normals_out, self._normal_back[::-1, :, :3])
        if corr_out is not None:
            fbo.read_into(self._corr_back, components=4, dtype="f4", alignment=1, attachment=self._corr_attachment)
            np.copyto(corr_out, self._corr_back[::-1])
        return out
