// The ground shadow's vertex stage on the compute-skinned path (appended to "#version 430" and
// buffers.glsl): this frame's skinned positions (skin.comp's Skinned buffer, instance k =
// character k) flattened onto y = 0 along the light, and nothing else: no vertex attributes,
// no other pass's branches (llvmpipe shades every vertex of every draw on one thread and runs
// both sides of an if). The arithmetic is pass.glsl's, step for step: the same pixels.
uniform mat4 u_view;
uniform mat4 u_proj;
uniform vec3 u_light_dir;

void main() {
    vec3 pos = skinned[2 * (gl_InstanceID * u_num_vertices + gl_VertexID)].xyz;
    vec3 L = u_light_dir.y < -0.05 ? u_light_dir : vec3(u_light_dir.x, -0.05, u_light_dir.z);
    pos = pos - L * (pos.y / L.y);
    pos.y = 0.01;
    vec4 vp = u_view * vec4(pos, 1.0);
    gl_Position = u_proj * vp;
}
