// The palette path: skin while drawing (appended to "#version 430", the PALETTE define,
// buffers.glsl, pass.glsl and skinning.glsl by the renderer). One character.
in vec3 in_pos; in vec3 in_nrm; in vec4 in_bw;
in vec3 in_c; in vec3 in_r0; in vec3 in_r1;
in ivec4 in_bi; in int in_deform; in int in_morph_slot;
in vec3 in_offset;

void main() {
    vec3 pos; vec3 nrm;
    skin_vertex(gl_InstanceID, in_pos + morph_offset_of(gl_InstanceID, in_morph_slot), in_nrm,
                in_bw, in_bi, in_deform, in_c, in_r0, in_r1, pos, nrm);
    emit(pos + in_offset, nrm);
}
