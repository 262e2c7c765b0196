// GPU skinning (appended to "#version 330", optional defines and pass.glsl by the renderer):
// bone matrices from a float texture (4 texels per bone, column-major) or, with PALETTE, a
// uniform block; BDEF1/2/4 linear blend, SDEF (MMD's formula), QDEF dual-quaternion blend.
// With SKIN_ONLY the skinned position/normal go to transform feedback (tf_pos, tf_nrm).
uniform sampler2D u_bones;
uniform int u_num_bones;
uniform int u_instance;  // first character of this draw (crowds skin one character per call)

in vec3 in_pos; in vec3 in_nrm; in vec4 in_bw;
in vec3 in_c; in vec3 in_r0; in vec3 in_r1;
in ivec4 in_bi; in int in_deform;
in vec3 in_moff; in vec3 in_offset;
#ifdef SKIN_ONLY
out vec3 tf_pos; out vec3 tf_nrm;
#endif

#ifdef PALETTE
layout(std140) uniform Palette { mat4 palette[PALETTE]; };
mat4 bone(int i) { return palette[i]; }
#else
mat4 bone(int i) {
    int row = (u_instance + gl_InstanceID) * u_num_bones + i;
    return mat4(texelFetch(u_bones, ivec2(0, row), 0), texelFetch(u_bones, ivec2(1, row), 0),
                texelFetch(u_bones, ivec2(2, row), 0), texelFetch(u_bones, ivec2(3, row), 0));
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

void main() {
    vec3 p = in_pos + in_moff;
    vec3 n = in_nrm;
    vec3 pos; vec3 nrm;
    if (in_deform == 3) {
        mat4 m0 = bone(in_bi.x); mat4 m1 = bone(in_bi.y);
        float w0 = in_bw.x; float w1 = 1.0 - w0;
        vec4 q = slerp(mat_to_quat(mat3(m0)), mat_to_quat(mat3(m1)), w1);
        vec3 rw = w0 * in_r0 + w1 * in_r1;
        vec3 cr0 = (in_c + (in_c + in_r0 - rw)) * 0.5;
        vec3 cr1 = (in_c + (in_c + in_r1 - rw)) * 0.5;
        pos = qrot(q, p - in_c) + w0 * (m0 * vec4(cr0, 1.0)).xyz + w1 * (m1 * vec4(cr1, 1.0)).xyz;
        nrm = qrot(q, n);
    } else if (in_deform == 4) {
        vec4 r0; vec4 d0; to_dq(bone(in_bi.x), r0, d0);
        vec4 br = in_bw.x * r0; vec4 bd = in_bw.x * d0;
        for (int k = 1; k < 4; ++k) {
            if (in_bw[k] == 0.0) continue;
            vec4 r; vec4 d; to_dq(bone(in_bi[k]), r, d);
            float s = dot(r, r0) < 0.0 ? -in_bw[k] : in_bw[k];
            br += s * r; bd += s * d;
        }
        float len = length(br);
        br /= len; bd /= len;
        vec3 t = 2.0 * (br.w * bd.xyz - bd.w * br.xyz + cross(br.xyz, bd.xyz));
        pos = qrot(br, p) + t;
        nrm = qrot(br, n);
    } else {
        mat4 m = in_bw.x * bone(in_bi.x);
        if (in_deform != 0) {
            m += in_bw.y * bone(in_bi.y);
            if (in_deform != 1) m += in_bw.z * bone(in_bi.z) + in_bw.w * bone(in_bi.w);
        }
        pos = (m * vec4(p, 1.0)).xyz;
        nrm = mat3(m) * n;
    }
    float ln = length(nrm);
    nrm = ln > 1e-8 ? nrm / ln : vec3(0.0, 1.0, 0.0);
    pos += in_offset;
#ifdef SKIN_ONLY
    tf_pos = pos;
    tf_nrm = nrm;
    gl_Position = vec4(pos, 1.0);
#else
    emit(pos, nrm);
#endif
}
