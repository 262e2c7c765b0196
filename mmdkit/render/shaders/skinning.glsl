// Skinning of one vertex, shared by skin.comp (every character at once, into the Skinned
// buffer) and skin.vert (the palette path, skinning while drawing): bone matrices from a float
// texture (4 texels per bone, its rows, character k's bones from row k * u_num_bones) or,
// with PALETTE, a uniform block; BDEF1/2/4 linear blend, SDEF (MMD's formula), QDEF
// dual-quaternion blend. Positions and normals in model space.
#ifdef PALETTE
layout(std140, row_major) uniform Palette { mat4 palette[PALETTE]; };  // as given, like the texture
mat4 bone(int character, int i) { return palette[i]; }
#else
uniform sampler2D u_bones;
uniform int u_num_bones;
mat4 bone(int character, int i) {
    int row = character * u_num_bones + i;
    return transpose(mat4(texelFetch(u_bones, ivec2(0, row), 0), texelFetch(u_bones, ivec2(1, row), 0),
                          texelFetch(u_bones, ivec2(2, row), 0), texelFetch(u_bones, ivec2(3, row), 0)));
}
#endif

vec4 mat_to_quat(mat3 m) {
    float tr = m[0][0] + m[1][1] + m[2][2];
    vec4 q;
    if (tr > 0.0) {
        float s = sqrt(tr + 1.0) * 2.0;
        q = vec4((m[1][2] - m[2][1]) / s, (m[2][0] - m[0][2]) / s, (m[0][1] - m[1][0]) / s, 0.25 * s);
    } else if (m[0][0] > m[1][1] && m[0][0] > m[2][2]) {
        float s = sqrt(1.0 + m[0][0] - m[1][1] - m[2][2]) * 2.0;
        q = vec4(0.25 * s, (m[1][0] + m[0][1]) / s, (m[2][0] + m[0][2]) / s, (m[1][2] - m[2][1]) / s);
    } else if (m[1][1] > m[2][2]) {
        float s = sqrt(1.0 + m[1][1] - m[0][0] - m[2][2]) * 2.0;
        q = vec4((m[1][0] + m[0][1]) / s, 0.25 * s, (m[2][1] + m[1][2]) / s, (m[2][0] - m[0][2]) / s);
    } else {
        float s = sqrt(1.0 + m[2][2] - m[0][0] - m[1][1]) * 2.0;
        q = vec4((m[2][0] + m[0][2]) / s, (m[2][1] + m[1][2]) / s, 0.25 * s, (m[0][1] - m[1][0]) / s);
    }
    return normalize(q);
}

vec4 slerp(vec4 a, vec4 b, float t) {
    float d = dot(a, b);
    if (d < 0.0) { b = -b; d = -d; }
    if (d > 0.9995) return normalize(mix(a, b, t));
    float th = acos(d);
    return (sin((1.0 - t) * th) * a + sin(t * th) * b) / sin(th);
}

vec3 qrot(vec4 q, vec3 v) { return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v); }

vec4 qmul(vec4 a, vec4 b) {
    return vec4(a.w * b.xyz + b.w * a.xyz + cross(a.xyz, b.xyz), a.w * b.w - dot(a.xyz, b.xyz));
}

// dual quaternion (real, dual) of a rigid bone matrix
void to_dq(mat4 m, out vec4 qr, out vec4 qd) {
    qr = mat_to_quat(mat3(m));
    qd = 0.5 * qmul(vec4(m[3].xyz, 0.0), qr);
}

// p: rest position + morph offset; n: rest normal; bw/bi/deform: weights, bones, deform type
// (0 BDEF1, 1 BDEF2, 2 BDEF4, 3 SDEF with c/r0/r1, 4 QDEF). nrm comes out unit length.
void skin_vertex(int character, vec3 p, vec3 n, vec4 bw, ivec4 bi, int deform, vec3 c, vec3 r0, vec3 r1,
                 out vec3 pos, out vec3 nrm) {
    if (deform == 3) {
        mat4 m0 = bone(character, bi.x); mat4 m1 = bone(character, bi.y);
        float w0 = bw.x; float w1 = 1.0 - w0;
        vec4 q = slerp(mat_to_quat(mat3(m0)), mat_to_quat(mat3(m1)), w1);
        vec3 rw = w0 * r0 + w1 * r1;
        vec3 cr0 = (c + (c + r0 - rw)) * 0.5;
        vec3 cr1 = (c + (c + r1 - rw)) * 0.5;
        pos = qrot(q, p - c) + w0 * (m0 * vec4(cr0, 1.0)).xyz + w1 * (m1 * vec4(cr1, 1.0)).xyz;
        nrm = qrot(q, n);
    } else if (deform == 4) {
        vec4 rr0; vec4 d0; to_dq(bone(character, bi.x), rr0, d0);
        vec4 br = bw.x * rr0; vec4 bd = bw.x * d0;
        for (int k = 1; k < 4; ++k) {
            if (bw[k] == 0.0) continue;
            vec4 r; vec4 d; to_dq(bone(character, bi[k]), r, d);
            float s = dot(r, rr0) < 0.0 ? -bw[k] : bw[k];
            br += s * r; bd += s * d;
        }
        float len = length(br);
        br /= len; bd /= len;
        vec3 t = 2.0 * (br.w * bd.xyz - bd.w * br.xyz + cross(br.xyz, bd.xyz));
        pos = qrot(br, p) + t;
        nrm = qrot(br, n);
    } else {
        mat4 m = bw.x * bone(character, bi.x);
        if (deform != 0) {
            m += bw.y * bone(character, bi.y);
            if (deform != 1) m += bw.z * bone(character, bi.z) + bw.w * bone(character, bi.w);
        }
        pos = (m * vec4(p, 1.0)).xyz;
        nrm = mat3(m) * n;
    }
    float ln = length(nrm);
    nrm = ln > 1e-8 ? nrm / ln : vec3(0.0, 1.0, 0.0);
}
