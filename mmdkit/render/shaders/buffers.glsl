// Per-character data in storage buffers, shared by every stage that reads or writes them.
// Character k's rows of a buffer start at k times its rows per character. Morph offsets are
// kept only for the vertices morphs reach: a vertex's slot (-1: none) picks its row.
uniform int u_num_vertices;  // vertices of one character (the palette path: after duplication)
uniform int u_morph_rows;    // vertices vertex morphs reach
uniform int u_uv_rows;       // vertices UV morphs reach
layout(std430, binding = 0) readonly buffer MorphOffsets { float morph_offset[]; };  // (instances, morph rows, 3)
layout(std430, binding = 1) readonly buffer UvOffsets { vec4 uv_offset[]; };        // (instances, uv rows, 4)
layout(std430, binding = 2) buffer Skinned { vec4 skinned[]; };                     // (instances, V, 2) (pos, 1) (nrm, 0)

vec3 morph_offset_of(int character, int slot) {
    if (slot < 0) return vec3(0.0);
    int r = 3 * (character * u_morph_rows + slot);
    return vec3(morph_offset[r], morph_offset[r + 1], morph_offset[r + 2]);
}

vec4 uv_offset_of(int character, int slot) {
    return slot < 0 ? vec4(0.0) : uv_offset[character * u_uv_rows + slot];
}
