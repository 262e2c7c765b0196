// The floor: a square on y = 0 (MMD space), u_radius units either side of u_center.
uniform mat4 u_view; uniform mat4 u_proj; uniform vec3 u_center; uniform float u_radius;
in vec2 in_corner;  // (-1 or 1, -1 or 1)
out vec2 v_xz;      // MMD x, z of this point of the floor
out float v_depth;  // its distance in front of the eye

void main() {
    v_xz = u_center.xz + in_corner * u_radius;
    vec4 vp = u_view * vec4(v_xz.x, 0.0, v_xz.y, 1.0);
    v_depth = -vp.z;
    gl_Position = u_proj * vp;
}
