// The label pass: camera depth (MMD units) and character id × 256 + part id per pixel, of the
// front-most surface whose alpha (material × texture) is at least u_alpha_cut.
uniform vec4 u_diffuse; uniform sampler2D u_tex; uniform bool u_has_tex; uniform float u_alpha_cut;
in float v_depth; in vec2 v_uv; flat in float v_label;
out vec2 f_label;

void main() {
    float a = u_diffuse.a * (u_has_tex ? texture(u_tex, vec2(v_uv.x, 1.0 - v_uv.y)).a : 1.0);
    if (a < u_alpha_cut) discard;
    f_label = vec2(v_depth, v_label);
}
