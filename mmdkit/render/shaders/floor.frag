// The floor's colour: MMD's grid (a line every u_grid units, anti-aliased by the screen-space
// derivative) on a plain floor; both fade into the background with the distance from the eye
// (the lines from u_fade.x / 2, the floor between u_fade.x and u_fade.y): a soft horizon.
uniform vec3 u_color; uniform vec3 u_line_color; uniform vec3 u_background;
uniform float u_grid; uniform vec2 u_fade;
in vec2 v_xz; in float v_depth;
out vec4 f_color;

void main() {
    vec2 g = v_xz / u_grid;
    vec2 d = abs(fract(g - 0.5) - 0.5) / max(fwidth(g), vec2(1e-6));  // pixels to the nearest line
    float line = (1.0 - clamp(min(d.x, d.y), 0.0, 1.0)) * (1.0 - smoothstep(0.5 * u_fade.x, u_fade.x, v_depth));
    vec3 c = mix(u_color, u_line_color, line);
    f_color = vec4(mix(c, u_background, smoothstep(u_fade.x, u_fade.y, v_depth)), 1.0);
}
