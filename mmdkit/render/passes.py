"""The drawing passes of one frame, in MMD's order: ground shadow, materials, edges.

In: the GL context, the ``Geometry`` (already skinned this frame), a program, the
``MaterialTable`` and this frame's ``MaterialValues``; camera matrices (as ``gl_matrix`` lays
them out: (4, 4) float32, transposed) and the light direction ((3,) float64, unit, MMD space).
Out: triangles drawn into the bound framebuffer. Each pass reads only plain material data: no format rules here.
"""

from __future__ import annotations

import moderngl
import numpy as np

GROUND_SHADOW_COLOR = (0.6, 0.6, 0.62, 1.0)
EDGE_SCALE = 0.0012  # edge width per unit of eye distance per unit of edge size
_NO_TINT = ((1.0,) * 4, (0.0,) * 4)
_TINT_UNIFORMS = (("texture", "u_tex_mul", "u_tex_add"), ("sphere", "u_sph_mul", "u_sph_add"),
                  ("toon", "u_toon_mul", "u_toon_add"))


def _vec(a) -> tuple:
    return tuple(float(x) for x in a)


def gl_matrix(m, out: np.ndarray) -> np.ndarray:
    """A (4, 4) matrix ``m`` (column vectors, row-major) as OpenGL reads a mat4: its transpose as
    float32, written into ``out`` ((4, 4) float32, made once by the caller), which is returned."""
    np.copyto(out, np.asarray(m).T, casting="unsafe")
    return out


def vertex_uniforms(prog, view_gl, proj_gl, light_dir, edge=0.0, ground_shadow=0.0) -> None:
    """What the shared vertex stage reads: camera (view and projection as ``gl_matrix`` gives
    them), light, pass kind."""
    prog["u_view"].write(view_gl)
    prog["u_proj"].write(proj_gl)
    for name, value in (("u_light_dir", tuple(light_dir)), ("u_edge", edge), ("u_ground_shadow", ground_shadow)):
        if name in prog:  # a program whose fragment stage ignores them may have them compiled out
            prog[name].value = value


def ground_shadow_pass(ctx, geo, prog, table, values, view_gl, proj_gl, light_dir) -> None:
    """MMD's ground shadow: the mesh flattened onto y = 0 along the light, one flat colour. Leaves
    blending on (the main pass's state)."""
    vertex_uniforms(prog, view_gl, proj_gl, light_dir, ground_shadow=1.0)
    prog["u_color"].value = GROUND_SHADOW_COLOR
    # flattened, a closed mesh's faces that looked away from the light cover the same
    # silhouette as the others: draw only one side (half the triangles to set up)
    # one colour, opaque: blending would leave it as it is (off: less work a sample), and runs of
    # materials are drawn as one
    ctx.enable(moderngl.CULL_FACE)
    ctx.cull_face = "back"
    ctx.disable(moderngl.BLEND)  # GROUND_SHADOW_COLOR is opaque
    geo.draw_runs([m for m in range(table.num_materials) if table.ground_shadow[m] and values.diffuse[m, 3] > 0.0],
                  "ground")
    ctx.enable(moderngl.BLEND)  # the passes after it blend


def _material_uniforms(prog, m: int, values, has_tex: bool, sphere_mode: int) -> None:
    prog["u_diffuse"].value = _vec(values.diffuse[m])
    prog["u_ambient"].value = _vec(values.ambient[m])
    prog["u_specular"].value = _vec(values.specular[m])
    prog["u_spec_power"].value = float(values.specular_power[m])
    prog["u_has_tex"].value = has_tex
    if "u_sphere_mode" not in prog:  # the plain program: no sphere map, no tints
        return
    for kind, um, ua in _TINT_UNIFORMS:
        tint = values.tints.get(kind)
        mul, add = _NO_TINT if tint is None else (_vec(tint[0][m]), _vec(tint[1][m]))
        if um in prog:
            prog[um].value = mul
            prog[ua].value = add
    prog["u_sphere_mode"].value = sphere_mode


def cull_material(ctx, table, m: int, alpha: float) -> None:
    """Back faces culled for material m where MMD culls them (``MaterialTable.culls``: not
    double-sided, and PMD's rule for translucent materials), else none."""
    if table.culls(m, alpha):
        ctx.enable(moderngl.CULL_FACE)
        ctx.cull_face = "back"
    else:
        ctx.disable(moderngl.CULL_FACE)


def untinted_materials(values) -> np.ndarray:
    """(M,) bool: the materials whose every tint is off this frame (colour * 1 + 0)."""
    out = np.ones(len(values.diffuse), bool)
    for mul, add in values.tints.values():
        out &= (np.asarray(mul) == 1.0).all(axis=1) & (np.asarray(add) == 0.0).all(axis=1)
    return out


def main_pass(ctx, geo, programs, table, values, textures, shadow_on: bool) -> None:
    """Every visible material with MMD's shading, in material order (blending as MMD does):
    ``programs.main``, or ``programs.plain`` for a material without sphere map whose tints are all
    off (``Programs.shading``). ``textures.of(m)`` gives (texture | None, sphere | None, toon) GL textures."""
    untinted = untinted_materials(values)
    for m in range(table.num_materials):
        alpha = values.diffuse[m, 3]
        if not geo.has_faces(m) or alpha <= 0.0:
            continue
        cull_material(ctx, table, m, alpha)
        t, s, toon = textures.of(m)
        sphere_mode = int(table.sphere_mode[m]) if s is not None else 0
        which = "plain" if programs.plain is not None and sphere_mode == 0 and untinted[m] else "main"
        prog = programs.plain if which == "plain" else programs.main
        _material_uniforms(prog, m, values, t is not None, sphere_mode)
        if shadow_on:
            prog["u_self_shadow"].value = float(bool(table.shadow_receive[m]))
        (t or textures.white).use(1)
        if which == "main":
            (s or textures.white).use(2)
        toon.use(3)
        geo.draw(m, which)


def edge_pass(ctx, geo, prog, table, values, view_gl, proj_gl, light_dir, eye_distance: float) -> None:
    """Outlines: back faces pushed out along the normal, in each material's edge colour. Materials
    in a row with the same colour and width are drawn as one run (``Geometry.draw_runs``; for
    crowds only opaque ones, as translucent edges of different characters blend in draw order)."""
    vertex_uniforms(prog, view_gl, proj_gl, light_dir, edge=1.0)
    ctx.enable(moderngl.CULL_FACE)
    ctx.cull_face = "front"
    run, key = [], None
    for m in range(table.num_materials):
        if not geo.has_faces(m) or values.diffuse[m, 3] <= 0.0:
            continue
        if not table.edge[m] or values.edge_size[m] <= 0:
            continue
        color, size = _vec(values.edge_color[m]), float(values.edge_size[m]) * eye_distance * EDGE_SCALE
        if run and (color, size) == key and run[-1] == m - 1 and (geo.instances == 1 or color[3] >= 1.0):
            run.append(m)
            continue
        _edge_run(geo, prog, run, key)
        run, key = [m], (color, size)
    _edge_run(geo, prog, run, key)


def _edge_run(geo, prog, run, key) -> None:
    if run:
        prog["u_color"].value, prog["u_edge_size"].value = key
        geo.draw_runs(run, "flat")
