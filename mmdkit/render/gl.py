"""Headless OpenGL renderer (moderngl on EGL): GPU skinning from a bone texture, MMD's look.

In: a Model (uploaded once), per frame the pose state — bone_skin (B,4,4) float32 per
character, vertex/UV morph offsets, material colours after morphs — and camera matrices.
Out: an (H, W, 3) uint8 RGB image read back from an MSAA framebuffer.
Skinning runs in the vertex shader: the bone matrices of all characters live in one RGBA32F
texture (4 texels per bone, read with texelFetch — no palette limit); every character of a
crowd is skinned once per frame by transform feedback (its bone rows, offset and own vertex/UV
morph offsets) into its slice of one buffer, which all passes draw from.
BDEF1/2/4, SDEF and QDEF (dual quaternions) are all skinned on the GPU.
With ``palette_size=P`` the renderer instead uses the skinning module's palette batches: each
batch's ≤ P matrices go to a uniform buffer (for drivers with small limits, as D3DX's
ConvertToIndexedBlendedMesh did); the picture is the same.
"""

from __future__ import annotations

import math
import os
import warnings
from importlib import resources

import moderngl
import numpy as np

from mmdkit.model import model as M
from mmdkit.render.camera import light_view_proj
from mmdkit.render.textures import TextureCache, toon_ramp

LIGHT_COLOR = 154.0 / 255.0  # MMD's default light colour


def create_context():
    """A standalone OpenGL 4.5 context through EGL (GPU driver or Mesa llvmpipe)."""
    try:
        return moderngl.create_standalone_context(backend="egl")
    except Exception as e:  # pragma: no cover - depends on the machine
        raise RuntimeError(f"no headless OpenGL (EGL) context: {e}; install libegl1 libgl1 "
                           "(Debian/Ubuntu: apt-get install libegl1 libgl1 libegl-mesa0)") from e


def _shader(*names: str, defines: str = "") -> str:
    """GLSL source: '#version 330', the defines, then the named files of shaders/ in order."""
    root = resources.files("mmdkit.render").joinpath("shaders")
    return "\n".join(["#version 330", defines] + [root.joinpath(n).read_text() for n in names])


def _inputs_for(prog, inputs):
    """The vertex-array content for ``prog``: attributes it does not read become padding (so no
    GL call names a missing attribute), buffers it reads nothing from are left out."""
    out = []
    for buf, fmt, *names in inputs:
        tokens = fmt.split()
        per_instance = tokens[-1].endswith("/i")
        tokens = [t.removesuffix("/i") for t in tokens]
        kept, layout = [], []
        for t, n in zip(tokens, names):
            if n in prog:
                kept.append(n)
                layout.append(t)
            else:
                layout.append(f"{int(t[:-1] or 1) * 4}x")
        if kept:
            out.append((buf, " ".join(layout) + ("/i" if per_instance else ""), *kept))
    return out


class Renderer:
    """Draws one Model (any number of instances) into an offscreen MSAA framebuffer."""

    def __init__(self, model, size=(1280, 720), msaa: int = 4, *, instances: int = 1,
                 model_dir: str | None = None, ctx=None, edges: bool = True, palette_size: int | None = None,
                 ground_shadow: bool = True, self_shadow: bool = False, shadow_map_size: int = 1024):
        self.model = model
        self.width, self.height = int(size[0]), int(size[1])
        self.ctx = ctx or create_context()
        ctx = self.ctx
        self.instances = int(instances)
        self.edges = edges
        self.ground_shadow = ground_shadow
        self.self_shadow = self_shadow
        samples = min(int(msaa), ctx.max_samples) if msaa and msaa > 1 else 0
        self._fbo_ms = ctx.framebuffer(
            color_attachments=[ctx.renderbuffer((self.width, self.height), 4, samples=samples)],
            depth_attachment=ctx.depth_renderbuffer((self.width, self.height), samples=samples))
        self._fbo = ctx.framebuffer(color_attachments=[ctx.renderbuffer((self.width, self.height), 4)])
        V = model.num_vertices
        B = model.num_bones
        self.num_bones = B
        f32 = np.float32
        self.palette = None
        defines = ""
        src = slice(None)
        bone_index = model.vertex_bone_index
        faces = model.face_vertex_index
        starts = model.material_face_start
        self._ranges = [[(int(starts[m]) * 3, int(starts[m + 1] - starts[m]) * 3, -1)]
                        for m in range(model.num_materials)]
        if palette_size:
            from mmdkit.skinning.palette import build_palette_batches

            if self.instances != 1:
                raise ValueError("the palette path draws one character; use the bone texture for crowds")
            pb = self.palette = build_palette_batches(model, int(palette_size), keep_order=True)
            defines = f"#define PALETTE {pb.palette_size}"
            src, bone_index, faces = pb.vertex_source, pb.vertex_palette_index, pb.face_vertex_index
            V = len(pb.vertex_source)
            fs = pb.batch_face_start
            self._ranges = [[] for _ in range(model.num_materials)]
            for b in range(pb.num_batches):
                self._ranges[int(pb.batch_material[b])].append((int(fs[b]) * 3, int(fs[b + 1] - fs[b]) * 3, b))
            self._palette_ubo = ctx.buffer(reserve=pb.palette_size * 64)
            self._palette_buf = np.empty((pb.num_batches, pb.palette_size, 4, 4), f32)
        frag = _shader("mmd.frag", defines="#define SELF_SHADOW" if self_shadow else "")
        # from the bone texture every vertex of every character is skinned once per frame into a
        # buffer (transform feedback) and all passes draw from it; the palette path skins in the
        # drawing vertex shader instead (its matrices change per batch)
        self._feedback = self.palette is None
        if self._feedback:
            self._skin_prog = ctx.program(vertex_shader=_shader("skin.vert", defines="#define SKIN_ONLY"),
                                          varyings=["tf_pos", "tf_nrm"])
            vert = _shader("pass.glsl", "draw.vert")
            self.prog = ctx.program(vertex_shader=vert, fragment_shader=frag)
        else:
            vert = _shader("pass.glsl", "skin.vert", defines=defines)
            self._skin_prog = self.prog = ctx.program(vertex_shader=vert, fragment_shader=frag)
        # the flat passes (edges, ground shadow) and the self-shadow map: the same vertex stage with
        # their own tiny fragment stages (a CPU rasteriser pays for every branch a shader has)
        self._flat_prog = ctx.program(vertex_shader=vert, fragment_shader=_shader("flat.frag"))
        self._depth_prog = ctx.program(vertex_shader=vert, fragment_shader=_shader("depth.frag")) \
            if self_shadow else None
        if self.palette is not None:
            for prog in (self.prog, self._flat_prog, self._depth_prog):
                if prog is not None:
                    prog["Palette"].binding = 0
        static = np.concatenate([
            model.vertex_position.astype(f32), model.vertex_normal.astype(f32), model.vertex_uv.astype(f32),
            model.vertex_bone_weight.astype(f32), model.vertex_sdef_c.astype(f32),
            model.vertex_sdef_r0.astype(f32), model.vertex_sdef_r1.astype(f32),
            model.vertex_edge_scale.astype(f32)[:, None]], axis=1)[src]
        ints = np.concatenate([np.asarray(bone_index, np.int32),
                               model.vertex_deform.astype(np.int32)[src][:, None]], axis=1)
        self._vbo = ctx.buffer(np.ascontiguousarray(static).tobytes())
        self._ibo_int = ctx.buffer(np.ascontiguousarray(ints).tobytes())
        n = self.instances  # morph offsets per character: (instances, V, 3) and (instances, V, 4)
        self._morph = ctx.buffer(np.zeros((n, V, 3), f32).tobytes())
        self._uvoff = ctx.buffer(np.zeros((n, V, 4), f32).tobytes())
        self._idx = ctx.buffer(np.ascontiguousarray(np.asarray(faces, np.int32)).tobytes())
        self._inst = ctx.buffer(reserve=self.instances * 3 * 4)
        self._inst_offsets = np.zeros((self.instances, 3), f32)
        self._inst.write(self._inst_offsets.tobytes())
        inputs = [
            (self._vbo, "3f 3f 2f 4f 3f 3f 3f 1f", "in_pos", "in_nrm", "in_uv", "in_bw", "in_c", "in_r0",
             "in_r1", "in_edge"),
            (self._ibo_int, "4i 1i", "in_bi", "in_deform"),
            (self._morph, "3f", "in_moff"),
            (self._uvoff, "4f", "in_uvoff"),
            (self._inst, "3f/i", "in_offset"),
        ]
        if self._feedback:
            self._skinned = ctx.buffer(reserve=V * 6 * 4 * self.instances)
            self._skin_vaos = self._character_vaos(self._skin_prog, inputs, V, indexed=False)
            inputs = [(self._skinned, "3f 3f", "in_skin_pos", "in_skin_nrm")] + inputs
        self._vaos = {"main": self._character_vaos(self.prog, inputs, V),
                      "flat": self._character_vaos(self._flat_prog, inputs, V),
                      "depth": [] if self._depth_prog is None else self._character_vaos(self._depth_prog, inputs, V)}
        self.bone_tex = ctx.texture((4, B * self.instances), 4, dtype="f4")
        self.bone_tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        folder = model_dir if model_dir is not None else (
            os.path.dirname(model.source_path) if model.source_path else None)
        self.textures = TextureCache(ctx, folder)
        self._toons = [ctx.texture((1, 64), 4, toon_ramp(i)) for i in range(11)]
        for t in self._toons:  # clamped like MMD's toon sampler: the lit end must not wrap to the dark one
            t.repeat_x = t.repeat_y = False
        self._white = ctx.texture((1, 1), 4, bytes([255, 255, 255, 255]))
        self._mat_tex = []
        for m in range(model.num_materials):
            t = self.textures.get(model.texture_path, int(model.material_texture_index[m]))
            s = self.textures.get(model.texture_path, int(model.material_sphere_index[m]))
            if model.material_toon_shared[m]:
                k = int(np.clip(model.material_toon_index[m], 0, 9))
                # MMD looks for a PMD's toon01..10.bmp in the model folder first (models ship
                # their own); PMX shared toons are always MMD's
                own = self.textures.by_name(f"toon{k + 1:02d}.bmp", clamp=True, missing_ok=True) \
                    if model.source_format == "pmd" else None
                toon = own or self._toons[1 + k]
            else:
                toon = self.textures.get(model.texture_path, int(model.material_toon_index[m]), clamp=True)
                toon = toon or self._toons[0]
            self._mat_tex.append((t, s, toon))
        self.warnings = self.textures.warnings
        if self_shadow:
            self._init_self_shadow(int(shadow_map_size))

    def _init_self_shadow(self, size: int) -> None:
        """The shadow map (read through texture unit 4) and what frames the light camera: the
        bones that carry vertices, grown by the farthest any vertex sits from its strongest bone
        (hair, skirts), so the map is spent on the character."""
        from mmdkit.skinning.bounds import strongest_bone

        ctx, model = self.ctx, self.model
        self._shadow_tex = ctx.depth_texture((size, size))
        self._shadow_tex.compare_func = "<="  # sampler2DShadow: hardware comparison, bilinear PCF
        self._shadow_tex.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self._shadow_tex.repeat_x = self._shadow_tex.repeat_y = False
        self._shadow_fbo = ctx.framebuffer(depth_attachment=self._shadow_tex)
        B = self.num_bones
        rest = np.asarray(model.bone_position, np.float64)
        if model.num_vertices:
            sb = strongest_bone(model)
            self._shadow_bones = np.unique(sb)
            reach = np.linalg.norm(np.asarray(model.vertex_position, np.float64) - rest[sb], axis=1).max()
        else:
            self._shadow_bones, reach = np.arange(min(B, 1)), 1.0
        self._bone_rest = np.concatenate([rest, np.ones((B, 1))], axis=1)[self._shadow_bones]
        self._shadow_margin = float(reach) + 0.5

    def _character_vaos(self, prog, inputs, V, indexed: bool = True):
        """Vertex arrays for ``prog``: with transform feedback one per character, its per-character
        attributes (skinned vertices, morph offsets, crowd offset) bound at that character's
        slice; otherwise one instanced array (the palette path: a single character)."""
        ctx = self.ctx
        index = dict(index_buffer=self._idx, index_element_size=4) if indexed else {}
        vaos = [ctx.vertex_array(prog, _inputs_for(prog, inputs), **index)]
        if self._feedback:
            slices = [("in_moff", self._morph, "3f", V * 12, 12, 0), ("in_uvoff", self._uvoff, "4f", V * 16, 16, 0),
                      ("in_offset", self._inst, "3f", 12, 12, 1)]
            if hasattr(self, "_skinned"):
                slices += [("in_skin_pos", self._skinned, "3f", V * 24, 24, 0),
                           ("in_skin_nrm", self._skinned, "3f", V * 24, 24, 0)]
            for k in range(1, self.instances):
                vao = ctx.vertex_array(prog, _inputs_for(prog, inputs), **index)
                for name, buf, fmt, step, stride, divisor in slices:
                    if name in prog:
                        start = 12 if name == "in_skin_nrm" else 0
                        vao.bind(prog[name].location, "f", buf, fmt, offset=k * step + start, stride=stride,
                                 divisor=divisor)
                vaos.append(vao)
        return vaos

    def _draw(self, ranges, which: str = "main") -> None:
        """Draw one material's face ranges for every character with program ``which``
        ('main', 'flat' or 'depth')."""
        vaos = self._vaos[which]
        for first, count, batch in ranges:
            if batch >= 0:
                self._palette_ubo.write(self._palette_buf[batch].tobytes())
            if self._feedback:
                for vao in vaos:
                    vao.render(moderngl.TRIANGLES, vertices=count, first=first)
            else:
                vaos[0].render(moderngl.TRIANGLES, vertices=count, first=first, instances=self.instances)

    def _vertex_uniforms(self, prog, view, proj, light_dir, edge=0.0, ground_shadow=0.0) -> None:
        """What the shared vertex stage reads: camera, light, pass kind."""
        prog["u_view"].write(np.ascontiguousarray(np.asarray(view, np.float32).T).tobytes())
        prog["u_proj"].write(np.ascontiguousarray(np.asarray(proj, np.float32).T).tobytes())
        for name, value in (("u_light_dir", tuple(light_dir)), ("u_edge", edge), ("u_ground_shadow", ground_shadow)):
            if name in prog:  # a program whose fragment stage ignores them may have them compiled out
                prog[name].value = value

    # -------------------------------------------------------------------------------------
    def set_instance_offsets(self, offsets) -> None:
        """(instances, 3) model-space offsets of each character (crowds)."""
        self._inst_offsets = np.ascontiguousarray(offsets, np.float32).reshape(self.instances, 3)
        self._inst.write(self._inst_offsets.tobytes())

    def render(self, bone_skin, view, proj, *, vertex_offset=None, uv_offset=None, diffuse=None,
               light_dir=(-0.5, -1.0, 0.5), light_color=None, background=(1.0, 1.0, 1.0),
               eye_distance: float = 40.0, tints=None, self_shadow: bool | None = None):
        """Draw one frame; returns (H, W, 3) uint8.

        bone_skin: (B,4,4) or (instances,B,4,4) float32 skinning matrices (column vectors).
        view, proj: (4,4) camera matrices (see mmdkit.render.camera).
        vertex_offset (V,3) or (instances,V,3), uv_offset (V,4) or (instances,V,4): morph offsets
        (one array: the same for every character of a crowd).
        diffuse: (M,4) material diffuse after material morphs (default: the model's).
        tints: {'texture'|'sphere'|'toon': (mul (M,4), add (M,4))} from ``Character.material_tint``.
        self_shadow: False switches a self-shadowing renderer's shadow off for this frame (VMD
        self-shadow keys with mode 0); None keeps what the renderer was built with.
        """
        ctx, model = self.ctx, self.model
        pb = self.palette
        if pb is None:
            skin = np.ascontiguousarray(np.asarray(bone_skin, np.float32).reshape(-1, 4, 4).transpose(0, 2, 1))
            self.bone_tex.write(skin.tobytes())
        else:
            pb.palette_matrices(np.asarray(bone_skin, np.float32).reshape(-1, 4, 4), self._palette_buf)
            self._palette_buf[:] = self._palette_buf.transpose(0, 1, 3, 2)
            self._palette_ubo.bind_to_uniform_block(0)
        n = self.instances
        if vertex_offset is not None:  # (V,3) for every character, or (instances,V,3)
            vo = vertex_offset if pb is None else np.asarray(vertex_offset)[..., pb.vertex_source, :]
            vo = np.broadcast_to(np.asarray(vo, np.float32), (n,) + np.shape(vo)[-2:])
            self._morph.write(np.ascontiguousarray(vo).tobytes())
        if uv_offset is not None:
            uo = uv_offset if pb is None else np.asarray(uv_offset)[..., pb.vertex_source, :]
            uo = np.broadcast_to(np.asarray(uo, np.float32), (n,) + np.shape(uo)[-2:])
            self._uvoff.write(np.ascontiguousarray(uo).tobytes())
        diffuse = model.material_diffuse if diffuse is None else diffuse
        p = self.prog
        if self._feedback:  # the bone-texture path: skin every character once, into its slice
            self._fbo_ms.use()  # some framebuffer must be complete even for transform feedback
            self.bone_tex.use(0)
            sp, V = self._skin_prog, self.model.num_vertices
            sp["u_num_bones"].value = self.num_bones
            sp["u_bones"].value = 0
            for k, vao in enumerate(self._skin_vaos):
                sp["u_instance"].value = k
                vao.transform(self._skinned, mode=moderngl.POINTS, vertices=V, buffer_offset=k * V * 24)
        ctx.front_face = "cw"  # MMD's front faces wind clockwise; the view flips z, so cw stays front
        L = np.asarray(light_dir, np.float64)
        L = L / np.linalg.norm(L)
        p["u_tex"].value = 1
        p["u_sphere"].value = 2
        p["u_toon"].value = 3
        shadow_on = self.self_shadow and (self_shadow is None or bool(self_shadow))
        if self.self_shadow:
            p["u_self_shadow"].value = 0.0
        if shadow_on:
            p["u_light_vp"].write(np.ascontiguousarray(self._shadow_pass(bone_skin, L, diffuse).T, np.float32).tobytes())
            p["u_shadow_map"].value = 4
            self._shadow_tex.use(4)
        self._fbo_ms.use()
        ctx.viewport = (0, 0, self.width, self.height)
        ctx.clear(*background, 1.0, depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST | moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self._vertex_uniforms(p, view, proj, L)
        p["u_light_color"].value = tuple(float(c) for c in light_color) if light_color is not None \
            else (LIGHT_COLOR,) * 3
        flags = model.material_flags
        fp = self._flat_prog
        if self.ground_shadow:  # MMD's ground shadow: the mesh flattened onto y = 0 along the light
            self._vertex_uniforms(fp, view, proj, L, ground_shadow=1.0)
            fp["u_color"].value = (0.6, 0.6, 0.62, 1.0)
            # flattened, a closed mesh's faces that looked away from the light cover the same
            # silhouette as the others: draw only one side (half the triangles to set up)
            ctx.enable(moderngl.CULL_FACE)
            ctx.cull_face = "back"
            for m in range(model.num_materials):
                if flags[m] & M.MATERIAL_GROUND_SHADOW and diffuse[m, 3] > 0.0:
                    self._draw(self._ranges[m], "flat")
        if self.edges:
            self._vertex_uniforms(fp, view, proj, L, edge=1.0)
        for pass_edge in ((False, True) if self.edges else (False,)):
            for m in range(model.num_materials):
                if not self._ranges[m] or diffuse[m, 3] <= 0.0:
                    continue
                if pass_edge:  # edges: back faces pushed out along the normal, flat colour
                    if not (flags[m] & M.MATERIAL_EDGE) or model.material_edge_size[m] <= 0:
                        continue
                    ctx.enable(moderngl.CULL_FACE)
                    ctx.cull_face = "front"
                    fp["u_color"].value = tuple(float(x) for x in model.material_edge_color[m])
                    fp["u_edge_size"].value = float(model.material_edge_size[m]) * eye_distance * 0.0012
                    self._draw(self._ranges[m], "flat")
                    continue
                double = (flags[m] & M.MATERIAL_DOUBLE_SIDED) or (
                    model.source_format == "pmd" and diffuse[m, 3] < 1.0)
                if double:
                    ctx.disable(moderngl.CULL_FACE)
                else:
                    ctx.enable(moderngl.CULL_FACE)
                    ctx.cull_face = "back"
                t, s, toon = self._mat_tex[m]
                p["u_diffuse"].value = tuple(float(x) for x in diffuse[m])
                p["u_ambient"].value = tuple(float(x) for x in model.material_ambient[m])
                p["u_specular"].value = tuple(float(x) for x in model.material_specular[m])
                p["u_spec_power"].value = float(model.material_specular_power[m])
                p["u_has_tex"].value = t is not None
                for kind, (um, ua) in (("texture", ("u_tex_mul", "u_tex_add")),
                                       ("sphere", ("u_sph_mul", "u_sph_add")),
                                       ("toon", ("u_toon_mul", "u_toon_add"))):
                    mul, add = ((1.0,) * 4, (0.0,) * 4) if not tints or kind not in tints else (
                        tuple(float(x) for x in tints[kind][0][m]), tuple(float(x) for x in tints[kind][1][m]))
                    if um in p:
                        p[um].value = mul
                        p[ua].value = add
                p["u_sphere_mode"].value = int(model.material_sphere_mode[m]) if s is not None else 0
                if shadow_on:
                    p["u_self_shadow"].value = float(bool(flags[m] & M.MATERIAL_SELF_SHADOW))
                (t or self._white).use(1)
                (s or self._white).use(2)
                toon.use(3)
                self._draw(self._ranges[m])
        ctx.copy_framebuffer(self._fbo, self._fbo_ms)
        data = self._fbo.read(components=3, alignment=1)
        img = np.frombuffer(data, np.uint8).reshape(self.height, self.width, 3)
        return img[::-1]

    def _shadow_pass(self, bone_skin, light_dir, diffuse) -> np.ndarray:
        """Draw the casting materials' depth from the light into the shadow map; returns the
        light's view-projection (fitted around the posed bones of every character)."""
        ctx, model, p = self.ctx, self.model, self._depth_prog
        skin = np.asarray(bone_skin, np.float64).reshape(-1, self.num_bones, 4, 4)[:, self._shadow_bones]
        pts = np.einsum("kbij,bj->kbi", skin[:, :, :3, :], self._bone_rest)  # bone world positions
        offs = self._inst_offsets[:len(skin), None, :]
        pts = (pts + offs).reshape(-1, 3)
        lo, hi = pts.min(0) - self._shadow_margin, pts.max(0) + self._shadow_margin
        light_vp = light_view_proj(light_dir, 0.5 * (lo + hi), 0.5 * float(np.linalg.norm(hi - lo)))
        self._shadow_fbo.use()
        ctx.viewport = (0, 0, self._shadow_tex.width, self._shadow_tex.height)
        self._shadow_fbo.clear(depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)
        ctx.polygon_offset = 1.5, 4.0  # slope-scaled bias against shadow acne
        self._vertex_uniforms(p, light_vp, np.eye(4), light_dir)
        p["u_tex"].value = 1
        flags = model.material_flags
        for m in range(model.num_materials):
            a = float(diffuse[m, 3])
            if not flags[m] & M.MATERIAL_SELF_SHADOW_MAP or a <= 0.0 or (
                    model.source_format == "pmd" and abs(a - 0.98) < 1e-6):  # PMD: alpha 0.98 casts none
                continue
            t = self._mat_tex[m][0]
            p["u_diffuse"].value = tuple(float(x) for x in diffuse[m])
            p["u_has_tex"].value = t is not None
            (t or self._white).use(1)
            self._draw(self._ranges[m], "depth")
        ctx.polygon_offset = 0.0, 0.0
        return light_vp

    def release(self) -> None:
        self.ctx.release()


def model_bounds(model, bone_world=None):
    """(min, max) of the bind-pose vertices (MMD coordinates)."""
    p = model.vertex_position
    if len(p) == 0:
        return np.zeros(3), np.ones(3)
    return p.min(0), p.max(0)


def warn_once(msgs):
    for m in msgs:
        warnings.warn(m, stacklevel=2)


__all__ = ["Renderer", "create_context", "model_bounds", "LIGHT_COLOR", "math"]
