// Shared by skin.vert and draw.vert (after buffers.glsl): edge push, ground-shadow projection, view/projection,
// and the varyings mmd.frag reads.
// EDGE_PASS compiles in the edge push, GROUND_PASS the ground projection (the flat program's
// passes); the other programs go without (llvmpipe runs both sides of an if).
uniform mat4 u_view;
uniform mat4 u_proj;
#ifdef EDGE_PASS
uniform float u_edge;       // 1 = edge pass: push along the normal
uniform float u_edge_size;
#endif
#ifdef GROUND_PASS
uniform float u_ground_shadow;  // 1 = project onto the floor (y = 0) along the light
#endif
uniform vec3 u_light_dir;
uniform mat4 u_light_vp;      // self-shadow map's view-projection (MMD coordinates)
in vec2 in_uv; in float in_edge; in int in_uv_slot;
out vec3 v_nrm; out vec2 v_uv; out vec3 v_view_nrm; out vec3 v_view_pos; out vec3 v_view_light; out vec4 v_shadow;

void emit(vec3 pos, vec3 nrm) {
#ifdef EDGE_PASS
    if (u_edge > 0.5) pos += nrm * (u_edge_size * in_edge);
#endif
#ifdef GROUND_PASS
    if (u_ground_shadow > 0.5) {
        vec3 L = u_light_dir.y < -0.05 ? u_light_dir : vec3(u_light_dir.x, -0.05, u_light_dir.z);
        pos = pos - L * (pos.y / L.y);
        pos.y = 0.01;
    }
#endif
    vec4 vp = u_view * vec4(pos, 1.0);
    v_nrm = nrm;
    v_view_nrm = mat3(u_view) * nrm;
    v_view_pos = vp.xyz;
    v_view_light = mat3(u_view) * (-u_light_dir);  // towards the light, view space
    v_uv = in_uv + uv_offset_of(gl_InstanceID, in_uv_slot).xy;
    v_shadow = u_light_vp * vec4(pos, 1.0);
    gl_Position = u_proj * vp;
}
