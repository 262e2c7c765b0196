"""The model's vertices on the GPU: buffers, vertex arrays, per-frame uploads, skinning, draws.

In: a Model (uploaded once), the compiled ``Programs``, the number of characters and optional
palette batches; per frame bone_skin (instances, B, 4, 4) float32 model space, vertex morph
offsets (instances, V, 3) and UV morph offsets (instances, V, 4) float32.
Out: draw calls of one material's triangles for every character with a chosen program.
State: the bone texture (4 RGBA32F texels per bone, all characters stacked) or the palette
uniform buffer, the morph/offset buffers and, with transform feedback, the skinned vertices
(V × 6 float32 per character, one slice each).
"""

from __future__ import annotations

import moderngl
import numpy as np

_F32 = np.float32


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


def _material_ranges(model, palette):
    """Per material a list of (first index, index count, palette batch or -1)."""
    if palette is None:
        starts = model.material_face_start
        return [[(int(starts[m]) * 3, int(starts[m + 1] - starts[m]) * 3, -1)] for m in range(model.num_materials)]
    fs = palette.batch_face_start
    ranges = [[] for _ in range(model.num_materials)]
    for b in range(palette.num_batches):
        ranges[int(palette.batch_material[b])].append((int(fs[b]) * 3, int(fs[b + 1] - fs[b]) * 3, b))
    return ranges


def _static_arrays(model, palette):
    """(V', 22) float32 vertex attributes and (V', 5) int32 bone indices + deform type, in the
    order the GPU reads them (the palette path duplicates vertices shared by batches)."""
    src = slice(None) if palette is None else palette.vertex_source
    bone_index = model.vertex_bone_index if palette is None else palette.vertex_palette_index
    static = np.concatenate([
        model.vertex_position.astype(_F32), model.vertex_normal.astype(_F32), model.vertex_uv.astype(_F32),
        model.vertex_bone_weight.astype(_F32), model.vertex_sdef_c.astype(_F32),
        model.vertex_sdef_r0.astype(_F32), model.vertex_sdef_r1.astype(_F32),
        model.vertex_edge_scale.astype(_F32)[:, None]], axis=1)[src]
    ints = np.concatenate([np.asarray(bone_index, np.int32),
                           model.vertex_deform.astype(np.int32)[src][:, None]], axis=1)
    return np.ascontiguousarray(static), np.ascontiguousarray(ints)


class Geometry:
    """Buffers and vertex arrays of one Model drawn as ``instances`` characters."""

    def __init__(self, ctx, model, programs, instances: int, palette=None):
        self.ctx, self.model, self.programs, self.palette = ctx, model, programs, palette
        self.instances = n = int(instances)
        self.num_bones = model.num_bones
        self.feedback = programs.feedback
        faces = model.face_vertex_index if palette is None else palette.face_vertex_index
        self.num_vertices = V = model.num_vertices if palette is None else len(palette.vertex_source)
        self.ranges = _material_ranges(model, palette)
        static, ints = _static_arrays(model, palette)
        self._vbo = ctx.buffer(static.tobytes())
        self._ibo_int = ctx.buffer(ints.tobytes())
        self._morph = ctx.buffer(np.zeros((n, V, 3), _F32).tobytes())
        self._uvoff = ctx.buffer(np.zeros((n, V, 4), _F32).tobytes())
        self._idx = ctx.buffer(np.ascontiguousarray(np.asarray(faces, np.int32)).tobytes())
        self._inst = ctx.buffer(reserve=n * 3 * 4)
        self.instance_offset = np.zeros((n, 3), _F32)  # (instances, 3) model space
        self._inst.write(self.instance_offset.tobytes())
        if palette is not None:
            self._palette_ubo = ctx.buffer(reserve=palette.palette_size * 64)
            self._palette_buf = np.empty((palette.num_batches, palette.palette_size, 4, 4), _F32)
        else:
            self.bone_tex = ctx.texture((4, self.num_bones * n), 4, dtype="f4")
            self.bone_tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._build_vertex_arrays()

    def _build_vertex_arrays(self) -> None:
        p, V = self.programs, self.num_vertices
        inputs = [
            (self._vbo, "3f 3f 2f 4f 3f 3f 3f 1f", "in_pos", "in_nrm", "in_uv", "in_bw", "in_c", "in_r0",
             "in_r1", "in_edge"),
            (self._ibo_int, "4i 1i", "in_bi", "in_deform"),
            (self._morph, "3f", "in_moff"),
            (self._uvoff, "4f", "in_uvoff"),
            (self._inst, "3f/i", "in_offset"),
        ]
        if self.feedback:
            self._skinned = self.ctx.buffer(reserve=V * 6 * 4 * self.instances)
            self._skin_vaos = self._character_vaos(p.skin, inputs, indexed=False)
            inputs = [(self._skinned, "3f 3f", "in_skin_pos", "in_skin_nrm")] + inputs
        self._vaos = {"main": self._character_vaos(p.main, inputs),
                      "flat": self._character_vaos(p.flat, inputs),
                      "depth": [] if p.depth is None else self._character_vaos(p.depth, inputs)}

    def _character_vaos(self, prog, inputs, indexed: bool = True):
        """Vertex arrays for ``prog``: with transform feedback one per character, its per-character
        attributes (skinned vertices, morph offsets, crowd offset) bound at that character's
        slice; otherwise one instanced array (the palette path: a single character)."""
        ctx, V = self.ctx, self.num_vertices
        index = dict(index_buffer=self._idx, index_element_size=4) if indexed else {}
        vaos = [ctx.vertex_array(prog, _inputs_for(prog, inputs), **index)]
        if not self.feedback:
            return vaos
        slices = [("in_moff", self._morph, "3f", V * 12, 12, 0), ("in_uvoff", self._uvoff, "4f", V * 16, 16, 0),
                  ("in_offset", self._inst, "3f", 12, 12, 1)]
        if any(name == "in_skin_pos" for _, _, *names in inputs for name in names):
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

    # --- per frame --------------------------------------------------------------------
    def set_instance_offsets(self, offsets) -> None:
        """(instances, 3) model-space offsets of each character (crowds)."""
        self.instance_offset = np.ascontiguousarray(offsets, _F32).reshape(self.instances, 3)
        self._inst.write(self.instance_offset.tobytes())

    def upload(self, bone_skin, vertex_offset=None, uv_offset=None) -> None:
        """Bone matrices ((B,4,4) or (instances,B,4,4) float32) and morph offsets ((V,3)/(V,4)
        for every character, or one per character; None keeps the previous frame's)."""
        pb, n = self.palette, self.instances
        if pb is None:
            skin = np.ascontiguousarray(np.asarray(bone_skin, _F32).reshape(-1, 4, 4).transpose(0, 2, 1))
            self.bone_tex.write(skin.tobytes())
        else:
            pb.palette_matrices(np.asarray(bone_skin, _F32).reshape(-1, 4, 4), self._palette_buf)
            self._palette_buf[:] = self._palette_buf.transpose(0, 1, 3, 2)
            self._palette_ubo.bind_to_uniform_block(0)
        for offsets, buf in ((vertex_offset, self._morph), (uv_offset, self._uvoff)):
            if offsets is not None:
                o = offsets if pb is None else np.asarray(offsets)[..., pb.vertex_source, :]
                o = np.broadcast_to(np.asarray(o, _F32), (n,) + np.shape(o)[-2:])
                buf.write(np.ascontiguousarray(o).tobytes())

    def skin(self, fbo) -> None:
        """Transform feedback: skin every character once into its slice of the skinned buffer
        (nothing to do on the palette path, which skins while drawing)."""
        if not self.feedback:
            return
        fbo.use()  # some framebuffer must be complete even for transform feedback
        self.bone_tex.use(0)
        sp, V = self.programs.skin, self.num_vertices
        sp["u_num_bones"].value = self.num_bones
        sp["u_bones"].value = 0
        for k, vao in enumerate(self._skin_vaos):
            sp["u_instance"].value = k
            vao.transform(self._skinned, mode=moderngl.POINTS, vertices=V, buffer_offset=k * V * 24)

    def has_faces(self, m: int) -> bool:
        return bool(self.ranges[m])

    def draw(self, m: int, which: str = "main") -> None:
        """Draw material m's triangles for every character with program ``which``
        ('main', 'flat' or 'depth')."""
        vaos = self._vaos[which]
        for first, count, batch in self.ranges[m]:
            if batch >= 0:
                self._palette_ubo.write(self._palette_buf[batch].tobytes())
            if self.feedback:
                for vao in vaos:
                    vao.render(moderngl.TRIANGLES, vertices=count, first=first)
            else:
                vaos[0].render(moderngl.TRIANGLES, vertices=count, first=first, instances=self.instances)
