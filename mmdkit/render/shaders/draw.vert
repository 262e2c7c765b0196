// Draw already-skinned vertices (from transform feedback): position and normal in model space.
in vec3 in_skin_pos; in vec3 in_skin_nrm;

void main() {
    emit(in_skin_pos, in_skin_nrm);
}
