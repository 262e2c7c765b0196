"""The model's vertices on the GPU: buffers, vertex arrays, per-frame uploads, skinning, draws.

In: a Model (uploaded once), the compiled ``Programs``, the number of characters and optional
palette batches; per frame bone_skin (instances, B, 4, 4) float32 model space, vertex morph
offsets (instances, V, 3) and UV morph offsets (instances, V, 4) float32.
Out: draw calls of one material's triangles for every character with a chosen program: one
instanced call per material (instance k = character k), and one compute dispatch that skins
every character per frame.
State: the bone texture (4 RGBA32F texels per bone, all characters stacked) or the palette
uniform buffer; the storage buffers the shaders index by character and vertex
(shaders/buffers.glsl, skin.comp): morph offsets, UV offsets and, without palettes, the skinned
vertices (V × 2 × 4 float32 per character: position, 1, normal, 0). The morph buffers are
orphaned before each write, so an upload does not wait for draws still reading the last frame's.
Each frame's inputs are uploaded as given when they already have the GPU's layout (float32, C
order, one block per character); otherwise they are gathered into host arrays made once at build,
so a frame allocates nothing.
"""

from __future__ import annotations

import moderngl
import numpy as np

_F32 = np.float32
SKIN_GROUP = 64  # vertices per compute work group (skin.comp's local_size_x)


def _inputs_for(prog, inputs):
    """The vertex-array content for ``prog``: attributes it does not read become padding (so no
    GL call names a missing attribute; padding tokens like '8x' stay as they are), buffers it
    reads nothing from are left out."""
    out = []
    for buf, fmt, *names in inputs:
        tokens = fmt.split()
        per_instance = tokens[-1].endswith("/i")
        tokens = [t.removesuffix("/i") for t in tokens]
        kept, layout, named = [], [], iter(names)
        for t in tokens:
            if t.endswith("x"):  # padding
                layout.append(t)
                continue
            n = next(named)
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


def morph_rows(model) -> tuple[np.ndarray, np.ndarray]:
    """The model vertices vertex morphs reach and those UV morphs reach: sorted (M,), (U,) int64.
    A crowd's morph offsets go to the GPU for these rows only (``Geometry.upload``)."""
    return (np.unique(np.asarray(model.vertex_morph_vertex, np.int64)),
            np.unique(np.asarray(model.uv_morph_vertex, np.int64)))


def _slots(rows, num_vertices: int, src) -> np.ndarray:
    """Each GPU vertex's row among ``rows`` ((V',) int32, -1: none)."""
    slot = np.full(num_vertices, -1, np.int32)
    slot[rows] = np.arange(len(rows), dtype=np.int32)
    return slot[src]


def _static_arrays(model, palette, morph_slot, uv_slot):
    """(V', 24) float32 vertex attributes (position, normal, uv, weights, SDEF c/r0/r1, edge
    scale, 2 zeros) and (V', 8) int32 (4 bone indices, deform type, vertex-morph row, UV-morph
    row, 0), in the order the GPU reads them (the palette path duplicates vertices shared by
    batches). Rows are whole vec4s so skin.comp loads each vertex as 6 + 2 vectors."""
    src = slice(None) if palette is None else palette.vertex_source
    bone_index = model.vertex_bone_index if palette is None else palette.vertex_palette_index
    static = np.concatenate([
        model.vertex_position.astype(_F32), model.vertex_normal.astype(_F32), model.vertex_uv.astype(_F32),
        model.vertex_bone_weight.astype(_F32), model.vertex_sdef_c.astype(_F32),
        model.vertex_sdef_r0.astype(_F32), model.vertex_sdef_r1.astype(_F32),
        model.vertex_edge_scale.astype(_F32)[:, None], np.zeros((model.num_vertices, 2), _F32)], axis=1)[src]
    ints = np.concatenate([np.asarray(bone_index, np.int32), model.vertex_deform.astype(np.int32)[src][:, None],
                           morph_slot[:, None], uv_slot[:, None], np.zeros((len(bone_index), 1), np.int32)], axis=1)
    return np.ascontiguousarray(static), np.ascontiguousarray(ints)


def _gpu_layout(values, host: np.ndarray) -> np.ndarray:
    """``values`` as the (instances, rows, ...) float32 C-ordered block ``host`` describes: the
    array itself when it is laid out so (one block for every character, or one per character),
    else ``host`` filled from it (cast and broadcast over the characters)."""
    a = np.asarray(values)
    if a.dtype == _F32 and a.flags.c_contiguous and (a.shape == host.shape
                                                     or (len(host) == 1 and a.shape == host.shape[1:])):
        return a
    host[...] = a.reshape((-1,) + host.shape[1:]) if a.ndim != host.ndim else a
    return host


class _Offsets:
    """One kind of morph offsets (vertex (k=3) or UV (k=4)) on the GPU: a storage buffer of the
    rows ``rows`` that morphs reach, per character, and the host array inputs are gathered into."""

    def __init__(self, ctx, rows, instances: int, k: int):
        self.rows = rows
        self.host = np.zeros((instances, len(rows), k), _F32)
        self.buffer = ctx.buffer(np.zeros((instances, max(len(rows), 1), k), _F32).tobytes())
        self.zero = True  # the buffer holds zeros (no offsets)

    def upload(self, offsets) -> None:
        """(V,k)/(instances,V,k) in model vertex order or (R,k)/(instances,R,k) rows; None: zeros."""
        rows, host = self.rows, self.host
        if not len(rows) or (offsets is None and self.zero):
            return
        if offsets is None:
            host.fill(0.0)
            data = host
        else:
            o = np.asarray(offsets)
            if o.shape[-2] != len(rows):  # model vertex order: keep the rows morphs reach
                if o.dtype == _F32 and o.ndim == 3 and len(o) == len(host):
                    np.take(o, rows, axis=1, out=host, mode="clip")  # clip: no buffering (rows are valid)
                elif o.dtype == _F32 and o.ndim == 2:
                    np.take(o, rows, axis=0, out=host[0], mode="clip")
                    host[1:] = host[0]
                else:
                    host[...] = np.asarray(o, _F32)[..., rows, :]
                data = host
            else:
                data = _gpu_layout(o, host)
        self.buffer.orphan()
        self.buffer.write(data)
        self.zero = offsets is None


class Geometry:
    """Buffers and vertex arrays of one Model drawn as ``instances`` characters."""

    def __init__(self, ctx, model, programs, instances: int, palette=None):
        self.ctx, self.model, self.programs, self.palette = ctx, model, programs, palette
        self.instances = n = int(instances)
        self.num_bones = model.num_bones
        self.skins_first = programs.skins_first
        faces = model.face_vertex_index if palette is None else palette.face_vertex_index
        self.num_vertices = model.num_vertices if palette is None else len(palette.vertex_source)
        self.ranges = _material_ranges(model, palette)
        src = slice(None) if palette is None else palette.vertex_source
        self.morph_rows, self.uv_rows = morph_rows(model)
        static, ints = _static_arrays(model, palette, _slots(self.morph_rows, model.num_vertices, src),
                                      _slots(self.uv_rows, model.num_vertices, src))
        self._vbo = ctx.buffer(static.tobytes())
        self._ibo_int = ctx.buffer(ints.tobytes())
        # storage buffers 0 and 1: offsets of the vertices morphs reach, per character
        # host copies for inputs that need gathering, cast or broadcasting (zeros: no offsets)
        self._offsets = {"vertex": _Offsets(ctx, self.morph_rows, n, 3), "uv": _Offsets(ctx, self.uv_rows, n, 4)}
        self._morph, self._uvoff = self._offsets["vertex"].buffer, self._offsets["uv"].buffer
        self._skin_host = np.empty((n, self.num_bones, 4, 4), _F32)
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
        p, ctx = self.programs, self.ctx
        inputs = [
            (self._vbo, "3f 3f 2f 4f 3f 3f 3f 1f 8x", "in_pos", "in_nrm", "in_uv", "in_bw", "in_c", "in_r0",
             "in_r1", "in_edge"),
            (self._ibo_int, "4i 1i 1i 1i 4x", "in_bi", "in_deform", "in_morph_slot", "in_uv_slot"),
            (self._inst, "3f/i", "in_offset"),
        ]
        for prog in (p.skin, p.main, p.plain, p.flat, p.depth, p.ground):
            for name, value in (("u_num_vertices", self.num_vertices), ("u_num_bones", self.num_bones),
                                ("u_morph_rows", len(self.morph_rows)), ("u_uv_rows", len(self.uv_rows)),
                                ("u_bones", 0)):  # the bone texture's unit
                if prog is not None and name in prog:
                    prog[name].value = value
        if self.skins_first:
            self._skinned = ctx.buffer(reserve=max(self.num_vertices, 1) * 32 * self.instances)  # storage buffer 2
        index = dict(index_buffer=self._idx, index_element_size=4)
        self._vaos = {which: ctx.vertex_array(prog, _inputs_for(prog, inputs), **index)
                      for which, prog in (("main", p.main), ("plain", p.plain), ("flat", p.flat), ("depth", p.depth))
                      if prog is not None}
        self._vaos["ground"] = self._vaos["flat"] if p.ground is p.flat else self.bare_vertex_array(p.ground)

    # --- per frame --------------------------------------------------------------------
    def set_instance_offsets(self, offsets) -> None:
        """(instances, 3) model-space offsets of each character (crowds)."""
        self.instance_offset = np.ascontiguousarray(offsets, _F32).reshape(self.instances, 3)
        self._inst.write(self.instance_offset.tobytes())

    def upload(self, bone_skin, vertex_offset=None, uv_offset=None) -> None:
        """Bone matrices ((B,4,4) for every character, or (instances,B,4,4) float32) and morph
        offsets ((V,3)/(V,4) in model vertex order, or only the rows ``morph_rows`` names:
        (M,3)/(U,4); for every character, or one per character; None: no offsets, zeros).
        Only the rows of vertices the model's morphs reach are sent, as the CPU skinner reads
        only those; given as such rows and as float32, nothing is copied on the way."""
        pb = self.palette
        if pb is None:  # row-major as given (texel c of a bone is row c; the palette block is row_major)
            self.bone_tex.write(_gpu_layout(bone_skin, self._skin_host))
        else:
            pb.palette_matrices(np.asarray(bone_skin, _F32).reshape(-1, 4, 4), self._palette_buf)  # row-major
            self._palette_ubo.bind_to_uniform_block(0)
        self._offsets["vertex"].upload(vertex_offset)
        self._offsets["uv"].upload(uv_offset)

    def skin(self, dispatch: bool = True) -> None:
        """Skin every character into its slice of the skinned buffer in one compute dispatch
        (nothing to skin on the palette path, which skins while drawing), and bind the storage
        buffers this frame's draws read (``dispatch=False``: only bind, the buffer holds this
        frame's vertices already)."""
        self._morph.bind_to_storage_buffer(0)
        self._uvoff.bind_to_storage_buffer(1)
        if not self.skins_first:
            return
        self._skinned.bind_to_storage_buffer(2)
        self._vbo.bind_to_storage_buffer(3)
        self._ibo_int.bind_to_storage_buffer(4)
        self._inst.bind_to_storage_buffer(5)
        self.bone_tex.use(0)
        V = self.num_vertices
        if V and dispatch:
            self.programs.skin.run(-(-V // SKIN_GROUP), self.instances)
            # only after a dispatch: llvmpipe's barrier waits for every draw queued (another view's)
            self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)

    def read_skinned(self) -> np.ndarray:
        """(instances, V, 2, 3) float32: this frame's skinned positions and normals (model space,
        crowd offset included) read back from the GPU; without palettes only."""
        return np.frombuffer(self._skinned.read(), _F32).reshape(self.instances, -1, 2, 4)[:, :self.num_vertices, :, :3]

    def bare_vertex_array(self, prog):
        """A vertex array drawing the model's triangles with ``prog``, which reads every vertex
        input from the storage buffers (no attributes); draw it with ``draw_with``."""
        return self.ctx.vertex_array(prog, [], index_buffer=self._idx, index_element_size=4)

    def draw_with(self, vao, m: int) -> None:
        """Draw material m's triangles for every character through ``vao`` (``bare_vertex_array``;
        the compute path only)."""
        for first, count, _ in self.ranges[m]:
            vao.render(moderngl.TRIANGLES, vertices=count, first=first, instances=self.instances)

    def has_faces(self, m: int) -> bool:
        return bool(self.ranges[m])

    def draw_runs(self, materials, which: str) -> None:
        """Draw the triangles of ``materials`` (increasing) for every character with program
        ``which`` ('flat' or 'ground'; uniforms shared by all of them), index ranges that follow one
        another as one call: the same triangles in the same order for one character (with more,
        character k's triangles of the run follow character k - 1's)."""
        runs = []
        for m in materials:
            for first, count, batch in self.ranges[m]:
                if runs and batch < 0 and runs[-1][2] < 0 and runs[-1][0] + runs[-1][1] == first:
                    runs[-1][1] += count
                else:
                    runs.append([first, count, batch])
        vao = self._vaos[which]
        for first, count, batch in runs:
            if batch >= 0:
                self._palette_ubo.write(self._palette_buf[batch])
            vao.render(moderngl.TRIANGLES, vertices=count, first=first, instances=self.instances)

    def draw(self, m: int, which: str = "main") -> None:
        """Draw material m's triangles for every character (one instanced call per range) with
        program ``which`` ('main', 'plain', 'flat', 'depth' or 'ground')."""
        vao = self._vaos[which]
        for first, count, batch in self.ranges[m]:
            if batch >= 0:
                self._palette_ubo.write(self._palette_buf[batch])
            vao.render(moderngl.TRIANGLES, vertices=count, first=first, instances=self.instances)
