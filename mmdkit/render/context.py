"""OpenGL set-up for the renderer: the headless context, shader sources and the programs.

In: what the renderer was asked for (palette size, self-shadow). Out: a moderngl context
(EGL: GPU driver or Mesa llvmpipe) and ``Programs``: the skin stage (a compute shader, or
skinning while drawing for palettes), the main MMD program, the flat program (edges, ground
shadow) and the self-shadow depth program. Failures are ``UnavailableError``/``RenderError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import moderngl

from mmdkit.errors import RenderError, UnavailableError


def create_context():
    """A standalone OpenGL context of version 4.3 or later (compute shaders, storage buffers)
    through EGL (GPU driver or Mesa llvmpipe)."""
    try:
        return moderngl.create_standalone_context(backend="egl", require=430)
    except Exception as e:  # depends on the machine
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UnavailableError(f"no headless OpenGL (EGL) context ({detail}); install libegl1 libgl1 "
                               "(Debian/Ubuntu: apt-get install libegl1 libgl1 libegl-mesa0)") from e


def shader_source(*names: str, defines: str = "") -> str:
    """GLSL source: '#version 430' (storage buffers), the defines, then the named files of
    shaders/ in order."""
    root = resources.files("mmdkit.render").joinpath("shaders")
    return "\n".join(["#version 430", defines] + [root.joinpath(n).read_text() for n in names])


def compile_program(ctx, what: str, compute: str | None = None, **shaders):
    """A moderngl program (``vertex_shader=``, ``fragment_shader=`` sources) or compute shader
    (``compute``); a driver's compile/link failure becomes one RenderError line naming ``what``."""
    try:
        return ctx.compute_shader(compute) if compute is not None else ctx.program(**shaders)
    except Exception as e:  # a driver that cannot compile or link our GLSL
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else type(e).__name__)
        raise RenderError(f"the {what} shader did not compile on this OpenGL: {detail}") from e


@dataclass
class Programs:
    """skin: the skinning stage (a compute shader; == main with palettes); main: MMD's shading;
    flat: edges and the ground shadow; depth: the self-shadow map (None when off). skins_first: True
    when every character is skinned once per frame into a buffer that the other programs draw
    from. ground: the ground shadow's program: on the skins_first path a lean one reading the
    skinned buffer alone (ground.vert, drawn through ``Geometry.bare_vertex_array``), else ``flat``.
    plain: see ``shading``."""

    skin: object
    main: object
    flat: object
    depth: object | None
    skins_first: bool
    ground: object = None
    plain: object = None

    @property
    def shading(self) -> tuple:
        """The MMD shading programs, which read the same camera, light and texture units: ``main``
        and ``plain`` (compiled without sphere map and material-morph tints, for the materials
        that have neither this frame; the same pixels for less work)."""
        return (self.main,) if self.plain is None else (self.main, self.plain)


def build_programs(ctx, *, palette_size: int | None, self_shadow: bool) -> Programs:
    """Compile the programs. Without a palette, every character's vertices are skinned once per
    frame by one compute dispatch (skin.comp) and drawn by draw.vert; with one, skin.vert skins
    while drawing. Edges/ground shadow and the shadow map have their own tiny fragment stages (a CPU
    rasteriser pays for every branch a shader has)."""
    shadow_define = "#define SELF_SHADOW\n" if self_shadow else ""
    frag = shader_source("mmd.frag", defines=shadow_define + "#define SPHERE\n#define TINTS")
    skins_first = not palette_size
    vert_files = ("buffers.glsl", "pass.glsl", "draw.vert") if skins_first else \
        ("buffers.glsl", "pass.glsl", "skinning.glsl", "skin.vert")
    vert_defines = "" if skins_first else f"#define PALETTE {palette_size}\n"
    vert = shader_source(*vert_files, defines=vert_defines)
    main = compile_program(ctx, "main", vertex_shader=vert, fragment_shader=frag)
    skin = main if not skins_first else \
        compile_program(ctx, "skinning", compute=shader_source("buffers.glsl", "skinning.glsl", "skin.comp"))
    plain = compile_program(ctx, "plain", vertex_shader=vert, fragment_shader=shader_source("mmd.frag", defines=shadow_define))
    # the ground shadow has a lean program of its own on the skins_first path (ground.vert)
    flat_defines = vert_defines + "#define EDGE_PASS\n" + ("" if skins_first else "#define GROUND_PASS\n")
    flat = compile_program(ctx, "edge/shadow", vertex_shader=shader_source(*vert_files, defines=flat_defines),
                           fragment_shader=shader_source("flat.frag"))
    depth = compile_program(ctx, "self-shadow", vertex_shader=vert, fragment_shader=shader_source("depth.frag")) \
        if self_shadow else None
    ground = flat
    if skins_first:
        ground = compile_program(ctx, "ground-shadow", vertex_shader=shader_source("buffers.glsl", "ground.vert"),
                                 fragment_shader=shader_source("flat.frag"))
    else:
        for prog in (main, plain, flat, depth):
            if prog is not None:
                prog["Palette"].binding = 0
    return Programs(skin, main, flat, depth, skins_first, ground, plain)
