// Self-shadow map pass: depth only; fully transparent texels (alpha-cut hair, lace) cast nothing.
uniform vec4 u_diffuse; uniform sampler2D u_tex; uniform bool u_has_tex;
in vec2 v_uv;
out vec4 f_color;

void main() {
    float a = u_diffuse.a * (u_has_tex ? texture(u_tex, vec2(v_uv.x, 1.0 - v_uv.y)).a : 1.0);
    if (a < 0.004) discard;
    f_color = vec4(1.0);
}
