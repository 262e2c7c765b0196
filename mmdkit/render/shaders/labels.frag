// The label pass: camera depth (MMD units) and character id × 256 + part id per pixel, of the
// front-most surface whose alpha (material × texture) is at least u_alpha_cut; with NORMALS its
// unit normal in OpenCV's camera axes (x right, y down, z forward), turned to face the camera.
uniform vec4 u_diffuse; uniform sampler2D u_tex; uniform bool u_has_tex; uniform float u_alpha_cut;
in float v_depth; in vec2 v_uv; flat in float v_label;
layout(location = 0) out vec2 f_label;
#ifdef NORMALS
in vec3 v_eye_nrm;
layout(location = 1) out vec4 f_normal;
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
}
