"""The floor under the character: MMD's ground (a grid on a plain floor) for the ground shadow
to fall on.

In: the GL context, the floor's centre (3,) and half size (MMD units, y ignored: the floor is
y = 0), per frame the camera matrices (as ``passes.gl_matrix`` lays them out), the eye's distance
to what it frames and the background colour. Out: the floor drawn into the bound framebuffer
behind everything (no depth written), fading into the background from 1.5 to 3 eye distances
away (a soft horizon).
"""

from __future__ import annotations

import moderngl
import numpy as np

from mmdkit.render.context import compile_program, shader_source

FLOOR_COLOR = (0.90, 0.90, 0.91)
FLOOR_LINE_COLOR = (0.78, 0.78, 0.81)
GRID_UNITS = 5.0  # MMD's ground grid: a line every 5 units


class Floor:
    """A square on y = 0 around ``center`` reaching ``radius`` units each way (``place``)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.program = compile_program(ctx, "floor", vertex_shader=shader_source("floor.vert"),
                                       fragment_shader=shader_source("floor.frag"))
        corners = np.array([-1, -1, 1, -1, -1, 1, 1, 1], np.float32)
        self._vbo = ctx.buffer(corners.tobytes())
        self._vao = ctx.vertex_array(self.program, [(self._vbo, "2f", "in_corner")])
        p = self.program
        p["u_grid"].value = GRID_UNITS
        p["u_color"].value = FLOOR_COLOR
        p["u_line_color"].value = FLOOR_LINE_COLOR
        self.place((0.0, 0.0, 0.0), 50.0)

    def place(self, center, radius: float) -> None:
        """Centre (3,) MMD space and half size (units) of the floor."""
        p = self.program
        p["u_center"].value = (float(center[0]), 0.0, float(center[2]))
        p["u_radius"].value = float(max(radius, 1e-3))

    def draw(self, view_gl, proj_gl, background, eye_distance: float) -> None:
        """Camera matrices as ``passes.gl_matrix`` lays them out."""
        p = self.program
        p["u_fade"].value = (1.5 * eye_distance, 3.0 * eye_distance)
        p["u_view"].write(view_gl)
        p["u_proj"].write(proj_gl)
        p["u_background"].value = tuple(float(c) for c in background)
        self.ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)  # behind everything, writes no depth
        self._vao.render(moderngl.TRIANGLE_STRIP)
