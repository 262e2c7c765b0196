// Draw already-skinned vertices (skin.comp's output in the Skinned buffer, instance k =
// character k): position and normal in model space, crowd offset included.
void main() {
    int r = 2 * (gl_InstanceID * u_num_vertices + gl_VertexID);
    emit(skinned[r].xyz, skinned[r + 1].xyz);
}
