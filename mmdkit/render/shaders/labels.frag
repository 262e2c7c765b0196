// The label pass: camera depth (MMD units) and character id × 256 + part id per pixel, of the
// front-most surface whose alpha (material × texture) is at least u_alpha_cut; with NORMALS its
// unit normal in OpenCV's camera axes (x right, y down, z forward), turned to face the camera; with
// CORRESPONDENCE (appended to buffers.glsl: the Skinned buffer) at location CORR_LOCATION: (the
// drawn triangle's corner nearest the surface point + 1, the triangle's index in the model + 1, the
// interpolated UV (the model's, UV morphs included)). gl_PrimitiveID counts the triangles of this
// draw (one material, reset per instance): u_face_start is the material's first triangle.
uniform vec4 u_diffuse; uniform sampler2D u_tex; uniform bool u_has_tex; uniform float u_alpha_cut;
in float v_depth; in vec2 v_uv; flat in float v_label;
layout(location = 0) out vec2 f_label;
#ifdef NORMALS
in vec3 v_eye_nrm;
layout(location = 1) out vec4 f_normal;
#endif
#ifdef CORRESPONDENCE
uniform mat4 u_view; uniform int u_face_start;
layout(std430, binding = 7) readonly buffer Faces { int face_vertex[]; };  // (faces, 3) the index buffer
in vec3 v_eye_pos; flat in int v_instance;
layout(location = CORR_LOCATION) out vec4 f_corr;
#endif

void main() {
    float a = u_diffuse.a * (u_has_tex ? texture(u_tex, vec2(v_uv.x, 1.0 - v_uv.y)).a : 1.0);
    if (a < u_alpha_cut) discard;
    f_label = vec2(v_depth, v_label);
#ifdef NORMALS
    vec3 n = normalize(v_eye_nrm);
    if (!gl_FrontFacing) n = -n;  // a two-sided material's back, seen from behind
    f_normal = vec4(n.x, -n.y, -n.z, 1.0);
#endif
#ifdef CORRESPONDENCE
    int face = u_face_start + gl_PrimitiveID;
    int nearest = 0; float best = 3.4e38;
    for (int c = 0; c < 3; ++c) {
        int v = face_vertex[3 * face + c];
        vec3 p = (u_view * vec4(skinned[2 * (v_instance * u_num_vertices + v)].xyz, 1.0)).xyz - v_eye_pos;
        float d = dot(p, p);
        if (d < best) { best = d; nearest = v; }
    }
    f_corr = vec4(float(nearest + 1), float(face + 1), v_uv);
#endif
}
