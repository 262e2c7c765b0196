// The label pass (appended to "#version 430" and buffers.glsl): this frame's skinned vertices
// (skin.comp's Skinned buffer, instance k = character k) with their camera depth, UV (for the
// alpha cut), character id (k + 1) and body-part id (storage buffer 6, one int per vertex); with
// NORMALS also the normal in the GL eye space; with CORRESPONDENCE the GL eye-space position and
// the character (instance) for the fragment stage's nearest-vertex choice.
uniform mat4 u_view; uniform mat4 u_proj;
layout(std430, binding = 3) readonly buffer Static { vec4 vertex_static[]; };  // (V, 6) see geometry.py
layout(std430, binding = 4) readonly buffer Ints { ivec4 vertex_int[]; };     // (V, 2) bones; deform, slots
layout(std430, binding = 6) readonly buffer Parts { int vertex_part[]; };     // (V,) part id
out float v_depth; out vec2 v_uv; flat out float v_label;
#ifdef NORMALS
out vec3 v_eye_nrm;
#endif
#ifdef CORRESPONDENCE
out vec3 v_eye_pos; flat out int v_instance;
#endif

void main() {
    int r = 2 * (gl_InstanceID * u_num_vertices + gl_VertexID);
    vec4 vp = u_view * vec4(skinned[r].xyz, 1.0);
    v_depth = -vp.z;  // along the camera's forward axis, MMD units
    int slot = vertex_int[2 * gl_VertexID + 1].z;
    v_uv = vertex_static[6 * gl_VertexID + 1].zw + uv_offset_of(gl_InstanceID, slot).xy;
    v_label = float((gl_InstanceID + 1) * 256 + vertex_part[gl_VertexID]);
#ifdef NORMALS
    v_eye_nrm = mat3(u_view) * skinned[r + 1].xyz;
#endif
#ifdef CORRESPONDENCE
    v_eye_pos = vp.xyz;
    v_instance = gl_InstanceID;
#endif
    gl_Position = u_proj * vp;
}
