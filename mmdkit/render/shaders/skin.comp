// Skin every character at once (appended to "#version 430", buffers.glsl and skinning.glsl by
// the renderer): invocation (v, k) skins vertex v of character k into row k * u_num_vertices + v of the
// Skinned buffer, crowd offset included; the draws read it back (buffers.glsl, draw.vert).
// A compute pass runs on every multiprocessor, where vertex stages may get only a few.
layout(local_size_x = 64) in;
layout(std430, binding = 3) readonly buffer Static { vec4 vertex_static[]; };       // (V, 6) see geometry.py
layout(std430, binding = 4) readonly buffer Ints { ivec4 vertex_int[]; };          // (V, 2) bones; deform, slots
layout(std430, binding = 5) readonly buffer Offsets { float instance_offset[]; };   // (instances, 3)

void main() {
    int v = int(gl_GlobalInvocationID.x);
    if (v >= u_num_vertices) return;
    int k = int(gl_GlobalInvocationID.y);
    int row = k * u_num_vertices + v;
    // (pos, nrm.x) (nrm.yz, uv) (weights) (c, r0.x) (r0.yz, r1.xy) (r1.z, edge, 0, 0)
    vec4 a = vertex_static[6 * v]; vec4 b = vertex_static[6 * v + 1]; vec4 bw = vertex_static[6 * v + 2];
    vec4 c = vertex_static[6 * v + 3]; vec4 d = vertex_static[6 * v + 4]; vec4 e = vertex_static[6 * v + 5];
    ivec4 kind = vertex_int[2 * v + 1];  // deform, morph slot, UV slot, 0
    vec3 p = a.xyz + morph_offset_of(k, kind.y);
    vec3 pos; vec3 nrm;
    skin_vertex(k, p, vec3(a.w, b.xy), bw, vertex_int[2 * v], kind.x, c.xyz, vec3(c.w, d.xy),
                vec3(d.zw, e.x), pos, nrm);
    pos += vec3(instance_offset[3 * k], instance_offset[3 * k + 1], instance_offset[3 * k + 2]);
    skinned[2 * row] = vec4(pos, 1.0);
    skinned[2 * row + 1] = vec4(nrm, 0.0);
}
