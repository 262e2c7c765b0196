// MMD-style shading: ambient + diffuse × light, texture, sphere map (mul/add), toon ramp
// looked up at v = 0.5 − 0.5·N·L (lit at the top), specular (edges and the ground shadow are
// drawn by flat.frag).
// With SELF_SHADOW (MMD's formula): lit = shadow-map test (4 bilinear PCF taps), comp =
// min(lit, saturate(3·N·L)), toon = mix(darkest toon, brightest toon, comp) — compiled in only
// when asked for (CPU rasterisers pay for dead branches: llvmpipe runs both sides of an if).
// SPHERE compiles in the sphere map, TINTS the material-morph tints; without them the program
// draws the materials with no sphere map while no tint is on (the same pixels: a tint off is
// colour * 1 + 0), for less work a fragment.
uniform vec4 u_diffuse; uniform vec3 u_ambient; uniform vec3 u_specular; uniform float u_spec_power;
uniform vec3 u_light_dir; uniform vec3 u_light_color;
uniform sampler2D u_tex; uniform sampler2D u_toon;
uniform bool u_has_tex;
#ifdef SPHERE
uniform sampler2D u_sphere; uniform int u_sphere_mode;
#endif
#ifdef TINTS
// material-morph tints (texture, sphere, toon): colour * mul + add
uniform vec4 u_tex_mul; uniform vec4 u_tex_add; uniform vec4 u_sph_mul; uniform vec4 u_sph_add;
uniform vec4 u_toon_mul; uniform vec4 u_toon_add;
#define TINTED(c, mul, add) ((c) * mul + add)
#else
#define TINTED(c, mul, add) (c)
#endif

in vec3 v_nrm; in vec2 v_uv; in vec3 v_view_nrm; in vec3 v_view_pos; in vec3 v_view_light; in vec4 v_shadow;
out vec4 f_color;

vec3 toon_at(float lambert) {
    return TINTED(texture(u_toon, vec2(0.5, 1.0 - clamp(0.5 - 0.5 * lambert, 0.0, 1.0))), u_toon_mul, u_toon_add).rgb;
}

#ifdef SELF_SHADOW
uniform float u_self_shadow;  // this material receives self-shadow
uniform sampler2DShadow u_shadow_map;

float shadow_lit() {
    vec3 sc = v_shadow.xyz / v_shadow.w * 0.5 + 0.5;
    if (any(lessThan(sc, vec3(0.0))) || any(greaterThan(sc, vec3(1.0)))) return 1.0;
    vec2 texel = 1.0 / vec2(textureSize(u_shadow_map, 0));
    float lit = 0.0;
    for (int i = -1; i <= 1; i += 2)
        for (int j = -1; j <= 1; j += 2)
            lit += texture(u_shadow_map, vec3(sc.xy + vec2(i, j) * 0.5 * texel, sc.z - 0.001));
    return 0.25 * lit;
}
#endif

void main() {
    vec3 N = normalize(v_nrm);
    vec3 L = -u_light_dir;
    vec3 color = clamp(u_ambient + u_diffuse.rgb * u_light_color, 0.0, 1.0);
    float alpha = u_diffuse.a;
    if (u_has_tex) {
        vec4 t = TINTED(texture(u_tex, vec2(v_uv.x, 1.0 - v_uv.y)), u_tex_mul, u_tex_add);
        color *= t.rgb;
        alpha *= t.a;
    }
#ifdef SPHERE
    if (u_sphere_mode != 0) {
        vec3 vn = normalize(v_view_nrm);
        vec2 suv = vec2(vn.x * 0.5 + 0.5, vn.y * 0.5 + 0.5);
        vec3 s = TINTED(texture(u_sphere, suv), u_sph_mul, u_sph_add).rgb;
        if (u_sphere_mode == 1) color *= s; else if (u_sphere_mode == 2) color += s;
    }
#endif
    float lambert = dot(N, L);
#ifdef SELF_SHADOW
    if (u_self_shadow > 0.5) {
        float comp = min(shadow_lit(), clamp(3.0 * lambert, 0.0, 1.0));
        color *= mix(toon_at(-1.0), toon_at(1.0), comp);
    } else {
        color *= toon_at(lambert);
    }
#else
    color *= toon_at(lambert);
#endif
    if (u_spec_power > 0.0) {  // MMD: H = normalize(to eye + to light), in view space here
        vec3 H = normalize(normalize(-v_view_pos) + normalize(v_view_light));
        color += u_specular * pow(max(dot(normalize(v_view_nrm), H), 0.0), u_spec_power) * u_light_color;
    }
    if (alpha < 0.004) discard;
    f_color = vec4(clamp(color, 0.0, 1.0), alpha);
}
